package cli

import (
	"io"
	"strings"

	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/spf13/cobra"
)

// exitStatusKey is the annotation that holds a command's EXIT STATUS
// section. The usage template prints it and the man pages carry it.
const exitStatusKey = "exit-status"

// addHelp makes the usage template print the EXIT STATUS section, which
// each command's own file sets (Annotations[exitStatusKey]) beside its
// Examples.
func addHelp(root *cobra.Command) {
	tmpl := root.UsageTemplate()
	section := "{{with index .Annotations \"" + exitStatusKey + "\"}}\n\nEXIT STATUS:\n{{.}}{{end}}"
	// Before cobra's closing "Use ... for more information" line.
	if i := strings.LastIndex(tmpl, `{{if .HasAvailableSubCommands}}`); i >= 0 && strings.Contains(tmpl[i:], `Use "`) {
		tmpl = tmpl[:i] + section + tmpl[i:]
	} else {
		tmpl = strings.TrimSuffix(tmpl, "\n") + section + "\n"
	}
	// Help topics are read with "meshctl help TOPIC". Cobra lists them by
	// a command path padded to the commands' widest, with no gap.
	tmpl = strings.Replace(tmpl, `{{rpad .CommandPath .CommandPathPadding}} {{.Short}}`,
		`{{rpad (print .Root.Name " help " .Name) 24}}  {{.Short}}`, 1)
	root.SetUsageTemplate(tmpl)
}

// ExitStatus returns the EXIT STATUS section of a command's help, "" if it
// has none.
func ExitStatus(c *cobra.Command) string { return c.Annotations[exitStatusKey] }

// Command returns meshctl's command tree with its help and completion as a
// real invocation has them, writing to out. It is for generating man pages
// and for tests. Running it is not meant.
func Command(out io.Writer) *cobra.Command {
	return newRootCmd(NewEnv(strings.NewReader(""), out, out))
}

