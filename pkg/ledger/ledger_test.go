package ledger

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var ctx = context.Background()

func TestDecide(t *testing.T) {
	const a, b, c = "b-01JNQX6Z2V0000000000000001", "b-01JNQX6Z2V0000000000000002", "b-01JNQX6Z2W0000000000000000"
	tests := []struct {
		current, id string
		ok          bool
		want        Outcome
	}{
		{"", a, true, OutcomeCurrent},   // nothing current yet
		{"", a, false, OutcomeFailed},   // a failure is never current
		{a, b, true, OutcomeCurrent},    // requested after the current one
		{b, a, true, OutcomeSuperseded}, // requested before it, in the same millisecond
		{c, a, true, OutcomeSuperseded}, // requested a millisecond before it
		{a, c, false, OutcomeFailed},    // later, but failed
		{a, a, true, OutcomeCurrent},    // at the one it came from
		{c, b, false, OutcomeFailed},    // earlier and failed
		{b, c, true, OutcomeCurrent},    // later by the clock
		{c, "b-01JNQX6Z2V0000000000000003", true, OutcomeSuperseded},
	}
	for _, tt := range tests {
		if got := Decide(tt.current, tt.id, tt.ok); got != tt.want {
			t.Errorf("Decide(current %s, %s, ok=%v) = %s, want %s", tt.current, tt.id, tt.ok, got, tt.want)
		}
	}
}

// TestRecordFollowsRequestOrder requests builds 0…n-1 of one module in that
// order, records them in another order, and checks each outcome and which
// build ends current.
func TestRecordFollowsRequestOrder(t *testing.T) {
	type step struct {
		build int
		image string // "" = failed
		want  Outcome
	}
	tests := []struct {
		name        string
		builds      int
		records     []step
		wantCurrent int // -1: none
		wantImage   string
	}{
		{"in order", 2, []step{{0, "app:1", OutcomeCurrent}, {1, "app:2", OutcomeCurrent}}, 1, "app:2"},
		{"slow older build finishes last", 2, []step{{1, "app:2", OutcomeCurrent}, {0, "app:1", OutcomeSuperseded}}, 1, "app:2"},
		{"newer build failed", 2, []step{{0, "app:1", OutcomeCurrent}, {1, "", OutcomeFailed}}, 0, "app:1"},
		{"newer failed first, older still becomes current", 2, []step{{1, "", OutcomeFailed}, {0, "app:1", OutcomeCurrent}}, 0, "app:1"},
		{"all failed", 2, []step{{0, "", OutcomeFailed}, {1, "", OutcomeFailed}}, -1, ""},
		{"rollback is a new request with the old image", 3,
			[]step{{0, "app:1", OutcomeCurrent}, {1, "app:2", OutcomeCurrent}, {2, "app:1", OutcomeCurrent}}, 2, "app:1"},
		{"middle one last", 3, []step{{0, "app:1", OutcomeCurrent}, {2, "app:3", OutcomeCurrent}, {1, "app:2", OutcomeSuperseded}}, 2, "app:3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, d := newTestLedger(t)
			var ids []string
			for range tt.builds {
				ids = append(ids, request(t, l, "app").Builds[0].ID)
			}
			for _, r := range tt.records {
				got := rec(t, l, ids[r.build], r.image)
				if got.Outcome != r.want {
					t.Errorf("record build %d (%q): outcome %s, want %s", r.build, r.image, got.Outcome, r.want)
				}
			}
			cur, ok, err := Current(d, "app")
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.wantCurrent < 0 && ok:
				t.Errorf("current is %s, want none", cur.ID)
			case tt.wantCurrent >= 0 && (!ok || cur.ID != ids[tt.wantCurrent] || cur.Image != tt.wantImage):
				t.Errorf("current is %+v (%v), want build %d with %s", cur, ok, tt.wantCurrent, tt.wantImage)
			}
		})
	}
}

