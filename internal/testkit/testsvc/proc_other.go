//go:build !linux

package testsvc

import "os/exec"

// StartProcess starts cmd; only Linux can tie a child's life to its
// parent's (Pdeathsig), elsewhere t.Cleanup alone stops servers.
func StartProcess(cmd *exec.Cmd) error { return cmd.Start() }

// hasUserXattrs: without a probe, let versitygw use a sidecar directory.
func hasUserXattrs(dir string) bool { return false }
