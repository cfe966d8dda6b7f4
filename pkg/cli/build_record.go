package cli

import (
	"context"

	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/spf13/cobra"
)

type buildRecordOptions struct {
	id     string
	image  string
	failed bool
	reason string
}

func newBuildRecordCmd(env *Env) *cobra.Command {
	opts := &buildRecordOptions{}
	cmd := &cobra.Command{
		Use:   "record ID --image REF | --failed [--reason TEXT]",
		Short: "Record a finished build: its image, or that it failed",
		Long: `Record a finished build: the image it built, or that it failed.

It prints the build id and the outcome:
  current     it became the module's current artifact
  superseded  a build requested later is already current: recorded, changes nothing
  failed      it failed; it is never current

REF is a Docker image reference. Pin it by digest (NAME@sha256:…): a tag-only
reference is accepted with a warning, since its tag may be moved.

Recording the same result again changes nothing, prints the first outcome and
exits 0 (a builder may retry). Another image for the same id, or an image
after --failed or the reverse, exits 4 and leaves the ledger untouched. An
unknown id or a malformed REF exits 2.`,
		Example: `  meshctl build record b-01JNQX6Z2V8W9X0Y1Z2A3B4C5E --image 127.0.0.1:5000/web@sha256:…
  meshctl build record b-01JNQX6Z2V8W9X0Y1Z2A3B4C5E --failed --reason "tests failed"`,
		Annotations: map[string]string{exitStatusKey: `  0    recorded (current, superseded or failed), or recorded again alike
  1    the etcd ledger (--ledger etcd://…) did not answer
  2    bad usage, an unknown id, a malformed image reference
  3    the ledger lock was not had within --lock-timeout
  4    the id was recorded before with another result or image: nothing changed`},
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.id = args[0]
			return runBuildRecord(cmd.Context(), env, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.image, "image", "", "the image the build made (NAME@sha256:DIGEST)")
	f.BoolVar(&opts.failed, "failed", false, "the build failed")
	f.StringVar(&opts.reason, "reason", "", "why it failed (with --failed)")
	return writesMetrics(cmd)
}

type buildRecordJSON struct {
	ID      string              `json:"id"`
	Module  string              `json:"module"`
	Outcome string              `json:"outcome"`
	Current *buildRecordCurrent `json:"current"`
}

type buildRecordCurrent struct {
	ID    string `json:"id"`
	Image string `json:"image"`
}

func runBuildRecord(ctx context.Context, env *Env, opts *buildRecordOptions) error {
	switch {
	case opts.failed && opts.image != "":
		return usageErrorf("give either --image or --failed, not both")
	case !opts.failed && opts.image == "":
		return usageErrorf("give --image REF for a build that succeeded, or --failed")
	case opts.reason != "" && !opts.failed:
		return usageErrorf("--reason goes with --failed")
	}
	var img *ledger.Image
	if !opts.failed {
		parsed, err := ledger.ParseImage(opts.image)
		if err != nil {
			return err
		}
		img = &parsed
	}
	l, err := openLedger(env)
	if err != nil {
		return err
	}
	res, err := l.Record(ctx, opts.id, img, opts.reason)
	if err != nil {
		return err
	}
	if img != nil && !img.Pinned {
		env.Warnf("image %s is not pinned by digest: its tag may be moved to another image; record NAME@sha256:DIGEST", img.Ref)
	}
	if res.Again {
		env.Log.Debug("build already recorded with this result; nothing changed", "id", res.Build.ID)
	}
	if env.JSON() {
		out := buildRecordJSON{ID: res.Build.ID, Module: res.Build.Module, Outcome: string(res.Outcome)}
		if c := res.Current; c != nil {
			out.Current = &buildRecordCurrent{ID: c.ID, Image: c.Image}
		}
		return env.PrintJSON(out)
	}
	env.Printf("%s %s\n", res.Build.ID, res.Outcome)
	return nil
}
