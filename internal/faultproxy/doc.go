// Package faultproxy is test support, a proxy in front of a Docker engine's
// unix socket. By a seeded schedule, it fails, delays, hangs or drops the
// answer of the API calls meshctl makes. So tests can walk the paths a real
// engine takes only on a bad day.
//
// meshctl is pointed at it with --docker-host unix://SOCKET (Proxy.Host). A
// rule matches calls by method and by route. The route is the path with the
// API version stripped and ids replaced, as Route does. A rule may also match
// by ordinal among the calls it matches. Streaming answers are forwarded as
// they come, such as logs, wait, events and pull progress. Upgraded
// (hijacked) connections pass through untouched.
package faultproxy
