package mesh

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/distribution/reference"
)

// LabelPrefix is reserved for meshctl's own container labels.
const LabelPrefix = "io.meshctl."

var (
	restartPolicies = []string{"no", "always", "unless-stopped", "on-failure"}
	pullPolicies    = []string{string(PullMissing), string(PullAlways), string(PullNever)}
)

// validator checks a decoded file and keeps every error with its line. So an
// operator fixes them all in one go.
type validator struct {
	file string
	// tree is the file's node tree, for the lines of errors.
	tree *tree
	errs []failure
	// lost are the paths of the values that did not decode. The decoder
	// left zeros there, which are not what the file says.
	lost []string
}

// failure is an error of the file, its message not yet written. Only the
// first MaxErrors messages are written. A message may list a module's
// containers, or look for the name meant among them.
type failure struct {
	line          int
	field, format string
	args          []any
}

func (v *validator) fail(path []string, format string, args ...any) {
	if v.shifted(path) {
		return
	}
	v.errs = append(v.errs, failure{line: v.tree.lineOf(path...), field: fieldPath(path), format: format, args: args})
}

// undecoded reports whether a value at path, inside it or around it did not
// decode. A check that finds the value missing then says nothing. The
// decode error already names the mistake.
func (v *validator) undecoded(path ...string) bool {
	p := fieldPath(path)
	for _, l := range v.lost {
		if within(p, l) || within(l, p) {
			return true
		}
	}
	return false
}

// shifted reports whether path is an item of a list whose earlier item did
// not decode. The decoder drops that item, so the later indices are not the
// file's. An error there would name the wrong item.
func (v *validator) shifted(path []string) bool {
	if len(v.lost) == 0 {
		return false
	}
	p := fieldPath(path)
	for _, l := range v.lost {
		for i := range len(l) {
			if l[i] != '[' || !strings.HasPrefix(p, l[:i+1]) {
				continue
			}
			if itemIndex(p[i:]) >= itemIndex(l[i:]) {
				return true
			}
		}
	}
	return false
}

// itemIndex is the index that s starts with, as in "[2].image".
func itemIndex(s string) int {
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return -1
	}
	n, err := strconv.Atoi(s[1:end])
	if err != nil {
		return -1
	}
	return n
}

// within reports whether path p is q or inside it. Every path is inside "",
// the whole file.
func within(p, q string) bool {
	return q == "" || strings.HasPrefix(p, q) && (len(p) == len(q) || p[len(q)] == '.' || p[len(q)] == '[')
}

