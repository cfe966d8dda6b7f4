package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set at release time by -ldflags "-X github.com/meshctl/meshctl/pkg/cli.version=…".
var (
	version = ""
	commit  = ""
	date    = ""
)

type versionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Date    string `json:"date"`
	Go      string `json:"go"`
	// Modified is a build from a git checkout with uncommitted changes.
	Modified bool `json:"modified,omitempty"`
}

// buildVersion returns the release's version, else what the Go toolchain
// recorded. For `go install` and `go build`, that is the module version,
// VCS revision and time.
func buildVersion() versionInfo {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(bi, version, commit, date)
}

// versionOf is the version of a build. It is the release's, set by
// -ldflags, else what the Go toolchain recorded in bi. A go build from a
// git checkout records the commit (vcs.revision), its time (vcs.time) and
// whether the work tree had changes (vcs.modified).
func versionOf(bi *debug.BuildInfo, version, commit, date string) versionInfo {
	v := versionInfo{Version: version, Commit: commit, Date: date, Go: runtime.Version()}
	if bi != nil {
		if v.Version == "" && bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		fromVCS := v.Commit == ""
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && fromVCS:
				v.Commit = s.Value
			case s.Key == "vcs.time" && v.Date == "":
				v.Date = s.Value
			case s.Key == "vcs.modified" && fromVCS:
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	return v
}

// String is the version line of "meshctl version" and "meshctl --version".
func (v versionInfo) String() string {
	c := orUnknown(v.Commit)
	if v.Modified {
		c += "+dirty"
	}
	return fmt.Sprintf("meshctl %s (commit %s, built %s, %s)", v.Version, c, orUnknown(v.Date), v.Go)
}

func newVersionCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print meshctl's version",
		Example: `  meshctl version
  meshctl --version
  meshctl version -o json`,
		Annotations: map[string]string{exitStatusKey: `  0    printed; 2 bad usage`},
		Args:        usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			v := buildVersion()
			if env.JSON() {
				return env.PrintJSON(v)
			}
			env.Printf("%s\n", v)
			return nil
		},
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
