package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

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
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
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
