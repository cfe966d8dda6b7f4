package cli

import (
	"bytes"
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func newBuildExportCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "export",
		Short: "Write the whole ledger to stdout as JSON lines, to move it to another store",
		Long: `Write the whole ledger to stdout as JSON lines: a header with the last id
issued, then every plan and build in id order (request order), with its
module, plan, times, image and outcome. 'build import' reads it back into an
empty ledger, such as a new etcd cluster:

  meshctl build export > ledger.jsonl
  meshctl --ledger etcd://10.0.0.1:2379,10.0.0.2:2379 build import ledger.jsonl

Builds the file ledger pruned keep only their outcome and a digest of their
result, as they do in the ledger.`,
		Example: `  meshctl build export > ledger.jsonl
  meshctl --ledger etcd://10.0.0.1:2379,10.0.0.2:2379 build import ledger.jsonl`,
		Annotations: map[string]string{exitStatusKey: `  0    exported
  1    the etcd ledger did not answer
  2    bad usage, a ledger file that cannot be read
  3    the ledger lock was not had within --lock-timeout`},
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBuildExport(cmd.Context(), env)
		},
	}
}

func runBuildExport(ctx context.Context, env *Env) error {
	l, err := openLedger(env)
	if err != nil {
		return err
	}
	defer l.Close()
	n, err := l.Export(ctx, env.Stdout)
	if err != nil {
		return err
	}
	env.Progressf("exported %d builds from %s\n", n, l.Where())
	return nil
}

type buildImportOptions struct {
	file string
}

func newBuildImportCmd(env *Env) *cobra.Command {
	opts := &buildImportOptions{}
	return writesMetrics(&cobra.Command{
		Use:   "import [FILE|-]",
		Short: "Read a ledger written by build export into this empty ledger",
		Long: `Read a ledger written by 'build export' (FILE, or stdin) into the configured
ledger, which must be empty: the same ids, order, plans and outcomes, and
each module's current build. Ids issued afterwards follow the imported ones.
A ledger that has issued an id is refused (exit 2), and so is a malformed
export, a FILE that is neither a regular file nor a pipe (a device, a
directory: refused unread), and an input of more than 256 MiB.`,
		Example: `  meshctl --ledger etcd://10.0.0.1:2379/meshctl build import ledger.jsonl
  meshctl build export | meshctl --ledger etcd://10.0.0.1:2379 build import -`,
		Annotations: map[string]string{exitStatusKey: `  0    imported
  1    the etcd ledger did not answer
  2    bad usage, a malformed export, a ledger that is not empty
  3    the ledger lock was not had within --lock-timeout`},
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.file = args[0]
			}
			return runBuildImport(cmd.Context(), env, opts)
		},
	})
}

func runBuildImport(ctx context.Context, env *Env, opts *buildImportOptions) error {
	// The whole export is read before the ledger is touched, and
	// interruptibly. A stdin or FIFO that never ends must not make the
	// command deaf to signals.
	data, err := interruptible(ctx, "reading the export", func() ([]byte, error) {
		var in io.Reader = env.Stdin
		name := "stdin"
		if opts.file != "" && opts.file != "-" {
			f, err := openImport(opts.file)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			in, name = f, opts.file
		}
		return readImport(in, name, maxImportSize)
	})
	if err != nil {
		return err
	}
	l, err := openLedger(env)
	if err != nil {
		return err
	}
	defer l.Close()
	n, err := l.Import(ctx, bytes.NewReader(data))
	if err != nil {
		return err
	}
	env.Printf("imported %d builds into %s\n", n, l.Where())
	return nil
}

// maxImportSize bounds what build import reads. An export's line is about
// 300 bytes, so 256 MiB holds some 800,000 builds. A larger input, such as
// stdin from /dev/zero, is refused, not read until memory runs out.
const maxImportSize = 256 << 20

// openImport opens the export at path. It may be a regular file or a pipe,
// such as a FIFO or bash's <(…). A device or a directory is refused unread,
// with exit 2.
func openImport(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageErrorf("import: %v", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, usageErrorf("import: %v", err)
	}
	if m := fi.Mode(); !m.IsRegular() && m&os.ModeNamedPipe == 0 {
		f.Close()
		kind := "a device"
		switch {
		case m.IsDir():
			kind = "a directory"
		case m&os.ModeSocket != 0:
			kind = "a socket"
		}
		return nil, usageErrorf("import: %s is not a regular file or a pipe (%s): give an export (meshctl build export > FILE)", path, kind)
	}
	return f, nil
}

// readImport reads the whole export from in, named name, of at most limit
// bytes. A larger one is refused with exit 2.
func readImport(in io.Reader, name string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(in, limit+1))
	if err != nil {
		return nil, usageErrorf("import: %s: %v", name, err)
	}
	if int64(len(data)) > limit {
		return nil, usageErrorf("import: %s is larger than %d MiB, more than an export of 800,000 builds: is it an export?", name, limit>>20)
	}
	return data, nil
}
