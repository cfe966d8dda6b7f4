package engine_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
)

// TestCreateRuntimeFields: the runtime fields of a container reach the
// engine's create, as its inspect shows them. The container is created,
// not started: privileged needs capabilities a test sandbox may lack.
func TestCreateRuntimeFields(t *testing.T) {
	c := enginetest.Client(t)
	enginetest.RequireImage(t, c, enginetest.Image)
	name := prefix + "runtime"
	create(t, c, name, engine.Spec{
		Image:       enginetest.Image,
		Cmd:         []string{"sleep", "300"},
		NetworkMode: "none",
		Binds:       []string{"/etc/hostname:/run/secrets/pw:ro"},
		Expose:      []string{"53/udp", "8080/tcp"},
		Sysctls:     map[string]string{"net.core.somaxconn": "511"},
		Ulimits:     []engine.Ulimit{{Name: "nofile", Soft: 1024, Hard: 2048}, {Name: "nproc", Soft: 300, Hard: 300}},
		Privileged:  true,
		StdinOpen:   true,
		Tty:         true,
		DNS:         []string{"198.18.0.53", "198.18.0.54"},
	})
	var got struct {
		Config struct {
			ExposedPorts map[string]struct{}
			OpenStdin    bool
			Tty          bool
		}
		HostConfig struct {
			Binds   []string
			Sysctls map[string]string
			Ulimits []struct {
				Name       string
				Soft, Hard int64
			}
			Privileged bool
			DNS        []string `json:"Dns"`
		}
	}
	rawGet(t, c.Host(), "/containers/"+name+"/json", &got)
	want := got
	want.Config.ExposedPorts = map[string]struct{}{"53/udp": {}, "8080/tcp": {}}
	want.Config.OpenStdin, want.Config.Tty = true, true
	want.HostConfig.Binds = []string{"/etc/hostname:/run/secrets/pw:ro"}
	want.HostConfig.Sysctls = map[string]string{"net.core.somaxconn": "511"}
	want.HostConfig.Ulimits = []struct {
		Name       string
		Soft, Hard int64
	}{{"nofile", 1024, 2048}, {"nproc", 300, 300}}
	want.HostConfig.Privileged = true
	want.HostConfig.DNS = []string{"198.18.0.53", "198.18.0.54"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("inspect =\n%+v\nwant\n%+v", got, want)
	}
}

// rawGet decodes the engine's answer to GET path into v.
func rawGet(t *testing.T, host, path string, v any) {
	t.Helper()
	hc := &http.Client{Timeout: 30 * time.Second}
	base := "http://" + strings.TrimPrefix(host, "tcp://")
	if sock, ok := strings.CutPrefix(host, "unix://"); ok {
		hc.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}
		base = "http://engine"
	}
	resp, err := hc.Get(base + "/v1.41" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatal(err)
	}
}
