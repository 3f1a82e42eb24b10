package trt

import "syscall"

// sysProcAttr puts trtexec in a process group of its own, so that one kill
// reaches its helpers, and has the kernel kill it if the worker dies, so an
// orphaned build does not hold the GPU.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
