package harness

import (
	"context"
	"strconv"
	"time"
)

// The doors of a depends-on chain: db, then api, which depends on it,
// then the service, which depends on api. A new version recreates the
// three in that order, each once those it depends on are done and healthy.

// fltChain is the chain's db and api. Both stop at once (init forwards
// SIGTERM to sleep) and pass their probe an INTERVAL after their start.
const fltChain = `      db:
        image: meshtest/busybox:1
        command: [sleep, "100000"]
        init: true
        labels: {flt.version: "VERSION"}
        network: none
        restart: always
        stop-grace-period: 2s
        healthcheck: {test: [CMD, "true"], interval: INTERVAL, timeout: 2s, retries: 3}
      api:
        image: meshtest/busybox:1
        command: [sleep, "100000"]
        init: true
        labels: {flt.version: "VERSION"}
        network: none
        restart: always
        depends-on: [db]
        stop-grace-period: 2s
        healthcheck: {test: [CMD, "true"], interval: INTERVAL, timeout: 2s, retries: 3}
`

// chain returns the mesh file's lines for the chain before the service,
// and the service's depends-on line.
func (v fltVersion) chain() (containers, depends string) {
	if !v.Chain {
		return "", ""
	}
	return fltChain, "        depends-on: [api]\n"
}

// services are the module's services that must run at the end, by engine
// name, in depends-on order: the service last.
func (r *fltRun) services() []string {
	if r.ver.Chain {
		return []string{r.module + ".db", r.module + ".api", r.module + ".svc"}
	}
	return []string{r.module + ".svc"}
}

// chainV1 applies version 1 of the chain.
func chainV1(r *fltRun) {
	v := r.ver
	v.Chain, v.Interval = true, fltQuick
	r.applied(v)
}

// actChain applies version 2 of the chain through the proxy. Once the
// apply returns, whatever failed, each of the three runs, and none runs
// a version its dependency lacks (checkChainOrder).
func actChain(r *fltRun) {
	v := r.ver
	v.Version = "2"
	r.writeMesh(v)
	if res := r.run(true, "apply", "-f", r.file, "--settle", "1s"); res.sig == 0 {
		when := "after an apply that exited " + strconv.Itoa(res.code)
		r.checkAfterApply(when)
		r.checkServiceRuns(when)
		r.checkChainOrder(when)
	}
	r.want = "2"
}

// checkChainOrder checks that no container of the chain runs the new
// version while the one it depends on does not: a container is recreated
// only once its dependencies are done and healthy, and one whose
// dependency failed is not touched.
func (r *fltRun) checkChainOrder(when string) {
	ctx, cancel := context.WithTimeout(r.t.Context(), time.Minute)
	defer cancel()
	names := r.services()
	version := map[string]string{}
	for _, name := range names {
		if x, err := r.g.m.Eng.Inspect(ctx, name); err == nil {
			version[name] = x.Labels["flt.version"]
		}
	}
	for i := 1; i < len(names); i++ {
		dep, name := names[i-1], names[i]
		if version[name] == "2" && version[dep] != "2" {
			r.t.Errorf("%s %s is version 2 and %s, which it depends on, is version %q", when, name, dep, version[dep])
		}
	}
}
