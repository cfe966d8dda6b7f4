// Package enginetest gives tests a client of the test engine. That is a
// private Docker engine named by MESHCTL_TEST_DOCKER_HOST (scripts/engine.sh
// start), never the host's default one.
package enginetest
