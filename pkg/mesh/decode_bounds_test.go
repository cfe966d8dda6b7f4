package mesh

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// adversarial is a mesh file built to make a decoder work hard: many keys
// in one map, many errors, many names to list in each error.
type adversarial struct {
	name string
	// head starts the file; item(i) is repeated until the file is size
	// bytes; tail ends it.
	head string
	item func(i int) string
	tail string
	// refused is whether the file is bad.
	refused bool
}

func adversarials() []adversarial {
	const container = "modules:\n  m:\n    containers:\n      c:\n        image: x\n"
	return []adversarial{
		// The file once reported: 100,000 label keys in 2 MB took 55s.
		{name: "label keys", head: container + "        labels:\n", item: func(i int) string { return fmt.Sprintf("          k%x: v\n", i) }},
		{name: "label keys in flow style", head: container + "        labels: {", item: func(i int) string { return fmt.Sprintf("k%x: v, ", i) }, tail: "}\n"},
		{name: "env keys", head: container + "        env:\n", item: func(i int) string { return fmt.Sprintf("          K%x: v\n", i) }},
		{name: "containers", head: "modules:\n  m:\n    containers:\n", item: func(i int) string { return fmt.Sprintf("      c%x: {image: x}\n", i) }},
		{name: "modules", head: "modules:\n", item: func(i int) string { return fmt.Sprintf("  m%x: {containers: {c: {image: x}}}\n", i) }},
		{name: "top-level keys", item: func(i int) string { return fmt.Sprintf("k%x: 1\n", i) }, refused: true},
		{name: "unknown fields", head: container, item: func(i int) string { return fmt.Sprintf("        f%x: 1\n", i) }, refused: true},
		{name: "duplicate keys", head: container + "        labels:\n", item: func(i int) string { return fmt.Sprintf("          k%x: v\n", i%50000) }, refused: true},
		{name: "bad label keys", head: container + "        labels:\n", item: func(i int) string { return fmt.Sprintf("          \"k %x\": v\n", i) }, refused: true},
		{name: "env values with a NUL", head: container + "        env:\n", item: func(i int) string { return fmt.Sprintf("          K%x: \"\\0\"\n", i) }, refused: true},
		{name: "env items with an escape", head: container + "        env:\n", item: func(i int) string { return fmt.Sprintf("          - \"K%x=\\e\"\n", i) }, refused: true},
		{name: "env items without a value", head: container + "        env:\n", item: func(i int) string { return fmt.Sprintf("          - K%x\n", i) }, refused: true},
		{name: "unknown containers held", head: "modules:\n  m:\n    containers:\n" + manyContainers(2000) + "    steps:\n      s:\n        exec: [x]\n        while-stopped:\n",
			item: func(i int) string { return fmt.Sprintf("          - x%x\n", i) }, refused: true},
		{name: "unknown dependencies", head: "modules:\n  m:\n    containers:\n" + manyContainers(2000) + "      d:\n        image: x\n        depends-on:\n",
			item: func(i int) string { return fmt.Sprintf("          - c%xx\n", i) }, refused: true},
		{name: "a chain of dependencies", head: "modules:\n  m:\n    containers:\n",
			item: func(i int) string {
				if i == 0 {
					return "      c0: {image: x}\n"
				}
				return fmt.Sprintf("      c%d: {image: x, depends-on: [c%d]}\n", i, i-1)
			}},
		{name: "aliases of a large map", head: container + "        labels: &l\n" + labels(100) + "      d:\n        image: x\n",
			item: func(i int) string { return fmt.Sprintf("      d%x: {image: x, labels: *l}\n", i) }, refused: true},
	}
}

func manyContainers(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "      c%x: {image: x}\n", i)
	}
	return b.String()
}

func labels(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "          l%x: v\n", i)
	}
	return b.String()
}

// file returns a of about size bytes (at most size).
func (a adversarial) file(size int) []byte {
	var b strings.Builder
	b.WriteString(a.head)
	for i := 0; ; i++ {
		item := a.item(i)
		if b.Len()+len(item)+len(a.tail) > size {
			break
		}
		b.WriteString(item)
	}
	b.WriteString(a.tail)
	return []byte(b.String())
}

// TestDecodeAdversarial decodes files built to make the decoder work hard:
// of 1 MiB, each good one is decoded; of MaxFileSize, each is refused
// with a *DecodeError (some hold more than MaxNodes values) or decoded.
// yaml.v3's own duplicate-key check took minutes on the first. The deadline
// only guards against a hang; the bound on work is TestReshapeBoundsWork.
func TestDecodeAdversarial(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes files of 1 and 4 MiB")
	}
	for _, a := range adversarials() {
		for _, size := range []int{1 << 20, MaxFileSize} {
			if a.refused && size < MaxFileSize {
				continue
			}
			t.Run(fmt.Sprintf("%s/%dMiB", a.name, size>>20), func(t *testing.T) {
				data := a.file(size)
				done := make(chan error, 1)
				go func() {
					_, err := Decode("mesh.yaml", data)
					done <- err
				}()
				select {
				case err := <-done:
					checkAdversarial(t, err, a.refused || size > 1<<20)
				case <-time.After(60 * time.Second): // a hang guard, not a timing
					t.Fatalf("Decode of %d bytes still runs after 60s", len(data))
				}
			})
		}
	}
}