// TestIncidentReplay is incident (b): two overlapping plans rebuild the same
// module; the older request finishes last and must not become current, and
// each plan settles only from its own builds.
func TestIncidentReplay(t *testing.T) {
	l, d := newTestLedger(t)
	plan1 := request(t, l, "runtime", "api")
	plan2 := request(t, l, "runtime", "api")
	a, b := plan1.Builds[0].ID, plan2.Builds[0].ID

	if got := rec(t, l, b, digestImage("reg/runtime", 2)); got.Outcome != OutcomeCurrent {
		t.Fatalf("B (plan 2) recorded %s, want current", got.Outcome)
	}
	checkSettled(t, l, plan1.ID, false)
	checkSettled(t, l, plan2.ID, false)

	got := rec(t, l, a, digestImage("reg/runtime", 1))
	if got.Outcome != OutcomeSuperseded {
		t.Fatalf("A (plan 1, requested first, finished last) recorded %s, want superseded", got.Outcome)
	}
	if got.Current == nil || got.Current.ID != b {
		t.Fatalf("after A, the record reports current %+v, want B %s", got.Current, b)
	}
	cur, _, err := Current(d, "runtime")
	if err != nil || cur.ID != b || cur.Image != digestImage("reg/runtime", 2) {
		t.Fatalf("current runtime is %+v, %v; want B with the fix", cur, err)
	}

	// Plan 2's api build finishes: plan 2 settles; plan 1 still waits for
	// its own api build, whatever plan 2 did.
	rec(t, l, plan2.Builds[1].ID, digestImage("reg/api", 2))
	checkSettled(t, l, plan2.ID, true)
	checkSettled(t, l, plan1.ID, false)
	rec(t, l, plan1.Builds[1].ID, "")
	checkSettled(t, l, plan1.ID, true)

	p1, err := l.Plan(ctx, plan1.ID)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]State{}
	for _, b := range p1.Builds {
		states[b.Module] = b.State
	}
	if want := map[string]State{"runtime": StateSuperseded, "api": StateFailed}; !maps.Equal(states, want) {
		t.Errorf("plan 1 builds %v, want %v", states, want)
	}
}

func checkSettled(t *testing.T, l *Ledger, plan string, want bool) {
	t.Helper()
	p, err := l.Plan(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	if p.Settled != want {
		t.Errorf("plan %s settled = %v, want %v (builds %+v)", plan, p.Settled, want, p.Builds)
	}
}

func TestRecordAgain(t *testing.T) {
	img1, img2 := digestImage("reg/app", 1), digestImage("reg/app", 2)
	tests := []struct {
		name          string
		first, second string // "" = failed
		wantCode      int
	}{
		{"same image", img1, img1, 0},
		{"same image, familiar and full forms", "nginx:1.27", "docker.io/library/nginx:1.27", 0},
		{"failed twice", "", "", 0},
		{"another image", img1, img2, 4},
		{"image after failure", "", img1, 4},
		{"failure after image", img1, "", 4},
		{"another tag", "reg/app:1", "reg/app:2", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, d := newTestLedger(t)
			old := request(t, l, "app").Builds[0].ID
			id := request(t, l, "app").Builds[0].ID
			first := rec(t, l, id, tt.first)
			// A later record of an older build must not change the first
			// outcome that an idempotent retry returns.
			rec(t, l, old, img2)
			before := snapshot(t, d)

			var img *Image
			if tt.second != "" {
				img = mustImage(t, tt.second)
			}
			got, err := l.Record(ctx, id, img, "another reason")
			if code := exitCodeOf(err); code != tt.wantCode {
				t.Fatalf("record again: exit %d (%v), want %d", code, err, tt.wantCode)
			}
			if !maps.Equal(before, snapshot(t, d)) {
				t.Errorf("record again changed the ledger's files")
			}
			if tt.wantCode == 0 {
				if got.Outcome != first.Outcome || !got.Again {
					t.Errorf("record again: outcome %s (again %v), want the first one, %s", got.Outcome, got.Again, first.Outcome)
				}
				return
			}
			for _, part := range []string{id, "app"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("conflict message %q does not name %q", err, part)
				}
			}
			if tt.first != "" && !strings.Contains(err.Error(), tt.first) || tt.second != "" && !strings.Contains(err.Error(), tt.second) {
				t.Errorf("conflict message %q does not name both results", err)
			}
		})
	}
}

