package cli

import (
	"io"
	"strings"

	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/spf13/cobra"
)

// exitStatusKey is the annotation that holds a command's EXIT STATUS
// section; the usage template prints it and the man pages carry it.
const exitStatusKey = "exit-status"

// helpOf is the Examples and EXIT STATUS of a command, by command path
// without "meshctl". A command's own file may set Example itself; this
// table fills in what it leaves empty. TestEveryCommandHasHelp walks the
// command tree and fails for a command missing either.
var helpOf = map[string]struct{ example, exit string }{
	"": {
		example: `  meshctl apply -f mesh.yaml                     # CI, on every merge
  meshctl -q window run store garbage-collect    # cron: 30 3 * * *
  meshctl status
  meshctl help mesh-file                         # the file format`,
		exit: `  0 done; 2 bad usage. Each command lists its own; 'meshctl help exit-codes'
  lists them all.`,
	},
	"apply": {
		example: `  meshctl apply -f mesh.yaml
  meshctl apply -f mesh.yaml --dry-run -o json   # what would change, changing nothing
  meshctl apply -f mesh.yaml --prune             # also remove containers its modules no longer name
  meshctl apply -f web.yaml                      # converges web only: other modules stay as applied
  meshctl apply --last                           # every applied module again, without a file
  meshctl apply --remove-module old-api          # remove a whole module
  render-mesh | meshctl apply -f -               # the file from stdin`,
		exit: `  0    converged (containers held by a window are left to it: still 0)
  1    a container could not be converged, a name is taken by a container
       meshctl does not manage, or the engine refused or is unreachable
  2    bad usage, a mesh file that does not decode, an artifact: without a
       current build, a state file that cannot be read, --last with nothing
       applied, --remove-module of a module never applied
  3    the state lock was not had within --lock-timeout, or --remove-module
       names a module a live window holds
  130  interrupted, after cleaning up`,
	},
	"window": {
		example: `  meshctl window run store garbage-collect
  meshctl window list`,
		exit: `  2    no subcommand, or an unknown one; see each subcommand`,
	},
	"window run": {
		example: `  # crontab: the step comes from the last apply, -q mails only failures
  30 3 * * * meshctl -q window run store garbage-collect
  meshctl window run store garbage-collect -f mesh.yaml --timeout 2h
  meshctl window run store garbage-collect --wait 10m   # wait for another window on store`,
		exit: `  0    the step succeeded and every held container runs again
  1    the step failed or timed out, its image cannot be had, or a held
       container could not be brought back (its hold stays for the next apply)
  2    bad usage, an unknown module or step, an exec: program that is missing
  3    another window on the module is open (after --wait), or the state
       lock was not had within --lock-timeout
  130  interrupted (SIGINT, SIGTERM): the window closed first`,
	},
	"window list": {
		example: `  meshctl window list
  meshctl window list --history 0                  # only windows not yet closed
  meshctl window list -o json | jq '.windows[] | select(.state == "stale")'`,
		exit: `  0    listed
  1    the engine is unreachable (a window's liveness needs it)
  2    bad usage, a state file that cannot be read`,
	},
	"build": {
		example: `  id=$(meshctl build request store | awk '$1 == "store" {print $2}')
  meshctl build record "$id" --image registry.example/store@sha256:…
  meshctl build current store`,
		exit: `  2    no subcommand, or an unknown one; see each subcommand`,
	},
	"build request": {
		example: `  meshctl build request web
  meshctl build request web store -o json          # one plan, a build id per module
  meshctl build request api --plan p-01JNQX6Z2V8W9X0Y1Z2A3B4C5D`,
		exit: `  0    issued
  1    the etcd ledger (--ledger etcd://…) did not answer
  2    bad usage, a bad module name, an unknown plan
  3    the ledger lock was not had within --lock-timeout`,
	},
	"build record": {
		example: `  meshctl build record b-01JNQX6Z2V8W9X0Y1Z2A3B4C5E --image 127.0.0.1:5000/web@sha256:…
  meshctl build record b-01JNQX6Z2V8W9X0Y1Z2A3B4C5E --failed --reason "tests failed"`,
		exit: `  0    recorded (current, superseded or failed), or recorded again alike
  1    the etcd ledger (--ledger etcd://…) did not answer
  2    bad usage, an unknown id, a malformed image reference
  3    the ledger lock was not had within --lock-timeout
  4    the id was recorded before with another result or image: nothing changed`,
	},
	"build current": {
		example: `  meshctl build current web
  meshctl build current web -o json`,
		exit: `  0    printed
  1    the etcd ledger (--ledger etcd://…) did not answer
  2    bad usage, a bad module name, a module with no current build`,
	},
	"build list": {
		example: `  meshctl build list
  meshctl build list web -o json | jq -r '.builds[] | select(.state == "pending") | .id'`,
		exit: `  0    listed
  1    the etcd ledger (--ledger etcd://…) did not answer
  2    bad usage, a bad module name, a ledger file that cannot be read`,
	},
	"build plan": {
		example: `  meshctl build plan p-01JNQX6Z2V8W9X0Y1Z2A3B4C5D
  until meshctl build plan "$plan" | grep -q ' settled$'; do sleep 10; done`,
		exit: `  0    shown, settled or not
  1    the etcd ledger (--ledger etcd://…) did not answer
  2    bad usage, an unknown plan`,
	},
	"build export": {
		example: `  meshctl build export > ledger.jsonl
  meshctl --ledger etcd://10.0.0.1:2379,10.0.0.2:2379 build import ledger.jsonl`,
		exit: `  0    exported
  1    the etcd ledger did not answer
  2    bad usage, a ledger file that cannot be read
  3    the ledger lock was not had within --lock-timeout`,
	},
	"build import": {
		example: `  meshctl --ledger etcd://10.0.0.1:2379/meshctl build import ledger.jsonl
  meshctl build export | meshctl --ledger etcd://10.0.0.1:2379 build import -`,
		exit: `  0    imported
  1    the etcd ledger did not answer
  2    bad usage, a malformed export, a ledger that is not empty
  3    the ledger lock was not had within --lock-timeout`,
	},
	"status": {
		example: `  meshctl status
  meshctl status -o json | jq '.containers[] | select(.state != "running")'
  */5 * * * * meshctl status --check -q          # cron mails only problems
  meshctl status --check || page-oncall          # a Nagios-style check`,
		exit: `  0    shown, whatever the containers' states (--check: no problem)
  1    the engine is unreachable; --check: a problem needs a person (one
       line each on stdout)
  2    bad usage, a state file that cannot be read`,
	},
	"version": {
		example: `  meshctl version
  meshctl --version
  meshctl version -o json`,
		exit: `  0    printed; 2 bad usage`,
	},
	"completion": {
		example: `  meshctl completion bash > /etc/bash_completion.d/meshctl
  meshctl completion zsh > "${fpath[1]}/_meshctl"`,
		exit: `  0    printed; 2 bad usage or an unknown shell`,
	},
	"completion bash": {
		example: `  source <(meshctl completion bash)
  meshctl completion bash > /etc/bash_completion.d/meshctl`,
		exit: `  0    printed; 2 bad usage`,
	},
	"completion zsh": {
		example: `  meshctl completion zsh > "${fpath[1]}/_meshctl"`,
		exit:    `  0    printed; 2 bad usage`,
	},
	"completion fish": {
		example: `  meshctl completion fish > ~/.config/fish/completions/meshctl.fish`,
		exit:    `  0    printed; 2 bad usage`,
	},
	"completion powershell": {
		example: `  meshctl completion powershell | Out-String | Invoke-Expression`,
		exit:    `  0    printed; 2 bad usage`,
	},
	"help": {
		example: `  meshctl help window run
  meshctl help mesh-file
  meshctl help exit-codes`,
		exit: `  0    printed; 2 an unknown command or topic`,
	},
}

