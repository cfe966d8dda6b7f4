package mesh

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// tree is a file's YAML node tree. It is the one the decode was made from.
// When the decode never got to it, after a syntax error, it is parsed on
// first use.
type tree struct {
	data   []byte
	parsed bool
	root   yaml.Node
	err    error
	// keys indexes the mappings that lineOf has searched, by key.
	keys map[*yaml.Node]map[string]int
}

func (t *tree) node() *yaml.Node {
	if !t.parsed {
		t.parsed = true
		t.err = yaml.Unmarshal(t.data, &t.root)
	}
	return &t.root
}

// adopt makes n, the root the decoder read, the tree's. Errors are then
// placed without parsing the file a second time.
func (t *tree) adopt(n *yaml.Node) {
	t.parsed = true
	t.root = yaml.Node{Kind: yaml.DocumentNode, Line: n.Line, Column: n.Column, Content: []*yaml.Node{n}}
}

// check returns the file's syntax error, or that it is empty.
func (t *tree) check(name string) error {
	root := t.node()
	if t.err != nil {
		return syntaxError(name, t.data, t.err)
	}
	if root.Kind == 0 || len(root.Content) == 0 || root.Content[0].Kind == yaml.ScalarNode && root.Content[0].Tag == "!!null" {
		return &DecodeError{File: name, Msg: `is empty; a mesh file has a "modules:" map`}
	}
	return nil
}

// key returns the index of the key named k in mapping n, or -1 if there is
// none. In a sequence n, it is the index of the item "k=…", as in env in list
// form. Each node is indexed once. So naming the lines of many errors stays
// linear in the file.
func (t *tree) key(n *yaml.Node, k string) int {
	if t.keys == nil {
		t.keys = map[*yaml.Node]map[string]int{}
	}
	idx, ok := t.keys[n]
	if !ok {
		idx = make(map[string]int, len(n.Content))
		add := func(k string, i int) {
			if _, dup := idx[k]; !dup {
				idx[k] = i
			}
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				add(n.Content[i].Value, i)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				if k, _, ok := strings.Cut(c.Value, "="); ok && c.Kind == yaml.ScalarNode {
					add(k, i)
				}
			}
		}
		t.keys[n] = idx
	}
	if i, ok := idx[k]; ok {
		return i
	}
	return -1
}

// lineOf returns the line of the key at path, or 0 if it is not in the file.
// For a sequence index written "[i]", it is the line of the value. In a
// sequence, a key names the item "KEY=…", as in env in list form.
func (t *tree) lineOf(path ...string) int {
	n := t.node()
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, p := range path {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		switch n.Kind {
		case yaml.MappingNode:
			i := t.key(n, p)
			if i < 0 {
				return line
			}
			line, n = n.Content[i].Line, n.Content[i+1]
		case yaml.SequenceNode:
			i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(p, "["), "]"))
			if err != nil || !strings.HasPrefix(p, "[") {
				i = t.key(n, p)
			}
			if i < 0 || i >= len(n.Content) {
				return line
			}
			n = n.Content[i]
			line = n.Line
		default:
			return line
		}
	}
	return line
}

// document decodes a mesh file from one parse, with work linear in the file.
// yaml.v3 checks every mapping for duplicate keys by comparing each pair of
// keys. That is quadratic, and 100,000 keys in one map take minutes. So
// document first hands the decoder a root (nodeOf) to check and reshape. Then
// it decodes the reshaped tree into file, through the strict decoder's own
// callback.
type document struct {
	file *File
	tree *tree
	// errs are the reshaping's errors, in yaml's form "line N: …".
	errs []string
}

// nodeOf takes the node the decoder is at, as it is and not a copy.
type nodeOf struct{ n *yaml.Node }

// UnmarshalYAML keeps the node.
func (g *nodeOf) UnmarshalYAML(n *yaml.Node) error {
	g.n = n
	return nil
}

// UnmarshalYAML decodes the file strictly. decode is yaml.v3's callback that
// decodes the root with the decoder's options, known fields included.
func (d *document) UnmarshalYAML(decode func(any) error) error {
	var root nodeOf
	if err := decode(&root); err != nil {
		return err
	}
	d.tree.adopt(root.n)
	r := reshaper{}
	if err := r.walk(root.n); err != nil {
		return &yaml.TypeError{Errors: []string{err.Error()}}
	}
	// The tree must read as the file again once decoded. Error lines and
	// fields are found in it.
	defer r.undo()
	d.errs = r.errs
	return decode(d.file)
}

// MaxNodes is the most values a mesh file may hold, counting keys, list items
// and scalars. A file of 5,000 containers with every field holds about
// 200,000. Past it, the file is refused before it is decoded.
const MaxNodes = 1 << 18

// chunkKeys is the most keys yaml.v3 is given in one mapping. A larger
// mapping is written as a merge of mappings of chunkKeys keys each. It is the
// same map, on the same lines. This happens once its keys are known to be
// distinct.
const chunkKeys = 64

// reshaper checks a node tree and reshapes it in place, in time linear in
// its size. What it changes, undo puts back.
type reshaper struct {
	errs  []string
	saved []savedContent
	// repeats are the values each anchored node holds, its aliases' included.
	// That is what decoding an alias of it costs again.
	repeats map[*yaml.Node]int
}

type savedContent struct {
	n       *yaml.Node
	content []*yaml.Node
}

