//go:build unix && !linux

package trt

import "syscall"

// sysProcAttr puts trtexec in a process group of its own, so that one kill
// reaches its helpers. (Only Linux can also tie its life to the worker's.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
