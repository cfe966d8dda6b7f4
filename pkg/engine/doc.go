// Package engine is meshctl's narrow view of a Docker engine.
//
// It is the only package of meshctl that imports the Docker client. Its
// exported API uses none of the client's types. So moving to another client
// module changes this package alone.
package engine
