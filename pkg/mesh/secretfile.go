package mesh

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/lazyre"
)

// FileMount is a secret or a config, a file on the host mounted read-only
// into the container. It is what Compose's secrets and configs are without
// Swarm. Its content is read at apply time, as an env-file's is. Only its
// keyed hash is recorded.
type FileMount struct {
	// Name defaults to the file's base name.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// File is the host file. A relative path is from the mesh file's
	// directory, and absolute once loaded.
	File string `yaml:"file" json:"file"`
	// Target is where the container sees the file. The default is
	// /run/secrets/NAME for a secret and /NAME for a config. A secret's
	// relative target is under /run/secrets, as in Compose.
	Target string `yaml:"target,omitempty" json:"target,omitempty"`
	// hash is the keyed hash of the content as LoadFiles read it.
	hash string
}

// Kinds of FileMount, as the file names them.
const (
	KindSecret = "secrets"
	KindConfig = "configs"
)

// SecretDir is where a secret is mounted by default.
const SecretDir = "/run/secrets"

// MaxSecretFileSize is the largest secret or config file meshctl reads.
const MaxSecretFileSize = 1 << 20

// MountName is the mount's name, its own or else its file's base name.
func (m FileMount) MountName() string {
	if m.Name != "" {
		return m.Name
	}
	return filepath.Base(m.File)
}

// TargetPath is where the container sees the file, for a mount of kind.
func (m FileMount) TargetPath(kind string) string {
	switch {
	case path.IsAbs(m.Target):
		return path.Clean(m.Target)
	case m.Target != "" && kind == KindSecret:
		return path.Join(SecretDir, m.Target)
	case kind == KindSecret:
		return path.Join(SecretDir, m.MountName())
	}
	return "/" + m.MountName()
}

// HasFileMounts reports whether a container of f has a secret or a config.
// Only then does an apply need the host's secret key.
func (f *File) HasFileMounts() bool {
	for _, m := range f.Modules {
		if m == nil {
			continue
		}
		for _, c := range m.Containers {
			if c != nil && len(c.Secrets)+len(c.Configs) > 0 {
				return true
			}
		}
	}
	return false
}

// SecretFileError is a secret or config file that cannot be read at apply
// time. It is bad input (exit 2). It never holds the file's content.
type SecretFileError struct {
	Container, Kind, Name, Path string
	Err                         error
}

func (e *SecretFileError) Error() string {
	kind := strings.TrimSuffix(e.Kind, "s")
	return fmt.Sprintf("container %s: %s %s: file %s %v", e.Container, kind, e.Name, e.Path, e.Err)
}

// Fault says an unreadable secret file is bad input.
func (e *SecretFileError) Fault() fault.Kind { return fault.BadInput }

// Unwrap returns the cause.
func (e *SecretFileError) Unwrap() error { return e.Err }

// LoadFiles reads c's secret and config files now, and returns a copy of c
// that records their hashes. Each content is hashed with key (HMAC-SHA256),
// and Spec records the hash. So a changed content recreates the container.
// Without the key, the label shows nothing a guess can be checked against.
// warnings name the secret files that users other than the owner may read or
// write. They never name the content. name names the container in errors.
func (c *Container) LoadFiles(name string, key []byte) (out Container, warnings []string, err error) {
	out = *c
	if len(key) == 0 && len(c.Secrets)+len(c.Configs) > 0 {
		return Container{}, nil, fmt.Errorf("container %s: no secret key to hash its secret and config files with", name)
	}
	for _, kind := range []string{KindSecret, KindConfig} {
		mounts := slices.Clone(c.mounts(kind))
		for i := range mounts {
			m := &mounts[i]
			data, err := readRegular(m.File, MaxSecretFileSize)
			if err != nil {
				return Container{}, nil, &SecretFileError{Container: name, Kind: kind, Name: m.MountName(), Path: m.File, Err: err}
			}
			if kind == KindSecret {
				if w := secretModeWarning(m.File); w != "" {
					warnings = append(warnings, w)
				}
			}
			m.hash = HashFile(key, data)
			clear(data)
		}
		if kind == KindSecret {
			out.Secrets = mounts
		} else {
			out.Configs = mounts
		}
	}
	return out, warnings, nil
}

func (c *Container) mounts(kind string) []FileMount {
	if kind == KindSecret {
		return c.Secrets
	}
	return c.Configs
}

// secretModeWarning says, naming the file, that other users may read or
// change a secret file. It returns "" when only its owner and group can read
// it. A group is how a container that runs as another user gets to read it.
func secretModeWarning(file string) string {
	fi, err := os.Stat(file)
	if err != nil {
		return ""
	}
	if perm := fi.Mode().Perm(); perm&0o027 != 0 {
		return fmt.Sprintf("secret file %s can be read or changed by other users (mode %04o): chmod 600 it (or 640, for a container user of its group)", file, perm)
	}
	// As with the state directory's files, a file owned by another user, not
	// root, is theirs. They may change it, or make it readable.
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Sprintf("secret file %s is owned by another user (uid %d), who can change it or make it readable: chown it", file, st.Uid)
	}
	return ""
}

