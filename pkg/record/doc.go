// Package record is the record an apply leaves in the state directory:
// applied.json, the desired state of the last apply per module (Applied,
// Merge), with the image and build each artifact: resolved to (Resolved),
// and last-apply.json, the last apply's report (LastReport, Report).
//
// Desire resolves a mesh file into desired containers; a window's close
// and status take the applied state's desired containers from here
// (Applied.Desired), so they use the images that apply resolved.
package record
