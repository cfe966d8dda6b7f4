package convert

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/cli"
)

// refusal is the message of the refusal of path in err, and how many
// refusals name path.
func refusal(t *testing.T, err error, path string) (string, int) {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want a refusal", err)
	}
	msg, n := "", 0
	for _, k := range re.Keys {
		if rest, ok := strings.CutPrefix(k, path+": "); ok {
			msg, n = rest, n+1
		}
	}
	return msg, n
}

// TestConvertDependsOnRequiredRestart: required: false and restart: true
// are refused by name; required: true (Compose's default) is carried.
func TestConvertDependsOnRequiredRestart(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    image: busybox
    depends_on:
      db: {condition: service_healthy, required: false}
      cache: {condition: service_started, restart: true}
      queue: {condition: service_started, required: true}
  db: {image: busybox}
  cache: {image: busybox}
  queue: {image: busybox}
`})
	_, err := Convert(context.Background(), Options{Files: []string{path}})
	for _, p := range []string{"services.web.depends_on.db.required", "services.web.depends_on.cache.restart"} {
		if msg, n := refusal(t, err, p); n != 1 || !strings.Contains(msg, "remove") {
			t.Errorf("%s refused %d times: %q", p, n, msg)
		}
	}
	if _, n := refusal(t, err, "services.web.depends_on.queue.required"); n != 0 {
		t.Errorf("required: true refused")
	}
}

// TestConvertRefusesOnce: a key two checks find (a top-level volume's
// external, by its keys and by the service that mounts it) is refused and
// counted once.
func TestConvertRefusesOnce(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web: {image: busybox, volumes: ["data:/d"]}
  db: {image: busybox, volumes: ["data:/d"]}
volumes:
  data: {external: true}
`})
	_, err := Convert(context.Background(), Options{Files: []string{path}})
	if msg, n := refusal(t, err, "volumes.data.external"); n != 1 || !strings.Contains(msg, "replace external: true with name: data") {
		t.Errorf("volumes.data.external refused %d times:\n%v", n, err)
	}
	if re := (*RefusedError)(nil); errors.As(err, &re) && len(re.Keys) != 1 {
		t.Errorf("%d refusals, want 1:\n%v", len(re.Keys), err)
	}
}

// TestConvertRefusalsNameTheNextStep: every key meshctl has no field for
// says why and what to do, not only "not carried over".
func TestConvertRefusalsNameTheNextStep(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    image: busybox
    networks: [front]
    runtime: runc
    platform: linux/amd64
    dns_search: [example.com]
    dns_opt: [ndots:2]
    devices: [/dev/fuse]
    shm_size: 64m
networks: {front: {}}
`})
	_, err := Convert(context.Background(), Options{Files: []string{path}})
	for _, key := range []string{"runtime", "platform", "dns_search", "dns_opt", "devices", "shm_size"} {
		msg, n := refusal(t, err, "services.web."+key)
		if n != 1 || strings.HasPrefix(msg, "not carried over by meshctl") || !strings.Contains(msg, ": ") {
			t.Errorf("%s: %q", key, msg)
		}
	}
	// Module networks are carried: a network is no longer refused.
	if msg, n := refusal(t, err, "networks.front"); n != 0 {
		t.Errorf("networks.front refused: %q", msg)
	}
}

// TestConvertDeployRestartPolicy: deploy.restart_policy.condition is
// carried as Compose maps it (any is always, none is no, and it wins over
// restart:); its other keys are refused, each saying what to do.
func TestConvertDeployRestartPolicy(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web: {image: busybox, restart: "no", deploy: {restart_policy: {condition: any}}}
  db: {image: busybox, deploy: {restart_policy: {condition: on-failure}}}
  cache: {image: busybox, deploy: {restart_policy: {condition: none}}}
`})
	r, err := Convert(context.Background(), Options{Files: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"web": "always", "db": "on-failure", "cache": "no"} {
		if got := r.File.Modules["shop"].Containers[name].Restart; got != want {
			t.Errorf("%s: restart %q, want %q", name, got, want)
		}
	}
	path = write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web: {image: busybox, deploy: {restart_policy: {condition: on-failure, max_attempts: 3, delay: 5s}}}
`})
	_, err = Convert(context.Background(), Options{Files: []string{path}})
	for _, key := range []string{"max_attempts", "delay"} {
		if msg, n := refusal(t, err, "services.web.deploy.restart_policy."+key); n != 1 || !strings.Contains(msg, "remove") {
			t.Errorf("%s: %q", key, msg)
		}
	}
}

// TestConvertHelpRefusesNoCarriedKey: the keys `meshctl help convert` gives
// as refused are keys convert does not carry (networks were listed there
// after convert had begun to carry them), and the help says what becomes of
// the keys it carries whose meaning is not plain from their name.
func TestConvertHelpRefusesNoCarriedKey(t *testing.T) {
	var out bytes.Buffer
	if code := cli.Run(context.Background(), cli.NewEnv(strings.NewReader(""), &out, &out), []string{"help", "convert"}); code != 0 {
		t.Fatalf("meshctl help convert: exit %d: %s", code, out.String())
	}
	help := strings.Join(strings.Fields(out.String()), " ")
	_, rest, ok := strings.Cut(help, "Any other key (")
	list, _, ok2 := strings.Cut(rest, ")")
	if !ok || !ok2 {
		t.Fatalf("help convert gives no list of refused keys:\n%s", out.String())
	}
	for _, item := range strings.Split(list, ",") {
		// "ports in long form with options meshctl lacks" names a part
		// of a key; a bare key is the whole of it.
		key := strings.Fields(item)
		if len(key) == 1 && (serviceKeys[key[0]] || topKeys[key[0]]) {
			t.Errorf("help convert gives %s as refused, but convert carries it", key[0])
		}
	}
	for _, says := range []string{"Networks become module networks", "Secrets and configs defined with file:", "A service with build:"} {
		if !strings.Contains(help, says) {
			t.Errorf("help convert does not say %q", says)
		}
	}
}
