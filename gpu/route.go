package gpu

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrWrongPlatform is wrapped by CheckPlatform's error: the task was meant
// for another platform and must be handed back, not failed.
var ErrWrongPlatform = errors.New("task is for another platform")

// PlatformError is CheckPlatform's error.
type PlatformError struct {
	Task   string   // the platform key or class the task asked for
	Worker []string // the platform keys of this worker
	Class  string   // the class of this worker
}

func (e *PlatformError) Error() string {
	return fmt.Sprintf("gpu: task is for platform %q but this worker is %s (class %s); hand it back to its queue",
		e.Task, strings.Join(e.Worker, ", "), e.Class)
}

// Unwrap makes errors.Is(err, ErrWrongPlatform) true.
func (e *PlatformError) Unwrap() error { return ErrWrongPlatform }

// Queues are the queues a worker serves: override when given (trimmed,
// without empty or repeated names), else the worker's class ("cpu" for a
// CPU-only worker, "gpu.h100" for an H100 worker).
func Queues(fp Fingerprint, override []string) []string {
	var out []string
	for _, q := range override {
		q = strings.TrimSpace(q)
		if q != "" && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	if len(out) > 0 {
		return out
	}
	return []string{fp.Class()}
}

// CheckPlatform refuses a task meant for another platform. taskPlatform is
// either a platform key ("gpu-nvidia-h100-...", "cpu-...": it must be one of
// this worker's keys) or a class ("gpu.h100", "cpu": it must be this
// worker's class); "" means any platform of the queue and is accepted. The
// error wraps ErrWrongPlatform.
func CheckPlatform(taskPlatform string, fp Fingerprint) error {
	if taskPlatform == "" {
		return nil
	}
	keys := fp.Keys()
	if isPlatformKey(taskPlatform) {
		if slices.Contains(keys, taskPlatform) {
			return nil
		}
	} else if taskPlatform == fp.Class() {
		return nil
	}
	return &PlatformError{Task: taskPlatform, Worker: keys, Class: fp.Class()}
}

// isPlatformKey tells a platform key from a class: keys start with "gpu-"
// or "cpu-", classes are "cpu" or "gpu.<model>".
func isPlatformKey(s string) bool {
	return strings.HasPrefix(s, KindGPU+"-") || strings.HasPrefix(s, KindCPU+"-")
}

// VisibleDevices is the environment that pins a child process (trtexec) to
// GPU i of the fingerprint, which it then sees as device 0
// (trtexec --device=0): CUDA_VISIBLE_DEVICES=<UUID>. Without a UUID it uses
// the NVML index and sets CUDA_DEVICE_ORDER=PCI_BUS_ID, because CUDA's
// default order differs from NVML's. For a CPU fingerprint, or an i that
// is not a GPU of this machine, it hides every GPU (CUDA_VISIBLE_DEVICES=
// empty), so a mistake fails instead of running on the wrong GPU.
func (f Fingerprint) VisibleDevices(i int) []string {
	if f.Kind != KindGPU || i < 0 || i >= len(f.GPUs) {
		return []string{"CUDA_VISIBLE_DEVICES="}
	}
	g := f.GPUs[i]
	if g.UUID != "" {
		return []string{"CUDA_VISIBLE_DEVICES=" + g.UUID}
	}
	return []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=" + strconv.Itoa(g.Index)}
}
