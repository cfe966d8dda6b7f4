package cli

import (
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
}

// buildVersion returns the release's version, else what the Go toolchain
// recorded (module version, VCS revision and time for `go install`/`go build`).
func buildVersion() versionInfo {
	v := versionInfo{Version: version, Commit: commit, Date: date, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && v.Commit == "":
				v.Commit = s.Value
			case s.Key == "vcs.time" && v.Date == "":
				v.Date = s.Value
			}
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	return v
}

func newVersionCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print meshctl's version",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			v := buildVersion()
			if env.JSON() {
				return env.PrintJSON(v)
			}
			env.Printf("meshctl %s (commit %s, built %s, %s)\n", v.Version, orUnknown(v.Commit), orUnknown(v.Date), v.Go)
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