// newMeshFileTopic is "meshctl help mesh-file", the file format.
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
duplicate key, a bad name, an unknown container in while-stopped, a file over
2 MiB or of more than 262,144 values (aliases repeating 65,536 at most), or a
-f FILE that is not a regular file (give a pipe as -f -) is refused (exit 2)
naming the file, line and field, every error at once (up to 10); nothing is
touched. No error quotes a value of env or of an env-file: it names the key,
file and line.
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
  env          map of variables (or Compose's list of KEY=value); values hold
               no control character but tab and newline; default: none
  volumes      ["NAME:/path[:ro|rw]", "/host/path:/path[:ro|rw]"]; named volumes
               are never removed by meshctl; default: none
  network      host | none | bridge | a network name; default: the engine's
  networks     module networks it joins: a list of names, or a map NAME:
               {aliases: [...]}; NAME is this module's network, OTHER/NET
               another module's (or an external one declared here); on each
               it answers to its name (C), MODULE.C and its aliases, through
               the engine's DNS; not with network:; default: none
  update-order stop-first | start-first: how a recreate replaces it while it
               runs; start-first starts the new one beside the old (on its
               networks), and only once it is healthy does it take the
               aliases and the old one leave, drain, stop and go; it needs networks:, no
               ports and no writable volume; default: the module's, else
               stop-first
  drain        how long start-first leaves the old one running once it has
               left the aliases; default: its stop-grace-period; at least 2s
  ports        ["[IP:]HOST:CONTAINER[/tcp|udp|sctp]"] or ["CONTAINER"]; default: none
  restart      no | always | unless-stopped | on-failure; default unless-stopped
  labels       map; keys under io.meshctl. are meshctl's own; default: none
  pull         missing (pull when the engine lacks it) | always (pull on every
               apply, recreate when the tag moved) | never; default missing
  env-file     path or list of paths of KEY=VALUE files, read at apply time,
               relative to the mesh file; env wins over them; each a regular
               file of at most 1 MiB, no control character but tab in its
               values; default: none

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
  expose             ports offered to others on the container's network, not
                     published: ["80", "53/udp", "9000-9002"]
  sysctls            map of kernel parameters, e.g. {net.core.somaxconn: 1024}
  ulimits            map of limits: {nofile: {soft: 1024, hard: 4096}, nproc: 512}
  privileged         true gives the container every capability and device;
                     default false
  stdin-open         true keeps stdin open; default false
  tty                true gives the container a terminal; default false
  dns                [IP, …] name servers, asked in order; default: the engine's
  secrets            host files mounted read-only, Compose's secrets without
                     Swarm: [{name: db_pw, file: db_pw.txt}] is seen at
                     /run/secrets/db_pw; each item:
    name               default: the file's base name
    file               the host file, relative to the mesh file; read at apply
                       time (a regular file of at most 1 MiB), never printed or
                       stored: the recorded spec holds its HMAC-SHA256, keyed
                       with the host's secret key, and a new content recreates
                       the container; a file other users can read is warned
                       about; a missing one is exit 2
    target             where the container sees it: an absolute path, or one
                       under /run/secrets; default /run/secrets/NAME
  configs            as secrets (name, file, target), seen at /NAME by
                     default; target must be absolute

modules.M.update-order (stop-first | start-first) is its containers' default.
modules.M.max-unavailable (a whole number, at least 1) is how many hosts of the
mesh may have the module down at once: a stop-first recreate of a running
container, or a network replace, takes the host's slot first (in etcd: it needs
--ledger etcd://…; with the file ledger the apply exits 2); start-first,
creates, repairs and removals take none. The smallest value published holds.

modules.M.networks.N (a module network; none unless declared) — apply creates it
(engine name meshctl.M.N, labelled as this state directory's) before the
containers that join it, and removes it with its module (--remove-module; --prune
removes one its module no longer declares), never while any container is
attached (it is kept, with a warning) and never one it did not create:
  internal     true: its containers reach only each other; default false
               (a change makes the network again, its containers stopped
               meanwhile, then recreates them)
  external     the engine name of an existing network to join instead;
               meshctl never creates or removes it

modules.M.steps.S (a maintenance step, run by meshctl window run M S) — give
run or exec, not both:
  while-stopped  containers of this module held stopped during the step;
                 default: none
  while-changed  containers of this module held running changed during the
                 step, each mapped to its change; default: none. The changed
                 one runs under the name; the normal one waits aside, stopped,
                 as NAME.meshctl-held, and comes back at the close. A change
                 changes how a container runs, not what it is:
    env            map; wins over the container's env and env-file
    entrypoint     argv; [] clears the image's
    command        argv
    healthcheck    as a container's; the changed one's gate
  timeout        e.g. 90s, 30m, 2h; the step is killed past it and the window
                 still closes; default 1h (window run --timeout overrides it)
  stall-after    e.g. 30m; status --check reports the running step once it
                 has printed nothing for that long; default: never
  mesh           host (the default): the window holds this host only; all:
                 a mesh window, held on every host that runs the module, the
                 step run once, by the first host to join; hosts hold only
                 once all have joined; needs --ledger etcd://… (with the file
                 ledger an apply of the file exits 2)
  gather         only with mesh: all: how long the hosts wait for each other,
                 from the first join, counted by etcd; at least 1s; default 5m
  run            a one-off container, meshctl-window.M.S, removed afterwards:
    image          default: the image of the first of while-stopped, else
                   of while-changed (by name)
    entrypoint     argv; [] clears the image's; default: the image's
    command        argv; default: the image's
    env            map; default: none
    volumes        as a container's; default: none
    volumes-from   containers of this module whose volumes it mounts;
                   default: the while-stopped ones, else the first of
                   while-changed (by name)
    network        default none
  exec           argv run on the host (exec'd as it is, never through a shell),
                 in its own process group, killed whole with its window; its
                 environment is only PATH=/usr/local/sbin:/usr/local/bin:
                 /usr/sbin:/usr/bin:/sbin:/bin and HOME, LANG, LC_ALL, TZ as
                 meshctl has them (never MESHCTL_*): declare what it needs in
                 the argv, [env, K=V, /usr/local/bin/gc.sh]

A YAML number or boolean where a string is expected is read as that string
(command: [sleep, 60]). See docs/mesh-file.md for every field with an example.`

// nearTopic is the help topic of cmd that word looks like a typo of, or ""
// if none. The topics are exit-codes and mesh-file. Cobra's suggestions
// leave topics out. A topic that word begins is taken first, else the
// nearest (mesh.Suggest).
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
