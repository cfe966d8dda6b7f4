package mesh

import (
	"reflect"
	"testing"
)

// networkRefusals are the networks' decode and validation errors, each
// with the line it must blame.
func networkRefusals() []refusal {
	c := func(name, body, field, msg string) refusal {
		return refusal{name: name, src: base + body, field: fieldsBase + field, msg: msg}
	}
	m := func(name, nets, field, msg string) refusal {
		return refusal{name: name, src: "\nmodules:\n  store:\n    networks:\n" + nets + "    containers:\n      registry: {image: x}\n",
			field: "modules.store.networks." + field, msg: msg}
	}
	return []refusal{
		c("networks unknown", "        networks: [back] # <-\n", "networks.back", `unknown network "back": declare it under modules.store.networks (this module has: none)`),
		c("networks with network", "        network: host\n        networks: [back] # <-\n", "networks", "cannot combine with network: host"),
		c("networks listed twice", "        networks:\n          - back\n          - back # <-\n", "networks[1]", `"back" is listed twice`),
		c("networks twice in a map", "        networks:\n          back: {}\n          back: {} # <-\n    networks: {back: {}}\n", "networks.back", `"back" is listed twice`),
		c("networks not names", "        networks:\n          - {a: b} # <-\n", "networks[0]", "want a network name"),
		c("networks a string", "        networks: back # <-\n", "networks", "want a list of network names or a map"),
		c("networks own module by path", "        networks: [store/back] # <-\n", "networks.store/back", `"store/back" is this module's own network: write back`),
		c("networks bad path", "        networks: [Other/back] # <-\n", "networks.Other/back", `"Other/back" is not a network`),
		c("networks unknown in another module", "        networks: [other/back] # <-\n  other:\n    networks: {front: {}}\n    containers:\n      y: {image: x}\n",
			"networks.other/back", `module other has no network "back" (it has: front)`),
		c("networks alias not a host name", "        networks:\n          back:\n            aliases: [\"a b\"] # <-\n    networks: {back: {}}\n", "networks.back.aliases[0]", `"a b" is not a host name`),
		c("networks unknown key", "        networks:\n          back:\n            alias: [x] # <-\n    networks: {back: {}}\n", "networks.back.alias", `unknown field "alias"`),
		m("network name", "      Back: {} # <-\n", "Back", `network name "Back" is invalid`),
		m("network external and internal", "      back:\n        external: shared\n        internal: true # <-\n", "back.internal", "an external network is not created by meshctl"),
		m("network external bad", "      back:\n        external: \"a b\" # <-\n", "back.external", `"a b" is not a network name`),
		m("network unknown key", "      back:\n        driver: overlay # <-\n", "back.driver", `unknown field "driver"`),
	}
}

func TestDecodeNetworkRefusals(t *testing.T) {
	for _, tt := range networkRefusals() {
		t.Run(tt.name, func(t *testing.T) {
			s := src(tt.src)
			_, err := Decode("mesh.yaml", []byte(s))
			checkRefusal(t, err, "mesh.yaml", markedLine(t, s), tt.field, tt.msg)
		})
	}
}

// TestDecodeNetworks decodes both forms of a container's networks and
// checks the canonical spec they make: engine names, aliases sorted, the
// internal flag, another module's network and an external one.
func TestDecodeNetworks(t *testing.T) {
	f, err := Decode("mesh.yaml", []byte(src(`
modules:
  shop:
    networks:
      default: {}
      back: {internal: true}
      shared: {external: proxy-net}
    containers:
      db:
        image: x
        networks: [back]
      api:
        image: x
        networks:
          default:
          back: {aliases: [store, api-v2]}
          shared: {}
          metrics/scrape: {aliases: [shop-api]}
          gone/net: {}
      plain: {image: x}
  metrics:
    networks:
      scrape: {}
    containers:
      prom: {image: x, networks: [scrape]}
`)))
	if err != nil {
		t.Fatal(err)
	}
	got := f.SpecNetworks("shop", "api")
	want := map[string]SpecNetwork{
		"meshctl.shop.default":   {},
		"meshctl.shop.back":      {Aliases: []string{"api-v2", "store"}, Internal: true},
		"proxy-net":              {},
		"meshctl.metrics.scrape": {Aliases: []string{"shop-api"}},
		"meshctl.gone.net":       {}, // a module applied from another file
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SpecNetworks(shop, api) = %v\nwant %v", got, want)
	}
	if got := f.SpecNetworks("shop", "plain"); got != nil {
		t.Errorf("a container without networks: %v, want nil (an older spec reads alike)", got)
	}
	wantNets := []DesiredNetwork{
		{Name: "meshctl.metrics.scrape", Module: "metrics", Net: "scrape"},
		{Name: "meshctl.shop.back", Module: "shop", Net: "back", Internal: true},
		{Name: "meshctl.shop.default", Module: "shop", Net: "default"},
	}
	if got := f.DesiredNetworks(); !reflect.DeepEqual(got, wantNets) {
		t.Errorf("DesiredNetworks = %v\nwant %v (never the external one)", got, wantNets)
	}
}

// TestNetworksDiff: joining, leaving, an alias or the internal flag is a
// change named networks.NAME; alias order and no networks at all are not.
func TestNetworksDiff(t *testing.T) {
	s := func(n map[string]SpecNetwork) Spec { return Spec{V: SpecVersion, Image: "x", Networks: n} }
	a := map[string]SpecNetwork{"meshctl.m.n": {Aliases: []string{"a", "b"}}}
	for _, tt := range []struct {
		name       string
		have, want Spec
		diff       []string
	}{
		{"same", s(a), s(map[string]SpecNetwork{"meshctl.m.n": {Aliases: []string{"b", "a"}}}), nil},
		{"none, and none recorded", Spec{V: 2, Image: "x"}, s(map[string]SpecNetwork{}), nil},
		{"joined", s(nil), s(a), []string{"networks.meshctl.m.n"}},
		{"left", s(a), s(nil), []string{"networks.meshctl.m.n"}},
		{"alias", s(a), s(map[string]SpecNetwork{"meshctl.m.n": {Aliases: []string{"a"}}}), []string{"networks.meshctl.m.n"}},
		{"internal", s(a), s(map[string]SpecNetwork{"meshctl.m.n": {Aliases: []string{"a", "b"}, Internal: true}}), []string{"networks.meshctl.m.n"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Through the label, as apply compares them.
			have, err := DecodeSpec(tt.have.Encode())
			if err != nil {
				t.Fatal(err)
			}
			if got := Diff(have, tt.want); !reflect.DeepEqual(got, tt.diff) {
				t.Errorf("Diff = %v, want %v", got, tt.diff)
			}
		})
	}
}

func TestNetworkOwner(t *testing.T) {
	for name, want := range map[string][2]string{
		"meshctl.shop.default": {"shop", "default"},
		"shop_default":         {},
		"meshctl.shop":         {},
		"meshctl.Shop.x":       {},
	} {
		m, n, ok := NetworkOwner(name)
		if ok != (want[0] != "") || m != want[0] || n != want[1] {
			t.Errorf("NetworkOwner(%q) = %q, %q, %v; want %v", name, m, n, ok, want)
		}
	}
	if m, n, ok := NetworkOwner(NetworkName("a-b", "c")); !ok || m != "a-b" || n != "c" {
		t.Errorf("NetworkOwner(NetworkName) does not read it back: %q %q %v", m, n, ok)
	}
}
