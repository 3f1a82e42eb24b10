package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/trt"
)

// backendOptions say where the backends' tools are and what they share.
type backendOptions struct {
	ortLib   string
	trtexec  string          // trtexec executable; "" = on PATH
	platform string          // platform key: scopes TensorRT timing caches
	store    artifacts.Store // where timing caches are shared; nil = none
	onBroken func(error)     // the machine cannot build anymore
	// telemetry watches the GPU during TensorRT benchmarks (nil: none).
	telemetry func(ctx context.Context, env []string) (func() (string, []string), error)
}

// Backends returns the backends this build of tunefleet offers, for
// validating candidates and for local tuning.
func Backends(ortLib string) backend.Registry {
	return newBackends(backendOptions{ortLib: ortLib})
}

func newBackends(o backendOptions) backend.Registry {
	to := trt.Options{Executable: o.trtexec, Platform: o.platform, OnBrokenWorker: o.onBroken, Telemetry: o.telemetry}
	if o.store != nil && o.platform != "" {
		to.TimingCache = storeCache{o.store}
	}
	return backend.Registry{
		"ort": ort.New(ort.Options{Library: o.ortLib}),
		"trt": trt.New(to),
	}
}

// storeCache shares TensorRT timing caches through the artifact store,
// under timing-caches/<platform>/<name>: never across platforms.
type storeCache struct{ s artifacts.Store }

func (c storeCache) Fetch(ctx context.Context, platform, name, dest string) error {
	err := artifacts.DownloadFile(ctx, c.s, artifacts.TimingCacheKey(platform, name), dest)
	if errors.Is(err, artifacts.ErrNotExist) {
		return fmt.Errorf("timing cache %s/%s: %w", platform, name, fs.ErrNotExist)
	}
	return err
}

func (c storeCache) Store(ctx context.Context, platform, name, path string) error {
	return artifacts.UploadFile(ctx, c.s, artifacts.TimingCacheKey(platform, name), path)
}

// tensorRTVersion reports the TensorRT version of the trtexec this machine
// would run ("" when there is none), for its platform key.
func tensorRTVersion(ctx context.Context, exe string) (string, string) {
	if exe == "" {
		exe = trt.DefaultExecutable
	}
	if filepath.Base(exe) == exe {
		p, err := exec.LookPath(exe)
		if err != nil {
			return "", ""
		}
		exe = p
	}
	v, err := trt.DetectVersion(ctx, exe)
	if err != nil {
		return "", ""
	}
	build := ""
	if v.Build != 0 {
		build = fmt.Sprint(v.Build)
	}
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch), build
}
