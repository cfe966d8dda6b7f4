package mesh

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
)

// EnvFileError is an env-file that cannot be read at apply time (exit 2).
type EnvFileError struct {
	Container, Path string
	Err             error
}

func (e *EnvFileError) Error() string {
	return fmt.Sprintf("container %s: env-file %s: %v", e.Container, e.Path, e.Err)
}

// ExitCode maps an unreadable env-file to exit status 2.
func (e *EnvFileError) ExitCode() int { return 2 }

// Unwrap returns the cause.
func (e *EnvFileError) Unwrap() error { return e.Err }

// LoadEnv returns the container's environment: its env-files read now, in
// order, with env over them. name names the container in errors. Values
// are never put in an error.
func (c *Container) LoadEnv(name string) (map[string]string, error) {
	if len(c.EnvFile) == 0 {
		return c.Env, nil
	}
	env := map[string]string{}
	for _, p := range c.EnvFile {
		data, err := os.ReadFile(p)
		if err != nil {
			var cause error = err
			if pe, ok := err.(*os.PathError); ok {
				cause = pe.Err
			}
			return nil, &EnvFileError{Container: name, Path: p, Err: cause}
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

// parseEnvFile reads KEY=VALUE lines; blank lines and lines starting with
// # are skipped, "export " is allowed, a value may be quoted.
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
			// The line is not quoted: it may hold a secret.
			return nil, fmt.Errorf("line %d: not KEY=VALUE", line)
		}
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
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
