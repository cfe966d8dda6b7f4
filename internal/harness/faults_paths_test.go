package harness

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meshctl/meshctl/internal/faultproxy"
)

// The doors of the newer paths: a module network and its replace, a
// start-first recreate and its retirement, and a secret file's rotation.

// paths returns the mesh file's lines for the module's fields, the
// service's network and its secret.
func (v fltVersion) paths() (modFields, network, secret string) {
	network = "network: none"
	if v.Net {
		modFields = "    networks: {back: {internal: " + strconv.FormatBool(v.Internal) + "}}\n"
		network = "networks: {back: {aliases: [api]}}"
	}
	if v.StartFirst {
		modFields += "    update-order: start-first\n"
		network += "\n        drain: 300ms"
	}
	if v.Secret != "" {
		secret = "secrets: [{name: token, file: " + v.Secret + "}]"
	}
	if v.Config != "" {
		secret += "\n        configs: [{name: conf, file: " + v.Config + "}]"
	}
	return modFields, network, secret
}

// netV1 applies version 1 on a module network, start-first or not.
func netV1(startFirst bool) func(r *fltRun) {
	return func(r *fltRun) {
		v := r.ver
		v.Net, v.StartFirst, v.Interval = true, startFirst, fltQuick
		r.applied(v)
	}
}

// writeSecret writes the secret file a new content and returns its path.
func (r *fltRun) writeSecret() string {
	p := filepath.Join(r.dir, "token")
	if err := os.WriteFile(p, []byte("token-"+strconv.Itoa(r.rng.IntN(1e6))+"\n"), 0o600); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// actApplied applies the file through the proxy and checks what an
// apply that returned leaves.
func (r *fltRun) actApplied() {
	if res := r.run(true, "apply", "-f", r.file, "--settle", "1s"); res.sig == 0 {
		when := "after an apply that exited " + strconv.Itoa(res.code)
		r.checkAfterApply(when)
		// What an apply stopped, it puts back before it exits.
		r.checkServiceRuns(when)
	}
}

// actStartFirst replaces version 1 by version 2, start-first, through
// the proxy.
func actStartFirst(r *fltRun) {
	v := r.ver
	v.Version = "2"
	r.writeMesh(v)
	r.actApplied()
	r.want = "2"
}

// actNetworkReplace changes the module network's internal flag through
// the proxy: the network is replaced under its containers.
func actNetworkReplace(r *fltRun) {
	v := r.ver
	v.Internal = !v.Internal
	r.writeMesh(v)
	r.actApplied()
}

// actNetworkReplaceSignalled is actNetworkReplace with SIGTERM half a
// second into the first hang the proxy injects: a signal during a hung
// call of the recreate, or of its put-back.
func actNetworkReplaceSignalled(r *fltRun) {
	v := r.ver
	v.Internal = !v.Internal
	r.writeMesh(v)
	before := len(r.g.proxy.Calls())
	p := r.start(true, "apply", "-f", r.file, "--settle", "1s")
	if r.waitFault(p, before, faultproxy.Hang) {
		time.Sleep(500 * time.Millisecond)
		p.signal(syscall.SIGTERM)
	}
	res := p.wait()
	r.t.Logf("apply: %s\n%s%s", res.describe(), res.stdout, res.stderr)
	if res.sig == 0 {
		when := "after an apply that exited " + strconv.Itoa(res.code)
		r.checkAfterApply(when)
		r.checkServiceRuns(when)
	}
}

// waitFault waits until the proxy injected a fault of class into a call
// since the call numbered before; false if p ended first.
func (r *fltRun) waitFault(p *fltProc, before int, class faultproxy.Class) bool {
	for {
		if slices.ContainsFunc(r.g.proxy.Calls()[before:], func(c faultproxy.Call) bool { return c.Fault == class }) {
			return true
		}
		select {
		case <-p.done:
			r.t.Logf("no %s fault while meshctl %s ran", class, strings.Join(p.args, " "))
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// checkAfterApply checks what an apply leaves once it returns, whatever
// failed: no NAME.meshctl-* container of the module runs, and the
// service's alias answers for one container at most. Where such a
// container is left at all, status --check reports a problem.
func (r *fltRun) checkAfterApply(when string) {
	ctx, cancel := context.WithTimeout(r.t.Context(), time.Minute)
	defer cancel()
	list, err := r.g.m.Eng.List(ctx, map[string]string{"io.meshctl.module": r.module})
	if err != nil {
		r.t.Fatal(err)
	}
	var left []string
	for _, c := range list {
		if !strings.Contains(c.Name, ".meshctl-") {
			continue
		}
		left = append(left, c.Name+" ("+c.State+")")
		if c.Running {
			r.t.Errorf("%s %s runs", when, c.Name)
		}
	}
	if r.ver.Net {
		r.checkOneOnAlias(ctx, when)
	}
	if len(left) > 0 && len(r.problems()) == 0 {
		r.t.Errorf("%s %s is left, and status --check reports nothing of it", when, strings.Join(left, ", "))
	}
}

// checkOneOnAlias checks that at most one running container of the
// service is on its network: each answers to the alias.
func (r *fltRun) checkOneOnAlias(ctx context.Context, when string) {
	n, err := r.g.m.Eng.InspectNetwork(ctx, "meshctl."+r.module+".back")
	if err != nil {
		r.t.Logf("%s: the module's network: %v", when, err)
		return
	}
	var on []string
	for _, name := range n.Containers {
		if !strings.HasPrefix(name, r.module+".svc") {
			continue
		}
		if x, err := r.g.m.Eng.Inspect(ctx, name); err == nil && x.Running {
			on = append(on, name+" (version "+x.Labels["flt.version"]+")")
		}
	}
	if len(on) > 1 {
		r.t.Errorf("%s the alias api answers for %s", when, strings.Join(on, " and "))
	}
}