func TestRecordRefuses(t *testing.T) {
	l, d := newTestLedger(t)
	p := request(t, l, "app")
	id := p.Builds[0].ID
	last := id[:len(id)-1] + "Z"
	if last == id {
		last = id[:len(id)-1] + "Y"
	}
	tests := []struct {
		name, id string
		want     int
	}{
		{"never issued", "b-01JNQX6Z2V0000000000000000", 2},
		{"after the last issued", "b-7ZZZZZZZZZZZZZZZZZZZZZZZZZ", 2},
		{"a plan id", p.ID, 2},
		{"malformed", "b-123", 2},
		{"no prefix", strings.TrimPrefix(id, "b-"), 2},
	}
	for _, tt := range tests {
		before := snapshot(t, d)
		_, err := l.Record(ctx, tt.id, mustImage(t, "reg/app:1"), "")
		if code := exitCodeOf(err); code != tt.want {
			t.Errorf("%s: record %s: exit %d (%v), want %d", tt.name, tt.id, code, err, tt.want)
		}
		if !maps.Equal(before, snapshot(t, d)) {
			t.Errorf("%s: a refused record changed the ledger", tt.name)
		}
	}
}

func TestParseImage(t *testing.T) {
	tests := []struct {
		ref        string
		ok, pinned bool
	}{
		{digestImage("reg.example:5000/team/app", 1), true, true},
		{"reg/app:1@" + strings.TrimPrefix(digestImage("x", 1), "x@"), true, true},
		{"reg/app:1", true, false},
		{"nginx", true, false},
		{"localhost:5000/app:v1.2", true, false},
		{"", false, false},
		{"Reg/App:1", false, false},
		{"reg/app:", false, false},
		{"reg/app@sha256:abc", false, false},
		{"reg app:1", false, false},
		{"reg/app:1 ", false, false},
		{strings.Repeat("a", 64), false, false},
	}
	for _, tt := range tests {
		img, err := ParseImage(tt.ref)
		if (err == nil) != tt.ok {
			t.Errorf("ParseImage(%q) error %v, want ok=%v", tt.ref, err, tt.ok)
			continue
		}
		if err != nil {
			if exitCodeOf(err) != 2 {
				t.Errorf("ParseImage(%q): exit %d, want 2", tt.ref, exitCodeOf(err))
			}
			continue
		}
		if img.Pinned != tt.pinned {
			t.Errorf("ParseImage(%q).Pinned = %v, want %v", tt.ref, img.Pinned, tt.pinned)
		}
	}
}

func TestModuleNames(t *testing.T) {
	l, _ := newTestLedger(t)
	for _, m := range []string{"", "App", "-app", "app_1", "app.x", "a/b", strings.Repeat("a", 64)} {
		if _, err := l.Request(ctx, []string{m}, ""); exitCodeOf(err) != 2 {
			t.Errorf("request %q: %v, want exit 2", m, err)
		}
		if _, err := l.Current(m); exitCodeOf(err) != 2 {
			t.Errorf("current %q: %v, want exit 2", m, err)
		}
		if m != "" {
			if _, err := l.List(ctx, m); exitCodeOf(err) != 2 {
				t.Errorf("list %q: %v, want exit 2", m, err)
			}
		}
	}
	if _, err := l.Request(ctx, []string{"app", "db", "app"}, ""); exitCodeOf(err) != 2 || !strings.Contains(err.Error(), "twice") {
		t.Errorf("request app db app: %v, want exit 2 naming the duplicate", err)
	}
	if _, err := l.Request(ctx, []string{"a", strings.Repeat("a", 63), "0-9"}, ""); err != nil {
		t.Errorf("valid names refused: %v", err)
	}
}