// takenTags are the tags a file may write on a value. Any other is refused,
// such as !!binary, !!timestamp or a local tag. yaml.v3 would decode it to
// other than what the file says, or silently take it as plain text.
var takenTags = map[string]bool{"!!str": true, "!!int": true, "!!float": true, "!!bool": true,
	"!!null": true, "!!seq": true, "!!map": true, "!!merge": true, "!": true}

// walk visits every node once. An alias is not followed, since its anchor is
// visited where it is written. But yaml.v3 decodes the alias's values again
// at each alias, so walk counts them. It returns an error for a tree of more
// than MaxNodes nodes, or whose aliases repeat more than MaxRepeated values.
// Its work is then undone.
func (r *reshaper) walk(root *yaml.Node) error {
	stack := []*yaml.Node{root}
	nodes, repeated := 0, 0
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if nodes++; nodes > MaxNodes {
			r.undo()
			return fmt.Errorf("holds more than %d values (keys, list items and scalars): apply its modules from several files", MaxNodes)
		}
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			if repeated += r.repeated(n.Alias); repeated > MaxRepeated {
				r.undo()
				return fmt.Errorf("its aliases repeat more than %d values in all: write the values out, or apply its modules from several files", MaxRepeated)
			}
		}
		if n.Style&yaml.TaggedStyle != 0 && !takenTags[n.ShortTag()] {
			r.fail(n, "the tag %s is not taken: write the value as plain text, without a tag", n.ShortTag())
		}
		if n.Kind == yaml.MappingNode && len(n.Content)/2 > chunkKeys {
			r.chunk(n)
		}
		if n.Kind != yaml.AliasNode {
			stack = append(stack, n.Content...)
		}
	}
	return nil
}

// MaxRepeated is the most values a file's aliases may repeat in all. An alias
// of a map of 10 keys repeats 21, the map and its keys and values. yaml.v3
// decodes an alias's values again at each alias. Unbounded, a file of 20 KB
// would cost as much as one of megabytes.
const MaxRepeated = 1 << 16

// repeated is how many values an alias of n makes yaml.v3 decode, at most
// MaxNodes+1. These are n's nodes, with each alias among them counted as the
// values it repeats. Each anchored node is counted once, so the walk stays
// linear in the file.
func (r *reshaper) repeated(n *yaml.Node) int {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return 1
		}
		return r.repeated(n.Alias)
	}
	if n.Anchor != "" {
		if c, ok := r.repeats[n]; ok {
			return c
		}
		if r.repeats == nil {
			r.repeats = map[*yaml.Node]int{}
		}
		r.repeats[n] = 1 // an anchor within itself: yaml.v3 refuses it
	}
	c := 1
	for _, k := range n.Content {
		if c += r.repeated(k); c > MaxNodes {
			c = MaxNodes + 1
			break
		}
	}
	if n.Anchor != "" {
		r.repeats[n] = c
	}
	return c
}

// fail records an error at n's line and column, in yaml's form.
func (r *reshaper) fail(n *yaml.Node, format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf("line %d: column %d: ", n.Line, n.Column)+fmt.Sprintf(format, args...))
}

// chunk checks that mapping n has no key twice, as yaml.v3 does, but with a
// hash. It rewrites n as "<<: [{chunkKeys keys}, …]". A mapping with a key
// twice is emptied for the decode, since its errors are already recorded.
func (r *reshaper) chunk(n *yaml.Node) {
	type key struct {
		kind  yaml.Kind
		value string
	}
	first := make(map[key]*yaml.Node, len(n.Content)/2)
	var merge []*yaml.Node
	pairs := make([]*yaml.Node, 0, len(n.Content))
	bad := false
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if f, dup := first[key{k.Kind, k.Value}]; dup {
			r.errs = append(r.errs, fmt.Sprintf("line %d: mapping key %#v already defined at line %d", k.Line, k.Value, f.Line))
			bad = true
			continue
		}
		first[key{k.Kind, k.Value}] = k
		switch {
		case isMergeKey(k):
			merge = n.Content[i : i+2]
		case k.Kind == yaml.ScalarNode && k.Value == "<<":
			// The merge below marks "<<" as set, so a key of that name would
			// be dropped.
			r.fail(k, "a map of more than %d keys cannot have the key \"<<\"", chunkKeys)
			bad = true
		default:
			pairs = append(pairs, n.Content[i:i+2]...)
		}
	}
	r.saved = append(r.saved, savedContent{n, n.Content})
	if bad {
		n.Content = nil
		return
	}
	// The file's own merge goes last, so the keys written here win over it.
	pairs = append(pairs, merge...)
	seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: n.Line, Column: n.Column}
	for len(pairs) > 0 {
		m := min(len(pairs), 2*chunkKeys)
		seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: n.Style,
			Line: pairs[0].Line, Column: pairs[0].Column, Content: pairs[:m:m]})
		pairs = pairs[m:]
	}
	n.Content = []*yaml.Node{{Kind: yaml.ScalarNode, Tag: "!!merge", Value: "<<", Line: n.Line, Column: n.Column}, seq}
}

func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!" || k.ShortTag() == "!!merge")
}

// undo puts back what chunk changed, the last change first.
func (r *reshaper) undo() {
	for i := len(r.saved) - 1; i >= 0; i-- {
		r.saved[i].n.Content = r.saved[i].content
	}
	r.saved = nil
}
