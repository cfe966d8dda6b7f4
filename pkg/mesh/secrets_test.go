package mesh

import (
	"strings"
	"testing"
)

// canary is a secret value: no error may quote it, or any part of it.
const canary = "S3CRET-CANARY"

// TestDecodeErrorsNeverQuoteEnvValues: every way env can be wrong is
// refused with the key, the line and the field, never the value: a value with a NUL would otherwise reach the engine, whose error
// quotes "PW=…" into reports, state files and cron mail.
func TestDecodeErrorsNeverQuoteEnvValues(t *testing.T) {
	for _, tt := range []struct{ name, env, want string }{
		{"a string for the map", `env: PW=S3CRET-CANARY`, `env: want a map like {KEY: value} or a list like ["KEY=value"], not a string`},
		{"a quoted string for the map", `env: "S3CRET-CANARY-AND-MORE"`, `env: want a map`},
		{"a list item set twice", `env: [PW=S3CRET-CANARY-A, PW=S3CRET-CANARY-B]`, `env[1]: env item 1: "PW" is set twice (first on line 6)`},
		{"a list item without =", `env: [S3CRET-CANARY]`, `env[0]: env item 0: want KEY=value`},
		{"a NUL in a map value", `env: {PW: "S3CRET-CANARY\0"}`, `env.PW: the value holds a control character (NUL)`},
		{"a NUL in a list value", `env: ["PW=S3CRET-CANARY\0"]`, `env.PW: the value holds a control character (NUL)`},
		{"a bell in a value", `env: {PW: "S3CRET-CANARY\a"}`, `env.PW: the value holds a control character (U+0007)`},
		{"a carriage return in a value", `env: {PW: "S3CRET-CANARY\r"}`, `env.PW: the value holds a control character (U+000D)`},
		{"a list for a value", `env: {PW: [S3CRET-CANARY]}`, `env.PW: want a string, not a list`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := "modules:\n  store:\n    containers:\n      registry:\n        image: x\n        " + tt.env + "\n"
			_, err := Decode("mesh.yaml", []byte(file))
			if err == nil {
				t.Fatalf("Decode accepted %s", tt.env)
			}
			if strings.Contains(err.Error(), "S3CRET") {
				t.Errorf("Error() quotes the value: %v", err)
			}
			if want := "mesh.yaml:6: modules.store.containers.registry." + tt.want; !strings.Contains(err.Error(), want) {
				t.Errorf("Error() = %v\nwant it to hold %q", err, want)
			}
		})
	}
}

// TestDecodeErrorsNeverQuoteLoggingOptions: logging options hold secrets
// too (a splunk token): a string where their map belongs is not quoted.
func TestDecodeErrorsNeverQuoteLoggingOptions(t *testing.T) {
	_, err := Decode("mesh.yaml", []byte(src(`
modules:
  store:
    containers:
      registry:
        image: x
        logging: {driver: splunk, options: "S3CRET-CANARY"}
`)))
	want := "mesh.yaml:6: modules.store.containers.registry.logging.options: want a map of strings, like {KEY: value}, not a string"
	if err == nil || strings.Contains(err.Error(), "S3CRET") || !strings.Contains(err.Error(), want) {
		t.Errorf("Error() = %v\nwant %q, without the value", err, want)
	}
}

// TestDecodeTakesTabAndNewlineInEnv: a value may hold a tab, and newlines (a
// PEM certificate in a block scalar); only the other control characters
// are refused.
func TestDecodeTakesTabAndNewlineInEnv(t *testing.T) {
	f, err := Decode("mesh.yaml", []byte(src(`
modules:
  store:
    containers:
      registry:
        image: x
        env:
          TSV: "a\tb"
          CERT: |
            -----BEGIN CERTIFICATE-----
            MIIB
            -----END CERTIFICATE-----
`)))
	if err != nil {
		t.Fatal(err)
	}
	env := f.Modules["store"].Containers["registry"].Env
	if env["TSV"] != "a\tb" || strings.Count(env["CERT"], "\n") != 3 {
		t.Errorf("env = %q", env)
	}
}
