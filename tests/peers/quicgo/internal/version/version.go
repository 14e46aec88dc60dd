// Package version names the quic-go module a program was built with, from its build
// information, so a benchmark report says which quic-go it measured.
package version

import (
	"runtime"
	"runtime/debug"
)

// String is "quic-go vX.Y.Z (goX.Y.Z)".
func String() string {
	v := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/quic-go/quic-go" {
				v = dep.Version
				if dep.Replace != nil {
					v += " => " + dep.Replace.Path + " " + dep.Replace.Version
				}
			}
		}
	}
	return "quic-go " + v + " (" + runtime.Version() + ")"
}