func TestCurrentWithoutBuild(t *testing.T) {
	l, d := newTestLedger(t)
	request(t, l, "app")
	if _, ok, err := Current(d, "app"); ok || err != nil {
		t.Errorf("Current of a module with only a pending build: %v, %v; want none", ok, err)
	}
	_, err := l.Current("app")
	if exitCodeOf(err) != 2 || !strings.Contains(err.Error(), "app has no current build") {
		t.Errorf("Ledger.Current: %v, want exit 2 saying app has no current build", err)
	}
}

func TestPlans(t *testing.T) {
	l, _ := newTestLedger(t)
	p := request(t, l, "web", "db")
	if len(p.Builds) != 2 || p.Builds[0].Module != "web" || p.Builds[1].Module != "db" {
		t.Fatalf("plan builds %+v", p.Builds)
	}
	if !(p.ID[2:] < p.Builds[0].ID[2:] && p.Builds[0].ID < p.Builds[1].ID) {
		t.Errorf("ids out of request order: %s %s %s", p.ID, p.Builds[0].ID, p.Builds[1].ID)
	}
	other := request(t, l, "web")
	checkSettled(t, l, p.ID, false)
	rec(t, l, p.Builds[0].ID, "reg/web:1")
	rec(t, l, other.Builds[0].ID, "reg/web:2")
	checkSettled(t, l, p.ID, false)
	rec(t, l, p.Builds[1].ID, "")
	checkSettled(t, l, p.ID, true)

	// --plan adds a build to the plan, which waits for it again.
	more, err := l.Request(ctx, []string{"cache"}, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if more.ID != p.ID || len(more.Builds) != 1 || more.Builds[0].Plan != p.ID {
		t.Fatalf("request --plan: %+v", more)
	}
	checkSettled(t, l, p.ID, false)
	got, err := l.Plan(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	var mods []string
	for _, b := range got.Builds {
		mods = append(mods, b.Module+"="+string(b.State))
	}
	if want := []string{"web=superseded", "db=failed", "cache=pending"}; !slices.Equal(mods, want) {
		t.Errorf("plan builds %v, want %v", mods, want)
	}
	rec(t, l, more.Builds[0].ID, "reg/cache:1")
	checkSettled(t, l, p.ID, true)

	for _, id := range []string{"p-01JNQX6Z2V0000000000000000", p.Builds[0].ID, "p-x"} {
		if _, err := l.Request(ctx, []string{"web"}, id); exitCodeOf(err) != 2 {
			t.Errorf("request --plan %s: %v, want exit 2", id, err)
		}
		if _, err := l.Plan(ctx, id); exitCodeOf(err) != 2 {
			t.Errorf("plan %s: %v, want exit 2", id, err)
		}
	}
}

func TestListStates(t *testing.T) {
	l, _ := newTestLedger(t)
	b1 := request(t, l, "app").Builds[0].ID
	b2 := request(t, l, "app").Builds[0].ID
	b3 := request(t, l, "app").Builds[0].ID
	b4 := request(t, l, "app").Builds[0].ID
	d1 := request(t, l, "db").Builds[0].ID
	rec(t, l, b1, "reg/app:1") // current, then superseded by b3
	rec(t, l, b2, "")
	rec(t, l, b3, "reg/app:3")
	rec(t, l, d1, "reg/db:1")

	all, err := l.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range all {
		got = append(got, fmt.Sprintf("%s %s %s", b.ID, b.Module, b.State))
	}
	want := []string{b1 + " app superseded", b2 + " app failed", b3 + " app current", b4 + " app pending", d1 + " db current"}
	if !slices.Equal(got, want) {
		t.Errorf("list:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	cur, err := Currents(l.Dir)
	if err != nil || len(cur) != 2 || cur[0].ID != b3 || cur[1].ID != d1 {
		t.Errorf("Currents: %+v, %v; want app's %s and db's %s", cur, err, b3, d1)
	}
	db, err := l.List(ctx, "db")
	if err != nil || len(db) != 1 || db[0].ID != d1 {
		t.Errorf("list db: %+v, %v", db, err)
	}
	none, err := l.List(ctx, "nothing")
	if err != nil || len(none) != 0 {
		t.Errorf("list of a module without builds: %+v, %v", none, err)
	}
}

// TestRetention records far more builds than are retained, and checks that
// the module's files stay few and bounded, that the newest Retain builds are
// kept in full, and that pruned builds are still known: a late record of an
// old pending build is superseded, a retried record of a pruned one is
// idempotent or a conflict, and old plans still read.
func TestRetention(t *testing.T) {
	l, d := newTestLedger(t)
	l.Retain, l.ChunkSize = 5, 2
	late := request(t, l, "app", "db") // recorded only at the end
	first := request(t, l, "app")
	firstImg := digestImage("reg/app", 0)
	rec(t, l, first.Builds[0].ID, firstImg)
	const n = 300
	var last string
	issued := map[string]bool{first.Builds[0].ID: true}
	for _, b := range late.Builds {
		issued[b.ID] = true
	}
	for i := 1; i <= n; i++ {
		last = request(t, l, "app").Builds[0].ID
		issued[last] = true
		img := digestImage("reg/app", i)
		if i%7 == 0 {
			img = ""
		}
		rec(t, l, last, img)
	}

	files := snapshot(t, d)
	var chunks, levels int
	for name := range files {
		switch {
		case strings.HasPrefix(name, "app.chunk-"):
			chunks++
		case strings.HasPrefix(name, "app.archive-"):
			levels++
		}
	}
	// 301 recorded builds: 150 chunks of 2, the newest 3 kept plus those
	// not yet archived in a batch of 5: 145 archived in 29 batches, which
	// are 35 in base 8: 3+5 segments.
	if chunks != 5 || levels != 8 {
		t.Errorf("after %d records: %d chunk files (want 5) and %d archive files (want 8)", n+1, chunks, levels)
	}
	list, err := l.List(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	var full int
	for _, b := range list {
		if b.State != StatePending {
			full++
		}
		if b.ID == first.Builds[0].ID {
			t.Errorf("list still shows the first build, long pruned")
		}
	}
	if full < 5 || full >= 5+(archiveBatch+1)*2 {
		t.Errorf("list shows %d recorded builds, want 5 to %d", full, 5+(archiveBatch+1)*2-1)
	}
	if !slices.ContainsFunc(list, func(b Build) bool { return b.ID == late.Builds[0].ID && b.State == StatePending }) {
		t.Errorf("list lost the old pending build %s", late.Builds[0].ID)
	}

	// The old pending build finishes at last: superseded, never unknown.
	got := rec(t, l, late.Builds[0].ID, digestImage("reg/app", 999))
	if got.Outcome != OutcomeSuperseded {
		t.Errorf("late record of an old build: %s, want superseded", got.Outcome)
	}
	checkSettled(t, l, late.ID, false)
	rec(t, l, late.Builds[1].ID, "reg/db:1")
	checkSettled(t, l, late.ID, true)

	// A retried record of the first build, long pruned.
	again, err := l.Record(ctx, first.Builds[0].ID, mustImage(t, firstImg), "")
	if err != nil || again.Outcome != OutcomeCurrent || !again.Again || !again.Build.Pruned {
		t.Errorf("record a pruned build again: %+v, %v; want its first outcome, current", again, err)
	}
	before := snapshot(t, d)
	if _, err := l.Record(ctx, first.Builds[0].ID, mustImage(t, digestImage("reg/app", 5)), ""); exitCodeOf(err) != 4 {
		t.Errorf("record a pruned build with another image: %v, want exit 4", err)
	}
	if _, err := l.Record(ctx, first.Builds[0].ID, nil, ""); exitCodeOf(err) != 4 {
		t.Errorf("record a pruned build as failed: %v, want exit 4", err)
	}
	if !maps.Equal(before, snapshot(t, d)) {
		t.Errorf("a refused record changed the ledger")
	}
	// An id between two issued ones was never issued. Ids issued in one
	// millisecond count up, so the one picked must be none of them.
	never := ""
	for _, c := range crockford {
		if id := first.Builds[0].ID[:27] + string(c); !issued[id] {
			never = id
			break
		}
	}
	if _, err := l.Record(ctx, never, mustImage(t, firstImg), ""); exitCodeOf(err) != 2 {
		t.Errorf("record of a never-issued old id: %v, want exit 2", err)
	}

	// The first plan, out of plans.json, reads from its builds' compact
	// records, and still takes builds with --plan.
	p, err := l.Plan(ctx, first.ID)
	if err != nil || !p.Settled || len(p.Builds) != 1 || p.Builds[0].State != StateSuperseded {
		t.Errorf("plan of pruned builds: %+v, %v", p, err)
	}
	if _, err := l.Request(ctx, []string{"db"}, first.ID); err != nil {
		t.Errorf("request --plan of an old plan: %v", err)
	}
	checkSettled(t, l, first.ID, false)

	cur, _, _ := Current(d, "app")
	if cur.ID != last && n%7 != 0 {
		t.Errorf("current %s, want the last build %s", cur.ID, last)
	}
}

// TestKilledBetweenWrites replays a record killed after it wrote the
// module's file and before the index: the build must read as recorded, its
// plan settled, a retry must be idempotent, and the index is then repaired.
func TestKilledBetweenWrites(t *testing.T) {
	for _, flush := range []bool{false, true} {
		t.Run(fmt.Sprintf("flush=%v", flush), func(t *testing.T) {
			l, d := newTestLedger(t)
			l.ChunkSize = 3
			if flush {
				// Two recorded builds: the third record flushes.
				for range 2 {
					rec(t, l, request(t, l, "app").Builds[0].ID, "reg/app:0")
				}
			}
			p := request(t, l, "app")
			id := p.Builds[0].ID
			indexPath := filepath.Join(d.Path(), indexFile)
			index, err := os.ReadFile(indexPath)
			if err != nil {
				t.Fatal(err)
			}
			rec(t, l, id, "reg/app:1")
			if err := os.WriteFile(indexPath, index, 0o600); err != nil { // the kill
				t.Fatal(err)
			}

			list, err := l.List(ctx, "app")
			if err != nil {
				t.Fatal(err)
			}
			var states []State
			for _, b := range list {
				if b.ID == id {
					states = append(states, b.State)
				}
			}
			if !slices.Equal(states, []State{StateCurrent}) {
				t.Errorf("list shows build %s as %v, want once, current", id, states)
			}
			checkSettled(t, l, p.ID, true)
			if got := rec(t, l, id, "reg/app:1"); got.Outcome != OutcomeCurrent || !got.Again {
				t.Errorf("retry after the kill: %+v", got)
			}
			if _, err := l.Record(ctx, id, mustImage(t, "reg/app:2"), ""); exitCodeOf(err) != 4 {
				t.Errorf("another image after the kill: %v, want exit 4", err)
			}
			idx, err := readIndex(d)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := idx.Pending[id]; ok {
				t.Errorf("the retry left %s pending in the index", id)
			}
		})
	}
}

// TestKilledBetweenWritesThenAnotherRecord: the module's next record drops
// the stale pending entry before it overwrites the last-recorded id.
func TestKilledBetweenWritesThenAnotherRecord(t *testing.T) {
	l, d := newTestLedger(t)
	a := request(t, l, "app").Builds[0].ID
	b := request(t, l, "app").Builds[0].ID
	indexPath := filepath.Join(d.Path(), indexFile)
	index, _ := os.ReadFile(indexPath)
	rec(t, l, a, "reg/app:1")
	if err := os.WriteFile(indexPath, index, 0o600); err != nil {
		t.Fatal(err)
	}
	rec(t, l, b, "reg/app:2")
	idx, err := readIndex(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Pending) != 0 {
		t.Errorf("index still has pending builds %v", idx.Pending)
	}
	list, _ := l.List(ctx, "app")
	if len(list) != 2 || list[0].State != StateSuperseded || list[1].State != StateCurrent {
		t.Errorf("list %+v", list)
	}
}
