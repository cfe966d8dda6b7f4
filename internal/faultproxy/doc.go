// Package faultproxy is test support: a proxy in front of a Docker engine's
// unix socket that, by a seeded schedule, fails, delays, hangs or drops the
// answer of the API calls meshctl makes, so that tests can walk the paths a
// real engine takes only on a bad day.
//
// meshctl is pointed at it with --docker-host unix://SOCKET (Proxy.Host).
// Calls are matched by method and by route (the path with the API version
// stripped and ids replaced, as Route does) and by ordinal among the calls
// a rule matches. Streaming answers (logs, wait, events, pull progress) are
// forwarded as they come, and upgraded (hijacked) connections pass through
// untouched.
package faultproxy