// addHelp fills in each command's Example and EXIT STATUS from helpOf, and
// makes the usage template print the EXIT STATUS section.
func addHelp(root *cobra.Command) {
	tmpl := root.UsageTemplate()
	section := "{{with index .Annotations \"" + exitStatusKey + "\"}}\n\nEXIT STATUS:\n{{.}}{{end}}"
	// Before cobra's closing "Use ... for more information" line.
	if i := strings.LastIndex(tmpl, `{{if .HasAvailableSubCommands}}`); i >= 0 && strings.Contains(tmpl[i:], `Use "`) {
		tmpl = tmpl[:i] + section + tmpl[i:]
	} else {
		tmpl = strings.TrimSuffix(tmpl, "\n") + section + "\n"
	}
	root.SetUsageTemplate(tmpl)
	walk(root, func(c *cobra.Command) {
		h, ok := helpOf[strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), root.Name()), " ")]
		if !ok {
			return
		}
		if c.Example == "" {
			c.Example = h.example
		}
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		if c.Annotations[exitStatusKey] == "" {
			c.Annotations[exitStatusKey] = h.exit
		}
	})
}

// walk calls fn for c and each command under it.
func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

// ExitStatus returns the EXIT STATUS section of a command's help, "" if it
// has none.
func ExitStatus(c *cobra.Command) string { return c.Annotations[exitStatusKey] }

// Command returns meshctl's command tree with its help and completion as a
// real invocation has them, writing to out: for generating man pages and
// for tests. Running it is not meant.
func Command(out io.Writer) *cobra.Command {
	return newRootCmd(NewEnv(strings.NewReader(""), out, out))
}

// newMeshFileTopic is "meshctl help mesh-file": the file format.
func newMeshFileTopic() *cobra.Command {
	return &cobra.Command{
		Use:   "mesh-file",
		Short: "The mesh file: modules, containers, steps (meshctl apply -f FILE)",
		Long:  meshFileHelp,
	}
}

