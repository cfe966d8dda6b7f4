package convert

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/meshctl/meshctl/pkg/fault"
)

// TestConvertSaysComposeGoInItsWords: compose-go's log lines are captured
// (nothing raw on stderr), each warning said once, naming the file and key,
// and none for a variable that is set; its errors name the file and what
// to do.
func TestConvertSaysComposeGoInItsWords(t *testing.T) {
	var raw bytes.Buffer
	logrus.SetOutput(&raw)
	t.Cleanup(func() { logrus.SetOutput(os.Stderr) })
	path := write(t, map[string]string{"compose.yaml": `
version: "3.8"
name: shop
services:
  web:
    image: busybox:${TAG}
    command: ["echo", "${GREETING}", "${GREETING}"]
`})
	t.Chdir(filepath.Dir(path))
	r, err := Convert(context.Background(), Options{Files: []string{path}, Env: []string{"TAG=1"}})
	if err != nil {
		t.Fatal(err)
	}
	if raw.Len() > 0 {
		t.Errorf("compose-go logged raw:\n%s", raw.String())
	}
	want := []string{
		"compose.yaml: services.web.command[1]: ${GREETING} is not set, so Compose reads it as an empty string: " +
			"set GREETING in the environment or in .env, or give a default (${GREETING:-value}), then convert again",
		"compose.yaml: version is obsolete and ignored, by Compose as by meshctl: remove it",
	}
	if !slices.Equal(r.Warnings, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(r.Warnings, "\n"), strings.Join(want, "\n"))
	}

	// With an override, the warning names the file that refers to it.
	dir := filepath.Dir(path)
	if err := os.WriteFile(filepath.Join(dir, "compose.prod.yaml"), []byte("services:\n  web:\n    user: ${RUN_AS}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err = Convert(context.Background(), Options{Files: []string{path, filepath.Join(dir, "compose.prod.yaml")}, Env: []string{"TAG=1", "GREETING=hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(r.Warnings, func(w string) bool {
		return strings.HasPrefix(w, "compose.prod.yaml: services.web.user: ${RUN_AS} is not set")
	}) {
		t.Errorf("warnings: %q", r.Warnings)
	}

	path = write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    image: busybox
    container_name: web
    deploy: {replicas: 2}
`})
	t.Chdir(filepath.Dir(path))
	_, err = Convert(context.Background(), Options{Files: []string{path}})
	var le *fault.Error
	if !errors.As(err, &le) || !strings.HasPrefix(err.Error(), "compose.yaml: service web: container_name cannot be used with deploy.replicas") ||
		strings.Contains(err.Error(), "invalid compose project") {
		t.Errorf("err = %v", err)
	}

	path = write(t, map[string]string{"compose.yaml": "name: shop\nservices:\n  web: {image: busybox, volumes: [\"${MEDIA}:/media\"]}\n"})
	t.Chdir(filepath.Dir(path))
	r, err = Convert(context.Background(), Options{Files: []string{path}})
	if want := `compose.yaml: the volume ":/media" has an empty part`; err == nil || !strings.HasPrefix(err.Error(), want) ||
		len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "${MEDIA} is not set") {
		t.Errorf("err = %v, want %s…; warnings %q", err, want, r.Warnings)
	}

	path = write(t, map[string]string{"compose.yaml": "name: shop\nservices:\n  web: {image: busybox, wrongField: 1}\n"})
	t.Chdir(filepath.Dir(path))
	_, err = Convert(context.Background(), Options{Files: []string{path}})
	if want := "compose.yaml: services.web.wrongField is not a Compose key (Compose refuses it too): check its spelling, or remove it"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}
