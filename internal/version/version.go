package version

import (
	"runtime"
	"runtime/debug"
)

// Version is the release; development builds append the VCS revision.
const Version = "0.1.0-dev"

// String is the version with the VCS revision when the build recorded one.
func String() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return Version + "+" + s.Value[:12]
			}
		}
	}
	return Version
}

// Go is the Go version the binary was built with.
func Go() string { return runtime.Version() }
