// Package state owns meshctl's state directory. It owns the directory's
// location and permissions, and the OS file locks that serialise meshctl
// processes. It also owns the atomic, versioned JSON files they share.
//
// Every file is a JSON object carrying its "version", 1 unless its document
// says its own (Versioned). A newer version is refused, with a word to
// upgrade. Writers hold a lock on a
// separate, stable lock file, never the file they replace. They write a temp
// file, fsync it, rename it over the target and fsync the directory. So a
// reader never sees a torn file, and a kill -9 at any instant leaves every
// file whole.
package state