// meshFileHelp is the mesh file format, field by field. Every field of
// pkg/mesh is named here (TestMeshFileTopicNamesEveryField); docs/mesh-file.md
// says the same at more length.
const meshFileHelp = `The mesh file is the desired state of one host, in YAML or JSON (apply -f FILE,
or -f - for stdin). Decoding is strict: an unknown field, a wrong type, a
duplicate key, a bad name, an unknown container in while-stopped, or a file over
4 MiB is refused (exit 2) naming the file, line and field; nothing is touched.
Names of modules, containers and steps match ^[a-z0-9][a-z0-9-]{0,62}$.

  modules:
    store:                            # a module
      containers:
        registry:                     # the engine's name is "store.registry"
          image: meshtest/registry:1
      steps:
        garbage-collect:
          while-stopped: [registry]
          run:
            command: [garbage-collect, /etc/docker/registry/config.yml]

modules.M.containers.C (a container) — give image or artifact, not both:
  image        image reference: meshtest/busybox:1, 127.0.0.1:5000/x/y:2, x@sha256:…
  artifact     a module name: the image of that module's current build
               (meshctl build current M)
  entrypoint   argv replacing the image's; [] clears it; default: the image's
  command      argv; default: the image's
  env          map of variables; default: none
  volumes      ["NAME:/path[:ro|rw]", "/host/path:/path[:ro|rw]"]; named volumes
               are never removed by meshctl; default: none
  network      host | none | bridge | a network name; default: the engine's
  ports        ["[IP:]HOST:CONTAINER[/tcp|udp|sctp]"] or ["CONTAINER"]; default: none
  restart      no | always | unless-stopped | on-failure; default unless-stopped
  labels       map; keys under io.meshctl. are meshctl's own; default: none
  pull         missing (pull when the engine lacks it) | always (pull on every
               apply, recreate when the tag moved) | never; default missing
  env-file     path or list of paths of KEY=VALUE files, read at apply time,
               relative to the mesh file; env wins over them; default: none

  More container fields, with Compose's meaning (each optional):
  healthcheck        the probe a new container must pass before it replaces
                     the old one; default: the image's
    test               [CMD, prog, args…], [CMD-SHELL, "command"], [NONE], or a
                       string (a CMD-SHELL command)
    interval           default 30s
    timeout            default 30s
    retries            default 3
    start-period       default 0s
    disable            true turns off the image's healthcheck
  depends-on         [NAME (this module) | MODULE.NAME]: converged, and healthy,
                     before this one
  stop-signal        default SIGTERM (or the image's)
  stop-grace-period  how long a stop waits before SIGKILL; default 10s
  user               NAME, UID, NAME:GROUP or UID:GID; default: the image's
  working-dir        absolute path; default: the image's
  hostname           default: the engine's
  init               true runs an init as PID 1; default false
  read-only          true makes the root filesystem read-only; default false
  tmpfs              ["/path", "/path:size=64m,mode=1777"]
  cap-add            [NET_ADMIN, …]
  cap-drop           [ALL, …]
  memory             limit, e.g. 512m or 2g (at least 6m); default: none
  cpus               e.g. 0.5 or 2; default: no limit
  pids-limit         a positive number, or -1 for none; default: the engine's
  logging            log driver and its options; default: the engine's
    driver             e.g. json-file
    options            map, e.g. {max-size: 10m}
  extra-hosts        ["host:ip"] lines added to /etc/hosts

modules.M.steps.S (a maintenance step, run by meshctl window run M S) — give
run or exec, not both:
  while-stopped  containers of this module held stopped during the step;
                 default: none
  timeout        e.g. 90s, 30m, 2h; the step is killed past it and the window
                 still closes; default 1h (window run --timeout overrides it)
  run            a one-off container, meshctl-window.M.S, removed afterwards:
    image          default: the first held container's image
    entrypoint     argv; [] clears the image's; default: the image's
    command        argv; default: the image's
    env            map; default: none
    volumes        as a container's; default: none
    volumes-from   containers of this module whose volumes it mounts;
                   default: the held containers
    network        default none
  exec           argv run on the host (exec'd as it is, never through a shell),
                 in its own process group, killed whole with its window; its
                 environment is only PATH=/usr/local/sbin:/usr/local/bin:
                 /usr/sbin:/usr/bin:/sbin:/bin and HOME, LANG, LC_ALL, TZ as
                 meshctl has them (never MESHCTL_*): declare what it needs in
                 the argv, [env, K=V, /usr/local/bin/gc.sh]

A YAML number or boolean where a string is expected is read as that string
(command: [sleep, 60]). See docs/mesh-file.md for every field with an example.`

// nearTopic is the help topic of cmd (exit-codes, mesh-file) that word
// looks like a typo of, "" if none: cobra's suggestions leave topics out.
// A topic word begins is taken first; else the nearest (mesh.Suggest).
func nearTopic(cmd *cobra.Command, word string) string {
	var topics []string
	for _, c := range cmd.Commands() {
		if !c.IsAdditionalHelpTopicCommand() {
			continue
		}
		if strings.HasPrefix(c.Name(), word) {
			return c.Name()
		}
		topics = append(topics, c.Name())
	}
	return mesh.Suggest(word, topics)
}
