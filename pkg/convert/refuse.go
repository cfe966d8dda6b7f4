package convert

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshctl/meshctl/pkg/fault"
)

// RefusedError lists every key convert cannot carry over, each once, with its
// reason and next step. It is bad input (exit 2).
type RefusedError struct{ Keys []string }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("cannot carry over %d Compose key(s); nothing was converted (each says what to do; then convert again):\n  %s",
		len(e.Keys), strings.Join(e.Keys, "\n  "))
}

// Fault says a refusal is bad input.
func (e *RefusedError) Fault() fault.Kind { return fault.BadInput }

// refusals are the keys refused so far, one message per key path. A key found
// by two checks, the raw model's and the project's, is refused and counted
// once.
type refusals map[string]string

func (r refusals) add(path, format string, args ...any) {
	if _, ok := r[path]; !ok {
		r[path] = fmt.Sprintf(format, args...)
	}
}

func (r refusals) has(path string) bool {
	_, ok := r[path]
	return ok
}

func (r refusals) err() error {
	if len(r) == 0 {
		return nil
	}
	keys := []string{}
	for _, p := range slices.Sorted(maps.Keys(r)) {
		keys = append(keys, p+": "+r[p])
	}
	return &RefusedError{Keys: keys}
}

// nextSteps says, for a Compose key meshctl has no field for, why and what
// to do instead. CONTAINER stands for the container's mesh name
// (MODULE.NAME), SERVICE for the service's.
var nextSteps = map[string]string{
	"runtime": "meshctl runs containers with the engine's default runtime: remove runtime, or make it the engine's default " +
		"(dockerd --default-runtime)",
	"platform": "meshctl runs the image built for the host's platform: remove platform, or name an image of that platform " +
		"(pinned by digest)",
	"dns_search": "meshctl does not set DNS search domains: remove dns_search, or set them for the engine (\"dns-search\" in daemon.json)",
	"dns_opt":    "meshctl does not set DNS options: remove dns_opt, or set them for the engine (\"dns-opts\" in daemon.json)",
	"devices":    "meshctl does not pass devices: remove devices, or run SERVICE with Compose",
	"shm_size":   "meshctl does not set /dev/shm's size: remove shm_size, or mount a tmpfs of that size on /dev/shm (tmpfs: [/dev/shm:size=…])",
	"develop":    "develop (compose watch) is for a developer's machine: remove it, or keep it in an override file you do not convert",
	"replicas": "meshctl runs one container per service: remove deploy.replicas, or write one service per copy " +
		"(each with its own ports)",
	"max_attempts": "meshctl has no limit of restart attempts: remove max_attempts (the container restarts as its condition says)",
	"delay":        "Compose uses it only in Swarm, and meshctl not at all (the engine's restart backoff applies): remove it",
	"window":       "Compose uses it only in Swarm, and meshctl not at all: remove it",
	"mode":         "meshctl runs one container per service on this host: remove deploy.mode",
}

// notCarried is the reason and next step for key, the last part of path. The
// key is of the service SERVICE, whose container is CONTAINER.
func notCarried(key, service, container string) string {
	step, ok := nextSteps[key]
	switch {
	case !ok && service == "":
		return "not carried over by meshctl: remove it, or keep this project under Compose"
	case !ok:
		return "not carried over by meshctl: remove it, or keep this service under Compose"
	}
	return strings.NewReplacer("CONTAINER", container, "SERVICE", service).Replace(step)
}
