package mesh

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/meshctl/meshctl/pkg/fault"
)

// EnvFileError is an env-file that cannot be read at apply time. It is bad
// input (exit 2).
type EnvFileError struct {
	Container, Path string
	Err             error
}

func (e *EnvFileError) Error() string {
	return fmt.Sprintf("container %s: env-file %s: %v", e.Container, e.Path, e.Err)
}

// Fault says an unreadable env-file is bad input.
func (e *EnvFileError) Fault() fault.Kind { return fault.BadInput }

// Unwrap returns the cause.
func (e *EnvFileError) Unwrap() error { return e.Err }

// MaxEnvFileSize is the largest env-file meshctl reads.
const MaxEnvFileSize = 1 << 20

// LoadEnv returns the container's environment. Its env-files are read now, in
// order, and env goes over them. name names the container in errors. Values
// are never put in an error.
func (c *Container) LoadEnv(name string) (map[string]string, error) {
	if len(c.EnvFile) == 0 {
		return c.Env, nil
	}
	env := map[string]string{}
	for _, p := range c.EnvFile {
		data, err := readRegular(p, MaxEnvFileSize)
		if err != nil {
			return nil, &EnvFileError{Container: name, Path: p, Err: err}
		}
		vars, err := parseEnvFile(data)
		if err != nil {
			return nil, &EnvFileError{Container: name, Path: p, Err: err}
		}
		maps.Copy(env, vars)
	}
	maps.Copy(env, c.Env)
	return env, nil
}

// readRegular reads the regular file at path, of at most limit bytes. It
// never blocks. open(2) of a FIFO without a writer would wait forever. So the
// file is opened non-blocking, and anything but a regular file is refused
// before a byte is read. That includes a FIFO, a device such as /dev/zero and
// a directory. Its errors name no content.
func readRegular(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot open: %w", unwrapPath(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, unwrapPath(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, &notRegularError{FileKind(fi.Mode())}
	}
	tooLarge := fmt.Errorf("is larger than %s", sizeText(limit))
	if fi.Size() > limit {
		return nil, tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read: %w", unwrapPath(err))
	}
	if int64(len(data)) > limit {
		return nil, tooLarge // it grew while read
	}
	return data, nil
}

// notRegularError is a file that is not a regular one.
type notRegularError struct{ kind string }

func (e *notRegularError) Error() string { return "is not a regular file (" + e.kind + ")" }

// unwrapPath drops the operation and path of a *fs.PathError. The caller's
// error names the file already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// FileKind names the type of a file that is not a regular one.
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}

// sizeText writes a size limit as "1 MiB".
func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// parseEnvFile reads KEY=VALUE lines. Blank lines and lines starting with #
// are skipped. "export " is allowed, and a value may be quoted.
func parseEnvFile(data []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		s = strings.TrimPrefix(s, "export ")
		k, v, ok := strings.Cut(s, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.IndexFunc(k, badKeyRune) >= 0 {
			// The line is not quoted, since it may hold a secret.
			return nil, fmt.Errorf("line %d: not KEY=VALUE", line)
		}
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
		}
		if c, bad := controlIn(v); bad {
			return nil, fmt.Errorf("line %d: the value of %s holds a control character (%s)", line, k, c)
		}
		out[k] = v
	}
	return out, sc.Err()
}

// absEnvFiles makes the env-file paths of f absolute, from dir.
func (f *File) absEnvFiles(dir string) {
	for _, m := range f.Modules {
		if m == nil {
			continue
		}
		for _, c := range m.Containers {
			if c == nil {
				continue
			}
			for i, p := range c.EnvFile {
				if p != "" && !filepath.IsAbs(p) {
					c.EnvFile[i] = filepath.Join(dir, p)
				}
			}
		}
	}
}
