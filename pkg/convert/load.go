package convert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/sirupsen/logrus"

	"github.com/meshctl/meshctl/pkg/fault"
)

// loaded is a Compose project as compose-go reads it.
type loaded struct {
	project *types.Project
	// model is the files as written, merged, without interpolation. It still
	// shows where a value comes from, such as ${X} or a bare environment
	// name.
	model map[string]any
	// files are the Compose files read, for the messages.
	files []string
	// warnings are compose-go's, in meshctl's words, each once.
	warnings []string
}

// load reads the project twice. First it reads the raw model, without
// interpolation and so without warnings of its own. Then it reads the project
// as Compose would run it.
func load(ctx context.Context, opts Options) (*loaded, error) {
	l := &loaded{}
	var logged []string
	err := captureWarnings(&logged, func() error {
		po, err := cli.NewProjectOptions(opts.Files, projectOptions(opts)...)
		if err != nil {
			return err
		}
		l.files = po.ConfigPaths
		if l.model, err = rawModel(ctx, opts, po.ConfigPaths); err != nil {
			return err
		}
		l.project, err = po.LoadProject(ctx)
		return err
	})
	l.warnings = rewriteWarnings(logged, l.files, l.model)
	if err != nil {
		return l, &fault.Error{Kind: fault.BadInput, Msg: rewriteError(err, l.files)}
	}
	return l, nil
}

func projectOptions(opts Options) []cli.ProjectOptionsFn {
	var popts []cli.ProjectOptionsFn
	if len(opts.Files) > 0 {
		// .env is read from the working directory, so that option comes
		// first.
		popts = append(popts, cli.WithWorkingDirectory(filepath.Dir(opts.Files[0])))
	}
	return append(popts,
		cli.WithEnv(opts.Env),
		cli.WithEnvFiles(), // .env in the working directory, as Compose
		cli.WithDotEnv,
		// Without files, the project is found as Compose finds it. That is
		// COMPOSE_FILE, else compose.yaml or docker-compose.yml in the
		// working directory or above.
		cli.WithConfigFileEnv,
		cli.WithDefaultConfigPath,
		cli.WithProfiles(opts.Profiles),
		// env_file stays a file. Its values are read at apply time and never
		// printed here.
		cli.WithoutEnvironmentResolution,
	)
}

// rawModel loads files, the project's config paths, without interpolation or
// validation. LoadProject validates them.
func rawModel(ctx context.Context, opts Options, files []string) (map[string]any, error) {
	popts := append(projectOptions(opts), cli.WithInterpolation(false),
		cli.WithLoadOptions(func(o *loader.Options) { o.SkipValidation = true }))
	po, err := cli.NewProjectOptions(files, popts...)
	if err != nil {
		return nil, err
	}
	return po.LoadModel(ctx)
}

// logMu serialises conversions in one process. compose-go logs through
// logrus's one standard logger, which captureWarnings takes over.
var logMu sync.Mutex

// captureWarnings runs f with compose-go's log lines collected in logged
// instead of printed raw on stderr.
func captureWarnings(logged *[]string, f func() error) error {
	logMu.Lock()
	defer logMu.Unlock()
	std := logrus.StandardLogger()
	out, hooks := std.Out, std.ReplaceHooks(logrus.LevelHooks{})
	std.SetOutput(io.Discard)
	std.AddHook(collector{logged})
	defer func() {
		std.SetOutput(out)
		std.ReplaceHooks(hooks)
	}()
	return f()
}

type collector struct{ logged *[]string }

func (collector) Levels() []logrus.Level { return logrus.AllLevels[:logrus.InfoLevel+1] }

func (c collector) Fire(e *logrus.Entry) error {
	*c.logged = append(*c.logged, e.Message)
	return nil
}

var (
	notSetWarning   = regexp.MustCompile(`^The "([^"]+)" variable is not set\. Defaulting to a blank string\.$`)
	versionWarning  = regexp.MustCompile("^(.*): the attribute `version` is obsolete")
	multipleConfigs = regexp.MustCompile(`^Found multiple (config|override) files with supported names: (.*)$`)
	usingConfig     = regexp.MustCompile(`^Using (.*)$`)
)