// result returns the errors found in the file's order, as an editor shows
// them, or nil if none. The sort is stable. So errors on one line keep the
// validator's order, which is by name.
func (v *validator) result() error {
	if len(v.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(v.errs, func(a, b failure) int { return a.line - b.line })
	var errs []*DecodeError
	for _, f := range v.errs[:min(len(v.errs), MaxErrors)] {
		errs = append(errs, &DecodeError{File: v.file, Line: f.line, Field: f.field, Msg: fmt.Sprintf(f.format, f.args...)})
	}
	e := errorList(errs).(*DecodeError)
	e.Omitted = len(v.errs) - len(errs)
	return e
}

func (v *validator) name(path []string, kind, name string) {
	if !ValidName(name) {
		v.fail(path, "%s name %q is invalid: use lower-case letters, digits and '-', starting with a letter or digit, at most 63 characters", kind, name)
	}
}

func (v *validator) file_(f *File) {
	if f.Modules == nil {
		if !v.undecoded("modules") {
			v.fail([]string{"modules"}, `missing: a mesh file has a "modules:" map`)
		}
		return
	}
	for _, mn := range f.ModuleNames() {
		m := f.Modules[mn]
		mp := []string{"modules", mn}
		v.name(mp, "module", mn)
		if m == nil {
			v.fail(mp, "is empty")
			continue
		}
		v.networks(mp, m)
		v.oneOf(append(mp, "update-order"), m.UpdateOrder, updateOrders)
		if m.MaxUnavailable != nil && *m.MaxUnavailable < 1 {
			v.fail(append(mp, "max-unavailable"), "%d is not a budget: give how many hosts may have the module down at once, at least 1", *m.MaxUnavailable)
		}
		for _, cn := range m.ContainerNames() {
			v.name(append(mp, "containers", cn), "container", cn)
			v.container(append(mp, "containers", cn), m.Containers[cn])
			if c := m.Containers[cn]; c != nil {
				v.containerNetworks(f, mn, append(mp, "containers", cn), c)
				v.updateOrder(append(mp, "containers", cn), m, c)
			}
		}
		for _, sn := range sortedKeys(m.Steps) {
			sp := append(mp, "steps", sn)
			v.name(sp, "step", sn)
			v.step(sp, m, m.Steps[sn])
		}
	}
	v.dependencies(f)
}

func (v *validator) container(p []string, c *Container) {
	at := func(field string) []string { return append(append([]string{}, p...), field) }
	if c == nil {
		v.fail(p, "is empty: give it an image or an artifact")
		return
	}
	switch {
	case c.Image == "" && c.Artifact == "":
		if !v.undecoded(at("image")...) && !v.undecoded(at("artifact")...) {
			v.fail(p, "has neither image nor artifact")
		}
	case c.Image != "" && c.Artifact != "":
		v.fail(at("artifact"), "give either image or artifact, not both")
	case c.Artifact != "" && !ValidName(c.Artifact):
		v.fail(at("artifact"), "%q is not a module name", c.Artifact)
	case c.Image != "":
		v.image(at("image"), c.Image)
	}
	v.oneOf(at("restart"), c.Restart, restartPolicies)
	v.fields(p, c)
	v.oneOf(at("pull"), c.Pull, pullPolicies)
	v.env(at("env"), c.Env)
	// In order, so that with two bad keys the same one is named every time.
	for _, k := range sortedKeys(c.Labels) {
		switch {
		case k == "" || strings.ContainsRune(k, '=') || strings.IndexFunc(k, badKeyRune) >= 0:
			v.fail(append(at("labels"), k), "%q is not a label key: it must be non-empty, without '=' or spaces", k)
		case strings.HasPrefix(k, LabelPrefix):
			v.fail(append(at("labels"), k), "label prefix %q is reserved for meshctl", LabelPrefix)
		}
	}
	for i, vol := range c.Volumes {
		if err := checkVolume(vol); err != nil {
			v.fail(append(at("volumes"), index(i)), "%v", err)
		}
	}
	for i, port := range c.Ports {
		if err := checkPort(port); err != nil {
			v.fail(append(at("ports"), index(i)), "%v", err)
		}
	}
}

func (v *validator) step(p []string, m *Module, s *Step) {
	at := func(field string) []string { return append(append([]string{}, p...), field) }
	if s == nil {
		v.fail(p, "is empty: give it run or exec")
		return
	}
	// The module's container cn, as the file names it.
	container := func(cn string) []string { return []string{p[0], p[1], "containers", cn} }
	seen := map[string]bool{}
	for i, cn := range s.WhileStopped {
		if _, ok := m.Containers[cn]; !ok && !v.undecoded(container(cn)...) {
			v.fail(append(at("while-stopped"), index(i)), "unknown container %q (this module has: %s)", cn, containerList{m})
		}
		if seen[cn] {
			v.fail(append(at("while-stopped"), index(i)), "container %q listed twice", cn)
		}
		seen[cn] = true
	}
	v.changes(p, m, s, container)
	switch s.Mesh {
	case "", MeshHost, MeshAll:
	default:
		v.fail(at("mesh"), "unknown value %q: give host (this host only, the default) or all (every host that runs the module)", s.Mesh)
	}
	switch {
	case s.Gather < 0:
		v.fail(at("gather"), "must not be negative")
	case s.Gather != 0 && !s.MeshAll():
		if !v.undecoded(at("mesh")...) {
			v.fail(at("gather"), "is only for a step with mesh: all")
		}
	case s.Gather != 0 && s.Gather.Std() < time.Second:
		v.fail(at("gather"), "%s is too short: give at least 1s (etcd counts the deadline in whole seconds)", s.Gather.Std())
	}
	switch {
	case s.Run == nil && len(s.Exec) == 0:
		if !v.undecoded(at("run")...) && !v.undecoded(at("exec")...) {
			v.fail(p, "has neither run nor exec")
		}
	case s.Run != nil && len(s.Exec) > 0:
		v.fail(at("exec"), "give either run or exec, not both")
	case len(s.Exec) > 0 && s.Exec[0] == "":
		v.fail(at("exec"), "the program to run is empty")
	case s.Run != nil:
		if s.Run.Image == "" && len(s.WhileStopped) == 0 && len(s.WhileChanged) == 0 &&
			!v.undecoded(at("while-stopped")...) && !v.undecoded(at("while-changed")...) {
			v.fail(append(at("run"), "image"), "is needed when the step holds no container")
		}
		if s.Run.Image != "" {
			v.image(append(at("run"), "image"), s.Run.Image)
		}
		v.env(append(at("run"), "env"), s.Run.Env)
		for i, cn := range s.Run.VolumesFrom {
			if _, ok := m.Containers[cn]; !ok && !v.undecoded(container(cn)...) {
				v.fail(append(at("run"), "volumes-from", index(i)), "unknown container %q", cn)
			}
		}
		for i, vol := range s.Run.Volumes {
			if err := checkVolume(vol); err != nil {
				v.fail(append(at("run"), "volumes", index(i)), "%v", err)
			}
		}
	}
}

// changes checks a step's while-changed. Each key is a container of the
// module that while-stopped does not name. Each change changes something.
func (v *validator) changes(p []string, m *Module, s *Step, container func(string) []string) {
	at := func(cn string, more ...string) []string {
		return append(append(append([]string{}, p...), "while-changed", cn), more...)
	}
	for _, cn := range s.ChangedNames() {
		ch := s.WhileChanged[cn]
		if _, ok := m.Containers[cn]; !ok && !v.undecoded(container(cn)...) {
			v.fail(at(cn), "unknown container %q (this module has: %s)%s", cn, containerList{m}, didYouMean{cn, m})
		}
		if slices.Contains(s.WhileStopped, cn) {
			v.fail(at(cn), "container %q is in while-stopped too: a window holds a container stopped or changed, not both", cn)
		}
		if ch.Empty() && !v.undecoded(at(cn)...) {
			v.fail(at(cn), "changes nothing: give env, command, entrypoint or healthcheck, or drop %s from while-changed", cn)
			continue
		}
		v.env(at(cn, "env"), ch.Env)
		v.healthcheck(func(field string, more ...string) []string { return at(cn, append([]string{field}, more...)...) }, ch.Healthcheck)
	}
}

// image checks ref as the engine will read it. That is an image id, or a name
// with an optional registry, tag and digest. Examples are
// `meshtest/busybox:1`, `127.0.0.1:5000/x/y:2` and `x@sha256:…`.
func (v *validator) image(p []string, ref string) {
	if _, err := reference.ParseAnyReference(ref); err != nil {
		v.fail(p, "%q is not an image reference: %v", ref, err)
	}
}

// env checks environment variables. The engine passes each as "NAME=value".
// So a name may hold neither '=' nor a NUL. A name with spaces could not be
// used by the program it is for. A value may hold no control character but
// tab and newline. A NUL cannot be passed at all, and the engine's error
// would quote the value. Errors name the variable, never its value.
func (v *validator) env(p []string, env map[string]string) {
	// In order, so that with two bad keys the same one is named every time.
	for _, k := range sortedKeys(env) {
		at := append(append([]string{}, p...), k)
		if k == "" || strings.ContainsRune(k, '=') || strings.IndexFunc(k, badKeyRune) >= 0 {
			v.fail(at, "%q is not a variable name: it must be non-empty, without '=', spaces or control characters", k)
		}
		if c, bad := controlIn(env[k]); bad {
			v.fail(at, "the value holds a control character (%s): only tab and newline may be in a value", c)
		}
	}
}

// controlIn returns the name of the first control character in value that no
// environment value may hold. These are the C0 controls but tab and newline,
// and DEL.
func controlIn(value string) (string, bool) {
	i := strings.IndexFunc(value, func(r rune) bool { return r < 0x20 && r != '\t' && r != '\n' || r == 0x7f })
	if i < 0 {
		return "", false
	}
	if value[i] == 0 {
		return "NUL", true
	}
	return fmt.Sprintf("U+%04X", value[i]), true
}

// badKeyRune reports the runes no env or label key may hold. These are white
// space and control characters, NUL among them.
func badKeyRune(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }

func (v *validator) oneOf(p []string, val string, allowed []string) {
	if val == "" {
		return
	}
	for _, a := range allowed {
		if val == a {
			return
		}
	}
	v.fail(p, "%q is not one of %s", val, strings.Join(allowed, ", "))
}

// checkVolume accepts `source:/target` with an optional `:ro` or `:rw`.
func checkVolume(s string) error {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || !strings.HasPrefix(parts[1], "/") {
		return fmt.Errorf("volume %q: use NAME:/path or /host/path:/path, with an optional :ro", s)
	}
	if len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw" {
		return fmt.Errorf("volume %q: mode %q is not ro or rw", s, parts[2])
	}
	return nil
}

