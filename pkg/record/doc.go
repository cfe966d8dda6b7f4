// Package record is the record an apply leaves in the state directory. One
// file is applied.json, the desired state of the last apply per module
// (Applied, Merge). It holds the image and build each `artifact:` resolved to
// (Resolved). The other is last-apply.json, the last apply's report
// (LastReport, Report).
//
// Desire resolves a mesh file into desired containers. A window's close and
// status take the applied state's desired containers from here
// (Applied.Desired). So they use the images that apply resolved.
package record