// checkAdversarial checks what Decode returned for an adversarial file:
// nil, unless it may be refused; a refusal as a *DecodeError of at most
// MaxErrors errors, the others counted.
func checkAdversarial(t *testing.T, err error, mayRefuse bool) {
	t.Helper()
	var de *DecodeError
	switch {
	case err == nil:
	case !mayRefuse:
		t.Fatalf("Decode: %.500v", err)
	case !errors.As(err, &de):
		t.Fatalf("Decode = %v, want a *DecodeError", err)
	case len(de.More) != MaxErrors-1 && de.Omitted != 0 || len(err.Error()) > 16<<10:
		t.Errorf("Decode = %d errors, %d omitted, %d bytes: want at most %d, and the others counted", 1+len(de.More), de.Omitted, len(err.Error()), MaxErrors)
	}
}

// TestDecodeBoundsNodes: the file once reported, 100,000 label keys in 2 MB, is
// decoded; twice as many keys (in flow style, to fit) are more than
// MaxNodes values, refused before they are decoded.
func TestDecodeBoundsNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes files of 2 MiB")
	}
	labels := adversarials()[0]
	f, err := Decode("mesh.yaml", labels.file(2<<20))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.Modules["m"].Containers["c"].Labels); n < 100_000 || 2*n+11 > MaxNodes {
		t.Fatalf("%d labels decoded; want 100,000 or more, under MaxNodes", n)
	}
	_, err = Decode("mesh.yaml", adversarials()[1].file(MaxFileSize))
	checkRefusal(t, err, "mesh.yaml", 0, "", "holds more than 262144 values (keys, list items and scalars): apply its modules from several files")
}

