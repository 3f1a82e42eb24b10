package testsvc

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// StartProcess starts cmd (a server, a worker process) with Pdeathsig, so
// the kernel kills it when the test binary dies without running its
// cleanups (a panic, a timeout, ^C) and nothing outlives its test run.
// cmd's other SysProcAttr settings (e.g. Setpgid) are kept.
//
// Pdeathsig fires when the *thread* that forked exits, not the process, and
// the Go runtime may end a thread (one a goroutine locked and did not
// unlock). So every start happens on one thread that is locked for the life
// of the process and never exits.
func StartProcess(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	errc := make(chan error)
	starter() <- func() { errc <- cmd.Start() }
	return <-errc
}

var starter = sync.OnceValue(func() chan<- func() {
	ch := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: this thread must live on
		for f := range ch {
			f()
		}
	}()
	return ch
})

// hasUserXattrs says whether dir's file system stores user extended
// attributes, which versitygw's posix backend needs unless given a sidecar.
func hasUserXattrs(dir string) bool {
	const name = "user.tunefleet.probe"
	if err := syscall.Setxattr(dir, name, []byte("1"), 0); err != nil {
		return false
	}
	syscall.Removexattr(dir, name)
	return true
}
