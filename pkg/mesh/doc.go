// Package mesh is the desired-state file. It holds the file's types, its
// strict decoding and validation, and the canonical spec of a container.
// Equality and field-level differences are computed from that spec.
package mesh