// TestDecodeBoundsAliases: yaml.v3 decodes an alias's values again at each
// alias, so that a small file costs what a large one does (a map of 1,000
// labels aliased 125 times, 22 KB, took 200ms to decode: 9 s a megabyte).
// A file's aliases may repeat MaxRepeated values in all; past that, the
// file is refused before it is decoded.
func TestDecodeBoundsAliases(t *testing.T) {
	file := func(aliases int) []byte {
		var b strings.Builder
		b.WriteString("modules:\n  m:\n    containers:\n      c:\n        image: x\n        labels: &l\n" + labels(1000))
		for i := range aliases {
			fmt.Fprintf(&b, "      d%d: {image: x, labels: *l}\n", i)
		}
		return []byte(b.String())
	}
	// 1,000 labels are 2,001 values or a few more (the map is handed to
	// yaml.v3 in chunks): 32 aliases repeat 64,032 of them, 33 over 65,536.
	f, err := Decode("mesh.yaml", file(32))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.Modules["m"].Containers["d31"].Labels); n != 1000 {
		t.Fatalf("d31 has %d labels, want the 1000 of its alias", n)
	}
	_, err = Decode("mesh.yaml", file(33))
	checkRefusal(t, err, "mesh.yaml", 0, "", "its aliases repeat more than 65536 values in all: write the values out, or apply its modules from several files")

	// Aliases of aliases: each level repeats the one below ten times.
	var b strings.Builder
	b.WriteString("x0: &x0 [a, a, a, a, a, a, a, a, a, a]\n")
	for i := 1; i < 6; i++ {
		fmt.Fprintf(&b, "x%d: &x%d [*x%d, *x%d, *x%d, *x%d, *x%d, *x%d, *x%d, *x%d, *x%d, *x%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	b.WriteString("modules: {}\n")
	_, err = Decode("mesh.yaml", []byte(b.String()))
	checkRefusal(t, err, "mesh.yaml", 0, "", "its aliases repeat more than 65536 values in all: write the values out, or apply its modules from several files")
}

// TestReshapeBoundsWork counts the work yaml.v3's duplicate-key check is
// left with: it compares every pair of keys in a mapping, so a mapping of
// k keys costs k²/2. Reshaped, no mapping has more than chunkKeys keys, and
// the pairs compared are at most chunkKeys/2 per key of the file.
func TestReshapeBoundsWork(t *testing.T) {
	for _, a := range adversarials() {
		t.Run(a.name, func(t *testing.T) {
			data := a.file(256 << 10)
			if a.name == "aliases of a large map" {
				// At 256 KiB, its aliases repeat more than MaxRepeated
				// values: refused, nothing reshaped.
				data = a.file(8 << 10)
			}
			var root yaml.Node
			if err := yaml.Unmarshal(data, &root); err != nil {
				t.Fatal(err)
			}
			before := shape(&root)
			var r reshaper
			if err := r.walk(root.Content[0]); err != nil {
				t.Fatal(err)
			}
			keys, pairs, largest := 0, 0, 0
			walkMappings(&root, func(n *yaml.Node) {
				k := len(n.Content) / 2
				keys += k
				pairs += k * (k - 1) / 2
				largest = max(largest, k)
			})
			if largest > chunkKeys || pairs > keys*chunkKeys/2 {
				t.Errorf("reshaped: a mapping of %d keys, %d pairs compared for %d keys; want at most %d keys a mapping", largest, pairs, keys, chunkKeys)
			}
			r.undo()
			if after := shape(&root); after != before {
				t.Errorf("undo left the tree changed: %s, was %s", after, before)
			}
		})
	}
}

func walkMappings(n *yaml.Node, f func(*yaml.Node)) {
	if n.Kind == yaml.MappingNode {
		f(n)
	}
	for _, c := range n.Content {
		walkMappings(c, f)
	}
}

// shape sums up a tree: its nodes, and the keys of its largest mapping.
func shape(n *yaml.Node) string {
	nodes, largest := 0, 0
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		nodes++
		if n.Kind == yaml.MappingNode {
			largest = max(largest, len(n.Content)/2)
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return fmt.Sprintf("%d nodes, largest mapping %d keys", nodes, largest)
}

// TestChunkedMapsDecodeAsWritten: a map of more than chunkKeys keys, handed
// to yaml.v3 in chunks, decodes as written: every key, the keys written
// winning over those of a merge wherever the merge is, and errors on the
// lines of the file.
func TestChunkedMapsDecodeAsWritten(t *testing.T) {
	var b strings.Builder
	b.WriteString("defaults: &d {k1: merged, extra: merged}\nmodules:\n  m:\n    containers:\n      c:\n        image: x\n        labels:\n")
	want := map[string]string{"extra": "merged"}
	for i := range 3 * chunkKeys {
		if i == chunkKeys+7 {
			b.WriteString("          <<: *d\n")
		}
		fmt.Fprintf(&b, "          k%d: v%d\n", i, i)
		want[fmt.Sprint("k", i)] = fmt.Sprint("v", i)
	}
	data := strings.Replace(b.String(), "defaults: &d {k1: merged, extra: merged}\n", "", 1)
	data = strings.Replace(data, "        labels:\n", "        labels:\n          <<: &d {k1: merged, extra: merged}\n", 1)
	data = strings.Replace(data, "          <<: *d\n", "", 1)
	f, err := Decode("mesh.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	got := f.Modules["m"].Containers["c"].Labels
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("labels = %v\nwant %v", got, want)
	}

	// A key twice in a large map: both lines named, as yaml.v3 names them
	// in a small one.
	dup := strings.Replace(data, "          k150: v150\n", "          k150: v150\n          k3: again\n", 1)
	_, err = Decode("mesh.yaml", []byte(dup))
	line := 1 + strings.Count(dup[:strings.Index(dup, "k3: again")], "\n")
	checkRefusal(t, err, "mesh.yaml", line, "modules.m.containers.c.labels.k3", `mapping key "k3" already defined at line 11`)

	// A key "<<" in a large map would be lost to the chunks' merge.
	// (Without the merge: a merge and a "<<" are the same key twice.)
	quoted := strings.Replace(data, "          <<: &d {k1: merged, extra: merged}\n", "", 1)
	quoted = strings.Replace(quoted, "          k150: v150\n", "          \"<<\": v150\n", 1)
	_, err = Decode("mesh.yaml", []byte(quoted))
	line = 1 + strings.Count(quoted[:strings.Index(quoted, `"<<"`)], "\n")
	checkRefusal(t, err, "mesh.yaml", line, `modules.m.containers.c.labels.<<`, `a map of more than 64 keys cannot have the key "<<"`)
}

// cpuTime is the CPU time this process has used: unlike the time on the
// clock, it does not grow while a busy machine runs others.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecodeAdversarial decodes each adversarial file of MaxFileSize
// (and refuses one of 4 MiB); cpu-ms/op is the CPU time of one decode (GC
// included), which a busy machine does not inflate as it does ns/op.
func BenchmarkDecodeAdversarial(b *testing.B) {
	// The file once reported: 100,000 label keys in 2 MB took 55s.
	reported := adversarials()[0].file(2 << 20)
	b.Run("reported-label-keys-2MB", func(b *testing.B) {
		b.SetBytes(int64(len(reported)))
		start := cpuTime()
		for b.Loop() {
			if _, err := Decode("mesh.yaml", reported); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime()-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	})
	big := adversarials()[0].file(4 << 20)
	b.Run("label-keys-4MiB-refused", func(b *testing.B) {
		b.SetBytes(int64(len(big)))
		start := cpuTime()
		for b.Loop() {
			if _, err := Decode("mesh.yaml", big); err == nil {
				b.Fatal("a 4 MiB file decoded")
			}
		}
		b.ReportMetric(float64(cpuTime()-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	})
	for _, a := range adversarials() {
		data := a.file(MaxFileSize)
		b.Run(strings.ReplaceAll(a.name, " ", "-"), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			start := cpuTime()
			for b.Loop() {
				Decode("mesh.yaml", data)
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}