// HashFile is how a secret or config file's content is recorded in a spec. It
// is HMAC-SHA256 keyed with the host's secret key.
func HashFile(key, content []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write(content)
	return "hmac-sha256:" + hex.EncodeToString(h.Sum(nil))
}

// SpecFile is a secret or config in a recorded spec.
type SpecFile struct {
	Target string `json:"target"`
	File   string `json:"file"`
	Hash   string `json:"hash"`
}

func specFiles(kind string, mounts []FileMount) map[string]SpecFile {
	if len(mounts) == 0 {
		return nil
	}
	out := make(map[string]SpecFile, len(mounts))
	for _, m := range mounts {
		out[m.MountName()] = SpecFile{Target: m.TargetPath(kind), File: m.File, Hash: m.hash}
	}
	return out
}

func diffFiles(prefix string, have, want map[string]SpecFile) []string {
	var d []string
	for _, k := range sortedKeys(want) {
		if hv, ok := have[k]; !ok || hv != want[k] {
			d = append(d, prefix+k)
		}
	}
	for _, k := range sortedKeys(have) {
		if _, ok := want[k]; !ok {
			d = append(d, prefix+k)
		}
	}
	slices.Sort(d)
	return d
}

var mountNameRE = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// fileMounts checks c's secrets and configs. Each names a file, a valid name
// and a target path of its own.
func (v *validator) fileMounts(at pathFunc, c *Container) {
	targets := map[string]string{}
	for i, vol := range c.Volumes {
		if parts := strings.Split(vol, ":"); len(parts) >= 2 {
			targets[path.Clean(parts[1])] = "volumes" + index(i)
		}
	}
	for _, kind := range []string{KindSecret, KindConfig} {
		names := map[string]bool{}
		for i, m := range c.mounts(kind) {
			p := at(kind, index(i))
			name := m.MountName()
			t := m.TargetPath(kind)
			switch {
			case m.File == "" && !v.undecoded(append(p, "file")...):
				v.fail(p, "file is missing: name the file on the host whose content the container sees")
			case !mountNameRE().MatchString(name):
				v.fail(p, "%q is not a name: letters, digits, '.', '_' and '-' (give name:)", name)
			case names[name]:
				v.fail(p, "%s %q is named twice", strings.TrimSuffix(kind, "s"), name)
			case kind == KindConfig && m.Target != "" && !path.IsAbs(m.Target):
				v.fail(p, "target %q is not an absolute path", m.Target)
			case strings.ContainsAny(m.Target, ":,") || slices.Contains(strings.Split(m.Target, "/"), ".."):
				v.fail(p, "target %q: a path without ':', ',' or '..'", m.Target)
			case strings.ContainsRune(m.File, ':'):
				v.fail(p, "file %q: a path without ':'", m.File)
			case t == "/" || t == SecretDir:
				v.fail(p, "target %q is a directory: give a file path", t)
			case targets[t] != "":
				v.fail(p, "target %s is also the target of %s", t, targets[t])
			}
			names[name] = true
			if targets[t] == "" {
				targets[t] = strings.TrimSuffix(kind, "s") + " " + name
			}
		}
	}
}

// absFileMounts makes the secret and config file paths of f absolute, from
// dir.
func (f *File) absFileMounts(dir string) {
	for _, m := range f.Modules {
		if m == nil {
			continue
		}
		for _, c := range m.Containers {
			if c == nil {
				continue
			}
			for _, l := range [][]FileMount{c.Secrets, c.Configs} {
				for i := range l {
					if l[i].File != "" && !filepath.IsAbs(l[i].File) {
						l[i].File = filepath.Join(dir, l[i].File)
					}
				}
			}
		}
	}
}

// ReferencedFiles returns the env-files, secret files and config files of
// f's containers. Each path comes once, in order.
func (f *File) ReferencedFiles() []string {
	seen := map[string]bool{}
	for _, m := range f.Modules {
		if m == nil {
			continue
		}
		for _, c := range m.Containers {
			if c == nil {
				continue
			}
			for _, p := range c.EnvFile {
				seen[p] = true
			}
			for _, l := range [][]FileMount{c.Secrets, c.Configs} {
				for _, fm := range l {
					seen[fm.File] = true
				}
			}
		}
	}
	return sortedKeys(seen)
}

// ReadReferenced reads a file that a mesh file references, as apply reads
// it. It is bounded, refuses what is not a regular file, and never blocks.
func ReadReferenced(path string) ([]byte, error) {
	return readRegular(path, max(MaxEnvFileSize, MaxSecretFileSize))
}
