// Package convert turns a Compose project into a mesh module. It reads the
// project with compose-go, the library Compose itself uses. So interpolation,
// .env, profiles, overrides and extends work as in Compose. Every key that
// can be carried over is. Any other key is refused by name, with its reason
// and next step, and never dropped.
package convert
