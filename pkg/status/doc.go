// Package status tells what a host runs and why (CONTRACT §8). It reports
// each managed container's state, the open windows, each module's current
// build and the last apply. A host with a window open reads as working, not
// as broken.
package status