// checkPort accepts `[ip:]hostPort:containerPort[/tcp|/udp]` and
// `containerPort[/proto]`.
func checkPort(s string) error {
	spec, proto, _ := strings.Cut(s, "/")
	if proto != "" && proto != "tcp" && proto != "udp" && proto != "sctp" {
		return fmt.Errorf("port %q: protocol %q is not tcp, udp or sctp", s, proto)
	}
	parts := strings.Split(spec, ":")
	if len(parts) > 3 {
		return fmt.Errorf("port %q: use [IP:]HOSTPORT:CONTAINERPORT", s)
	}
	for i, p := range parts {
		if i == 0 && len(parts) == 3 {
			if p == "" || strings.ContainsAny(p, " /") {
				return fmt.Errorf("port %q: bad IP %q", s, p)
			}
			continue
		}
		if p == "" && i == len(parts)-2 {
			continue // "127.0.0.1::5000": any host port
		}
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q: %q is not a port number", s, p)
		}
	}
	return nil
}

// containerList writes a module's container names when an error shown asks
// for them. For a large module it writes the first 20.
type containerList struct{ m *Module }

func (l containerList) String() string {
	const most = 20
	names := l.m.ContainerNames()
	if len(names) > most {
		return strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more", len(names)-most)
	}
	return strings.Join(names, ", ")
}

// didYouMean writes "; did you mean …?" when one of the module's containers
// is close to name. It does so when an error shown asks for it.
type didYouMean struct {
	name string
	m    *Module
}

func (d didYouMean) String() string {
	if s := Suggest(d.name, d.m.ContainerNames()); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
}
