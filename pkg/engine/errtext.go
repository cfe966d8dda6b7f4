package engine

import (
	"net/url"
	"strings"

	"github.com/meshctl/meshctl/pkg/lazyre"
)

var (
	// requestRE is the Go HTTP client's `Get "URL": ` before a transport
	// error. The error is the engine's own or a registry's, passed on by the
	// engine.
	requestRE = lazyre.New(`(?:Get|Head|Post|Put|Delete|Patch) "([^"]*)": `)
	// dialRE is a dialer's detail before the reason that matters.
	dialRE = lazyre.New(`dial (?:tcp|unix|udp)\S*(?: [^:\s]*(?::\d+)?)?: (?:connect: )?`)
)

// Reason returns an engine error's text as an operator reads it in a report.
// It drops the engine's API URLs (http://%2Fvar%2Frun%2Fdocker.sock/v1.47/…)
// and the HTTP verbs. It drops the dialer's detail and "Error response from
// daemon" too. A registry is named by its host.
func Reason(msg string) string {
	msg = strings.ReplaceAll(msg, "Error response from daemon: ", "")
	msg = requestRE().ReplaceAllStringFunc(msg, func(m string) string {
		raw := requestRE().FindStringSubmatch(m)[1]
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || strings.Contains(u.Host, "%2F") || strings.HasSuffix(u.Host, ".sock") || u.Host == "docker" || u.Host == "api.moby.localhost" {
			return "" // the engine's own API: the error already names the engine
		}
		return "registry " + u.Host + ": "
	})
	return dialRE().ReplaceAllString(msg, "")
}
