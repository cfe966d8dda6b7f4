// Package mesh is the desired-state file: its types, strict decoding and
// validation, and the canonical spec of a container from which equality and
// field-level differences are computed.
package mesh
