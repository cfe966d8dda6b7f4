// Package structure holds tests of the module's layout, not of its code.
// Its one test checks that no package under pkg/ serves tests alone.
// Test support lives under internal/ instead.
package structure
