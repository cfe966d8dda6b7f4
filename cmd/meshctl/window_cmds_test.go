package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdIDOf prints the engine id of a container, so that a script can tell
// "the same container" from "a new one with the same name":
//
//	idof NAME
//	cp stdout before.id
//	...
//	idof NAME
//	cmp stdout before.id      (same container)   ! cmp stdout before.id   (replaced)
func cmdIDOf(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: idof NAME")
	}
	c, err := engine.New(ts.Getenv("MESHCTL_TEST_DOCKER_HOST"))
	ts.Check(err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	x, err := c.Inspect(ctx, args[0])
	ts.Check(err)
	fmt.Fprintln(ts.Stdout(), x.ID)
}

// cmdPidGone waits until the process whose pid is in FILE is gone (a zombie
// counts as gone: it runs nothing): pidgone FILE [DUR], default 2s. With !,
// it checks that the process is alive now, so that "gone" later means
// something.
func cmdPidGone(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: pidgone FILE [DUR]")
	}
	data, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		ts.Fatalf("pidgone: %s holds no pid: %q", args[0], data)
	}
	if neg {
		if !alive(pid) {
			ts.Fatalf("pidgone: process %d is not running", pid)
		}
		return
	}
	d := 2 * time.Second
	if len(args) > 1 {
		d, err = time.ParseDuration(args[1])
		ts.Check(err)
	}
	deadline := time.Now().Add(d)
	for alive(pid) {
		if time.Now().After(deadline) {
			ts.Fatalf("pidgone: process %d still runs after %s", pid, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs (exists and is not a zombie).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...; comm may hold spaces and parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// cmdJSONKeys checks the exact set of keys of the object at PATH in the last
// command's stdout, a JSON document: jsonkeys PATH KEY... PATH is dotted,
// with numbers indexing arrays ("windows.0"); "." is the document itself.
func cmdJSONKeys(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 || neg {
		ts.Fatalf("usage: jsonkeys PATH KEY...")
	}
	v := jsonAt(ts, args[0])
	obj, ok := v.(map[string]any)
	if !ok {
		ts.Fatalf("jsonkeys: %s is %T, not an object", args[0], v)
	}
	var got []string
	for k := range obj {
		got = append(got, k)
	}
	want := slices.Clone(args[1:])
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		ts.Fatalf("jsonkeys %s: keys %v, want %v", args[0], got, want)
	}
}

// cmdJSONVal checks that the value at PATH in the last stdout matches REGEX:
// jsonval PATH REGEX. Strings are matched as they are, other values as JSON
// (so null, 0, true, [..] and {..} can be matched too). With !, the value
// must not match (a missing PATH is an error either way).
func cmdJSONVal(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: jsonval PATH REGEX")
	}
	v := jsonAt(ts, args[0])
	s, ok := v.(string)
	if !ok {
		b, _ := json.Marshal(v)
		s = string(b)
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	if re.MatchString(s) == neg {
		ts.Fatalf("jsonval %s: %q; want match %v of %s", args[0], s, !neg, args[1])
	}
}

// cmdJSONLen checks the length of the array at PATH: jsonlen PATH N.
func cmdJSONLen(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: jsonlen PATH N")
	}
	want, err := strconv.Atoi(args[1])
	ts.Check(err)
	arr, ok := jsonAt(ts, args[0]).([]any)
	if !ok {
		ts.Fatalf("jsonlen: %s is not an array", args[0])
	}
	if len(arr) != want {
		ts.Fatalf("jsonlen %s: %d, want %d", args[0], len(arr), want)
	}
}

func jsonAt(ts *testscript.TestScript, path string) any {
	out := ts.ReadFile("stdout")
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		ts.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if dec.More() {
		ts.Fatalf("stdout holds more than one JSON document:\n%s", out)
	}
	if path == "." {
		return doc
	}
	v := doc
	for _, p := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[p]
			if !ok {
				ts.Fatalf("json: no key %q on the way to %s", p, path)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				ts.Fatalf("json: no index %q (length %d) on the way to %s", p, len(x), path)
			}
			v = x[i]
		default:
			ts.Fatalf("json: %q is not inside an object or array on the way to %s", p, path)
		}
	}
	return v
}

// cmdReapWindows (winreap) arranges that, when the script ends, every
// meshctl process this test started for the script (its child, with the
// script's MESHCTL_STATE_DIR) and that still runs is SIGKILLed before the
// cleanups registered earlier run (ctr modules): a failed script's
// background window would otherwise close after the cleanup and bring its
// containers back on the shared engine. Call it right after ctr modules.
func cmdReapWindows(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: winreap")
	}
	mark := "MESHCTL_STATE_DIR=" + ts.Getenv("MESHCTL_STATE_DIR")
	ts.Defer(func() {
		procs, _ := os.ReadDir("/proc")
		for _, p := range procs {
			pid, err := strconv.Atoi(p.Name())
			// Only our own children: never a process this test did not start.
			if err != nil || parentOf(pid) != os.Getpid() || !alive(pid) {
				continue
			}
			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), mark) {
				continue
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
			for deadline := time.Now().Add(5 * time.Second); alive(pid) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
		}
	})
}

// parentOf returns the parent pid of pid, or 0.
func parentOf(pid int) int {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// cmdWaitHTTP waits until GET URL answers 200: waithttp URL [DUR], default
// 30s. Only loopback addresses are allowed: tests talk to nothing else.
// With !, it checks once that nothing answers (the connection fails).
func cmdWaitHTTP(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: waithttp URL [DUR]")
	}
	u, err := url.Parse(args[0])
	ts.Check(err)
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		ts.Fatalf("waithttp: %s is not a loopback address", u.Hostname())
	}
	client := &http.Client{Timeout: 2 * time.Second}
	get := func() (int, error) {
		resp, err := client.Get(args[0])
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if neg {
		if code, err := get(); err == nil {
			ts.Fatalf("waithttp: %s answers %d", args[0], code)
		}
		return
	}
	d := 30 * time.Second
	if len(args) > 1 {
		d, err = time.ParseDuration(args[1])
		ts.Check(err)
	}
	deadline := time.Now().Add(d)
	for {
		code, err := get()
		if err == nil && code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waithttp %s: not 200 after %s: %d %v", args[0], d, code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
