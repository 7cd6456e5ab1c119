//go:build !race

package documents

// raceBuild is set in a build with the race detector (see race_on.go).
const raceBuild = false
