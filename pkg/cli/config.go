package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// This file is the only one that knows viper. It folds MESHCTL_* variables
// and the config file into the global flags the user did not set, so that
// the precedence is flag > env > config file > default, and commands read
// only their typed options.

// configKeys are the keys a config file may hold: the global flags.
var configKeys = []string{"state-dir", "docker-host", "lock-timeout", "output", "quiet", "verbose",
	"ledger", "ledger-ca", "ledger-cert", "ledger-key", "host-name", "metrics-file"}

// loadConfig applies env and config-file values to the unset global flags
// of cmd.
func loadConfig(cmd *cobra.Command) error {
	v := viper.New()
	v.SetEnvPrefix("MESHCTL")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()

	flags := cmd.Flags()
	path, explicit := configPath(flags)
	if path != "" {
		data, err := readConfigFile(path)
		if err == nil {
			v.SetConfigType("yaml")
			err = v.ReadConfig(bytes.NewReader(data))
		}
		if err != nil {
			if !explicit && errors.Is(err, os.ErrNotExist) {
				path = ""
			} else {
				return usageErrorf("config file %s: %v", path, err)
			}
		}
		if path != "" {
			if err := checkConfigKeys(path, v.AllKeys()); err != nil {
				return err
			}
		}
	}
	for _, key := range configKeys {
		f := flags.Lookup(key)
		if f == nil || f.Changed || !v.IsSet(key) {
			continue
		}
		if err := f.Value.Set(v.GetString(key)); err != nil {
			return usageErrorf("%s from %s: %v", key, sourceOf(key, path), err)
		}
	}
	return nil
}

// maxConfigSize bounds the config file, which holds a dozen keys at most.
const maxConfigSize = 64 << 10

// readConfigFile reads the config file at path. It must be a regular file
// of at most maxConfigSize bytes. A FIFO, a device such as /dev/zero, or a
// directory is refused without being read, as a mesh file is.
func readConfigFile(path string) ([]byte, error) {
	// O_NONBLOCK, so the open(2) of a FIFO no one writes returns at once.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("larger than %d KiB: a config file holds a few keys", maxConfigSize>>10)
	}
	return data, nil
}

// configPath returns the config file to read and whether the user named it.
// Without --config or MESHCTL_CONFIG it is the first file that exists of
// $XDG_CONFIG_HOME/meshctl/config.yaml and /etc/meshctl/config.yaml.
func configPath(flags *pflag.FlagSet) (string, bool) {
	if f := flags.Lookup("config"); f != nil && f.Changed {
		return f.Value.String(), true
	}
	if p := os.Getenv("MESHCTL_CONFIG"); p != "" {
		return p, true
	}
	xdg := os.Getenv("XDG_CONFIG_HOME")
	if xdg == "" {
		if home, err := os.UserHomeDir(); err == nil {
			xdg = filepath.Join(home, ".config")
		}
	}
	for _, p := range []string{filepath.Join(xdg, "meshctl", "config.yaml"), "/etc/meshctl/config.yaml"} {
		if _, err := os.Stat(p); err == nil {
			return p, false
		}
	}
	return "", false
}

func checkConfigKeys(path string, keys []string) error {
	known := map[string]bool{}
	for _, k := range configKeys {
		known[k] = true
	}
	for _, k := range keys {
		if !known[k] {
			return usageErrorf("config file %s: unknown key %q (known: %s)", path, k, strings.Join(configKeys, ", "))
		}
	}
	return nil
}

func sourceOf(key, path string) string {
	env := "MESHCTL_" + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
	if _, ok := os.LookupEnv(env); ok {
		return "$" + env
	}
	return fmt.Sprintf("config file %s", path)
}
