//go:build race

package documents

// raceBuild is set in a build with the race detector, whose shadow memory
// cannot be reserved under an address-space limit: its children run
// without one (their time and CPU limits hold).
const raceBuild = true
