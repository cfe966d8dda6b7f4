package convert

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestConvertBuildRunsTheLedgersBuild: a service built from source runs its
// ledger module's current build (MODULE-SERVICE), with or without image:,
// and the note says how CI records each build.
func TestConvertBuildRunsTheLedgersBuild(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    build: {context: ., dockerfile: web.Dockerfile, args: {TOKEN: "${TOKEN}"}, shm_size: 64m}
  api:
    build: .
    image: registry.example:5000/shop/api:1
    pull_policy: build
`})
	t.Chdir(filepath.Dir(path))
	r, err := Convert(context.Background(), Options{Files: []string{path}, Env: []string{"TOKEN=hunter2"}})
	if err != nil {
		t.Fatal(err)
	}
	// Compose's default network becomes the module's, and convert says so.
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "Compose's default network (shop_default) becomes the module network default") {
		t.Errorf("warnings: %q", r.Warnings)
	}
	for name, want := range map[string]string{"web": "REGISTRY/web@sha256:", "api": "registry.example:5000/shop/api@sha256:"} {
		ct, note := r.File.Modules["shop"].Containers[name], r.Notes[name]
		if ct.Artifact != "shop-"+name || ct.Image != "" {
			t.Errorf("%s: artifact %q image %q, want artifact shop-%s", name, ct.Artifact, ct.Image, name)
		}
		for _, s := range []string{"meshctl build request shop-" + name, "meshctl build record ID --image REF", "meshctl build request --new shop-" + name, want, "context ."} {
			if !strings.Contains(note, s) {
				t.Errorf("%s's note lacks %q:\n%s", name, s, note)
			}
		}
		if strings.Contains(note, "hunter2") {
			t.Errorf("%s's note shows a build argument's value:\n%s", name, note)
		}
	}
	if !strings.Contains(r.Notes["web"], "dockerfile web.Dockerfile") || !strings.Contains(r.Notes["web"], "args TOKEN") ||
		!strings.Contains(r.Notes["web"], "and shm_size as the Compose file says") {
		t.Errorf("web's note: %s", r.Notes["web"])
	}
}

// TestConvertBuildOfABadNameRefusedOnce: a built service whose name is no
// mesh name is refused for its name, not again for its ledger module's.
func TestConvertBuildOfABadNameRefusedOnce(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": "name: shop\nservices:\n  serviceA: {build: .}\n"})
	_, err := Convert(context.Background(), Options{Files: []string{path}})
	if _, n := refusal(t, err, "services.serviceA"); n != 1 {
		t.Errorf("the name not refused: %v", err)
	}
	if _, n := refusal(t, err, "services.serviceA.build"); n != 0 {
		t.Errorf("build refused too: %v", err)
	}
}

// TestConvertSharedBuild: a service whose image: another service builds
// runs that build, and two services building one image share one build.
func TestConvertSharedBuild(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web: {build: ., image: shop/app:1}
  worker: {image: shop/app:1, command: [worker]}
  beat: {build: ., image: shop/app:1, command: [beat]}
  db: {image: postgres:16}
`})
	r, err := Convert(context.Background(), Options{Files: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	cts := r.File.Modules["shop"].Containers
	for name, want := range map[string]string{"web": "shop-beat", "worker": "shop-beat", "beat": "shop-beat", "db": ""} {
		if got := cts[name].Artifact; got != want {
			t.Errorf("%s: artifact %q, want %q", name, got, want)
		}
	}
	if cts["db"].Image != "postgres:16" || cts["worker"].Image != "" {
		t.Errorf("db %+v, worker %+v", cts["db"], cts["worker"])
	}
	if !strings.Contains(r.Notes["worker"], "the image beat builds") || !strings.Contains(r.Notes["beat"], "meshctl build request shop-beat") {
		t.Errorf("notes: %q", r.Notes)
	}
}