// rewriteWarnings says compose-go's warnings in meshctl's words, each once,
// naming the file and key where the raw model shows them.
func rewriteWarnings(logged, files []string, model map[string]any) []string {
	var out []string
	seen := map[string]bool{}
	for _, msg := range logged {
		w := rewriteWarning(msg, files, model)
		if w != "" && !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

func rewriteWarning(msg string, files []string, model map[string]any) string {
	if m := notSetWarning.FindStringSubmatch(msg); m != nil {
		where := fileWith(files, m[1])
		if path := findVariable(model, m[1], ""); path != "" {
			where += ": " + path
		}
		return fmt.Sprintf("%s: ${%s} is not set, so Compose reads it as an empty string: set %s in the environment or in .env, "+
			"or give a default (${%s:-value}), then convert again", where, m[1], m[1], m[1])
	}
	if m := versionWarning.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%s: version is obsolete and ignored, by Compose as by meshctl: remove it", shortPath(m[1]))
	}
	if m := multipleConfigs.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("found several Compose %s files (%s): the first is read, as Compose reads it; remove the others or name one with -f",
			m[1], shortPaths(m[2]))
	}
	if usingConfig.MatchString(msg) {
		return "" // said with the warning before it
	}
	return "compose: " + msg
}

// findVariable is the path in v of the first string that refers to ${name}
// or $name, or "".
func findVariable(v any, name, path string) string {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(v) {
			if p := findVariable(v[k], name, join(path, k)); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range v {
			if p := findVariable(e, name, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	case string:
		for _, ref := range variables(v) {
			if ref == name {
				return path
			}
		}
	}
	return ""
}

// errorRewrites say compose-go's errors in meshctl's words. Each pairs a
// pattern of its message with what to say. The say function takes the
// submatches and the first file. File paths in the message are already short,
// with "validating " and ": invalid compose project" trimmed.
var errorRewrites = []struct {
	re  *regexp.Regexp
	say func(m []string, file string) string
}{
	// Reported against the project as a whole.
	{regexp.MustCompile(`can't set container_name and (\S+) as container name must be unique`), func(m []string, file string) string {
		return fmt.Sprintf("%s: service %s: container_name cannot be used with deploy.replicas (two containers cannot share a name); "+
			"meshctl names every container MODULE.NAME and runs one per service: remove container_name and replicas, then convert again",
			file, m[1])
	}},
	// The schema's refusal of a key Compose does not know.
	{regexp.MustCompile(`^(.+): (\S+) false schema$`), func(m []string, _ string) string {
		return fmt.Sprintf("%s: %s is not a Compose key (Compose refuses it too): check its spelling, or remove it", m[1], m[2])
	}},
	// A volume whose source or target interpolated to nothing.
	{regexp.MustCompile(`invalid spec: (\S*): empty section between colons`), func(m []string, file string) string {
		return fmt.Sprintf("%s: the volume %q has an empty part, often a variable that is not set (see the warnings): "+
			"set it in the environment or in .env, then convert again", file, m[1])
	}},
}

// rewriteError says an error of compose-go in meshctl's words. It names the
// file relative to the working directory.
func rewriteError(err error, files []string) string {
	msg := strings.TrimSuffix(err.Error(), ": invalid compose project")
	for _, f := range files {
		msg = strings.ReplaceAll(msg, f, shortPath(f))
	}
	msg = strings.TrimPrefix(msg, "validating ")
	for _, r := range errorRewrites {
		if m := r.re.FindStringSubmatch(msg); m != nil {
			return r.say(m, firstFile(files))
		}
	}
	var nf *os.PathError
	if errors.As(err, &nf) {
		return "compose file: " + msg
	}
	if !strings.HasPrefix(msg, firstFile(files)) {
		msg = firstFile(files) + ": " + msg
	}
	return msg
}

// fileWith is the first of files whose text refers to the variable name,
// else the first file.
func fileWith(files []string, name string) string {
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err == nil && (bytes.Contains(data, []byte("${"+name)) || bytes.Contains(data, []byte("$"+name))) {
			return shortPath(f)
		}
	}
	return firstFile(files)
}

func firstFile(files []string) string {
	if len(files) == 0 {
		return "compose.yaml"
	}
	return shortPath(files[0])
}

// shortPath is path relative to the working directory where it is under
// it, else as it is.
func shortPath(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

func shortPaths(list string) string {
	parts := strings.Split(list, ", ")
	for i, p := range parts {
		parts[i] = shortPath(p)
	}
	return strings.Join(parts, ", ")
}
