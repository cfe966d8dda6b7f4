package convert

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/mesh"

	"go.yaml.in/yaml/v3"
)

// TestConvertNetworks: Compose's default network becomes the module
// network default, which every service without networks: joins (and
// convert says so); a named network keeps its name (made a module name),
// internal flag and aliases; an external one is joined by its engine name;
// a host-network service joins none; the result decodes.
func TestConvertNetworks(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web: {image: x, ports: ["127.0.0.1:8080:80"], networks: [default, edge]}
  api: {image: x}
  db:
    image: x
    networks:
      back_end: {aliases: [database, pg]}
      default:
  probe: {image: x, network_mode: host}
networks:
  back_end: {internal: true}
  edge: {external: true, name: proxy}
`})
	r, err := Convert(context.Background(), Options{Files: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	m := r.File.Modules["shop"]
	wantNets := map[string]*mesh.Network{"default": {}, "back-end": {Internal: true}, "edge": {External: "proxy"}}
	if !reflect.DeepEqual(m.Networks, wantNets) {
		t.Errorf("module networks %v, want %v", m.Networks, wantNets)
	}
	join := func(aliases ...string) *mesh.NetworkJoin { return &mesh.NetworkJoin{Aliases: aliases} }
	for name, want := range map[string]mesh.ContainerNetworks{
		"web":   {"default": join(), "edge": join()},
		"api":   {"default": join()},
		"db":    {"default": join(), "back-end": join("database", "pg")},
		"probe": nil,
	} {
		if got := m.Containers[name].Networks; !reflect.DeepEqual(got, want) {
			t.Errorf("%s joins %v, want %v", name, got, want)
		}
	}
	warned := strings.Join(r.Warnings, "\n")
	for _, s := range []string{
		"Compose's default network (shop_default) becomes the module network default (engine name meshctl.shop.default), which api, db, web join",
		"network back_end is called back-end in the module",
	} {
		if !strings.Contains(warned, s) {
			t.Errorf("warnings lack %q:\n%s", s, warned)
		}
	}
	out, err := yaml.Marshal(r.File) // as convert prints it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mesh.Decode("mesh.yaml", out); err != nil {
		t.Errorf("the converted file does not decode: %v\n%s", err, out)
	}
}

// TestConvertNetworkRefusals: what a module network cannot carry is
// refused by name.
func TestConvertNetworkRefusals(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    image: x
    networks:
      front: {ipv4_address: 198.18.3.3, priority: 10}
networks:
  front: {driver: overlay, attachable: true, ipam: {config: [{subnet: 198.18.3.0/24}]}}
`})
	_, err := Convert(context.Background(), Options{Files: []string{path}})
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("Convert = %v, want a refusal", err)
	}
	for _, key := range []string{"networks.front.driver", "networks.front.attachable", "networks.front.ipam",
		"services.web.networks.front.ipv4_address", "services.web.networks.front.priority"} {
		if msg, n := refusal(t, err, key); n != 1 || strings.HasPrefix(msg, "not carried over by meshctl") {
			t.Errorf("%s refused %d times, or without its next step (%q):\n%s", key, n, msg, strings.Join(re.Keys, "\n"))
		} else if strings.Contains(msg, "(,") || strings.Contains(msg, ".)") || strings.Contains(msg, "MODULE") {
			// A network's key has no service: a step naming one reads "(, or MODULE.)".
			t.Errorf("%s's next step has an empty or unfilled name: %q", key, msg)
		}
	}
}
