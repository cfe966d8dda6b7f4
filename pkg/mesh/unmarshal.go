package mesh

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// EnvVars are a container's environment variables. The file gives them as a
// map ({KEY: value}), or as a list as Compose does (["KEY=value"]).
type EnvVars map[string]string

// UnmarshalYAML reads env as a map, or as Compose's list of KEY=value.
// Compose's bare KEY takes the value from the caller's environment, and is
// refused. An apply from CI and a window's close from cron would differ. Its
// errors name the line, the item and the key. They never name the value,
// since env holds secrets.
func (e *EnvVars) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.SequenceNode:
		return e.fromList(n)
	case yaml.MappingNode:
		var m map[string]string
		if err := n.Decode(&m); err != nil {
			return err
		}
		*e = m
		return nil
	}
	// Not yaml's "cannot unmarshal !!str `PW=S3C...`", nor any prefix of it.
	return &yaml.TypeError{Errors: []string{nodeError(n, "cannot unmarshal %s into EnvVars", n.ShortTag())}}
}

// fromList reads env in Compose's list form.
func (e *EnvVars) fromList(n *yaml.Node) error {
	m := map[string]string{}
	seen := map[string]int{}
	var errs []string
	for i, item := range n.Content {
		if item.Kind != yaml.ScalarNode {
			errs = append(errs, nodeError(item, "env item %d: want KEY=value, like \"A=1\"", i))
			continue
		}
		k, v, ok := strings.Cut(item.Value, "=")
		if !ok {
			errs = append(errs, nodeError(item, "env item %d: want KEY=value, not a KEY alone (a value taken from the environment is not supported: write KEY=…)", i))
			continue
		}
		if first, dup := seen[k]; dup {
			errs = append(errs, nodeError(item, "env item %d: %q is set twice (first on line %d)", i, k, first))
			continue
		}
		seen[k] = item.Line
		m[k] = v
	}
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	*e = m
	return nil
}

// nodeError is an error about node n in yaml's form, with its column. So the
// error names the field written there, however many are on the line.
func nodeError(n *yaml.Node, format string, args ...any) string {
	return fmt.Sprintf("line %d: column %d: ", n.Line, n.Column) + fmt.Sprintf(format, args...)
}

// Duration is a time.Duration written as "30m" in the file.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// MarshalText writes d as "30m0s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads "30m".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (use e.g. 90s, 30m, 2h)", b)
	}
	if v <= 0 {
		return fmt.Errorf("duration %q must be positive", b)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalYAML reads "30m" from a mesh file. It reports a bad duration as a
// yaml.TypeError with its line. So the error names the line and field. An
// error from UnmarshalText would reach the caller without either.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{nodeError(n, "cannot unmarshal %s into a duration", n.ShortTag())}}
	}
	if err := d.UnmarshalText([]byte(n.Value)); err != nil {
		return &yaml.TypeError{Errors: []string{nodeError(n, "%v", err)}}
	}
	return nil
}

// HealthTest is a healthcheck's test. A YAML string is a CMD-SHELL command.
type HealthTest []string

// UnmarshalYAML reads a string (CMD-SHELL) or a list.
func (t *HealthTest) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		*t = HealthTest{"CMD-SHELL", n.Value}
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*t = l
	return nil
}

// StringOrList is a list of strings that the file may write as one string.
type StringOrList []string

// UnmarshalYAML reads a string or a list of strings.
func (s *StringOrList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		*s = StringOrList{n.Value}
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*s = l
	return nil
}

// UnmarshalYAML reads {soft: N, hard: M}, or N for both, as Compose does.
func (u *Ulimit) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var v int64
		if err := n.Decode(&v); err != nil {
			return &yaml.TypeError{Errors: []string{nodeError(n, "want a number, or {soft: N, hard: M}")}}
		}
		*u = Ulimit{Soft: v, Hard: v}
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return &yaml.TypeError{Errors: []string{nodeError(n, "want a number, or {soft: N, hard: M}")}}
	}
	// Field by field, since Node.Decode would not refuse an unknown key.
	var errs []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var dst *int64
		switch k.Value {
		case "soft":
			dst = &u.Soft
		case "hard":
			dst = &u.Hard
		default:
			errs = append(errs, nodeError(k, "field %s not found in type mesh.Ulimit", k.Value))
			continue
		}
		if err := v.Decode(dst); err != nil {
			errs = append(errs, nodeError(v, "%s: want a number", k.Value))
		}
	}
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	return nil
}

// Hosts is a number of hosts, as max-unavailable gives it.
type Hosts int

// UnmarshalYAML reads a whole number. A fraction or a string is refused
// with its line. yaml would truncate 1.5 to 1.
func (h *Hosts) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		return &yaml.TypeError{Errors: []string{nodeError(n, "cannot unmarshal %s %q into a number of hosts: give a whole number", n.ShortTag(), n.Value)}}
	}
	var v int
	if err := n.Decode(&v); err != nil {
		return err
	}
	*h = Hosts(v)
	return nil
}
