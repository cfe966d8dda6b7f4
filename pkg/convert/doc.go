// Package convert turns a Compose project into a mesh module. It reads the
// project with compose-go (the library Compose itself uses: interpolation,
// .env, profiles, overrides, extends) and carries over every key it can;
// any other key is refused by name, with its reason and next step, never
// dropped.
package convert
