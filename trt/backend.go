package trt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

// TimingCache shares TensorRT timing caches between builds. A cache is only
// valid for one TensorRT build, GPU SKU, CUDA and TF32 setting (§4.4), so it
// is addressed by platform key and name, and a cache is never fetched for
// a platform other than the one it was stored for; the bucket layout's
// timing-caches/<platform>/<name> is the natural home.
type TimingCache interface {
	// Fetch writes the cache to dest. An error satisfying
	// errors.Is(err, fs.ErrNotExist) means there is none yet.
	Fetch(ctx context.Context, platform, name, dest string) error
	// Store uploads the cache file at path, replacing the stored one.
	Store(ctx context.Context, platform, name, path string) error
}

// Options configure the backend.
type Options struct {
	// Executable is trtexec; empty means "trtexec" on PATH.
	Executable string
	// Platform is this worker's platform key (GPU SKU + compute capability
	// + TensorRT version/build + driver major, from the gpu package).
	// Timing caches are used only when it is set.
	Platform string
	// TimingCache shares caches, e.g. through the artifact store. When nil
	// and TimingCacheDir is set, caches are kept in that local directory.
	TimingCache    TimingCache
	TimingCacheDir string
	// Env is added to trtexec's environment, e.g.
	// CUDA_VISIBLE_DEVICES=GPU-<uuid> to pin it to one GPU.
	Env []string
	// Verbose adds --verbose to every trtexec run (logs of hundreds of KB).
	Verbose bool
	// OnBrokenWorker, if set, is called once when a trtexec failure says the
	// worker itself is broken (no GPU, driver or CUDA failure, libraries
	// missing): the worker should stop taking work.
	OnBrokenWorker func(error)
	// Telemetry, if set, watches the device while a benchmark runs: it
	// starts monitoring for the task's environment (which pins the GPU)
	// and returns a stop function giving a verdict ("ok", "rerun" when the
	// GPU throttled, "reject" when it reported errors) and the problems
	// seen. A rerun is measured again up to TelemetryReruns times (default
	// 2); a reject fails the benchmark as an infrastructure problem.
	Telemetry       func(ctx context.Context, env []string) (func() (string, []string), error)
	TelemetryReruns int
}

// Backend is the TensorRT backend. It is safe for concurrent use.
type Backend struct {
	opts Options

	mu       sync.Mutex
	version  Version
	detected bool
	broken   error
}

// New returns the backend. It runs nothing: the TensorRT version is
// detected by the first build.
func New(opts Options) *Backend { return &Backend{opts: opts} }

// Name is "trt".
func (b *Backend) Name() string { return "trt" }

// Validate parses the candidate. Whether the worker's TensorRT can express
// it is only known at build time.
func (b *Backend) Validate(c backend.Candidate) error {
	_, err := ParseConfig(c)
	return err
}

// Broken returns the first failure that showed this worker to be broken,
// or nil.
func (b *Backend) Broken() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.broken
}

func (b *Backend) markBroken(err error) {
	b.mu.Lock()
	first := b.broken == nil
	if first {
		b.broken = err
	}
	b.mu.Unlock()
	if first && b.opts.OnBrokenWorker != nil {
		b.opts.OnBrokenWorker(err)
	}
}

// unavailable fails a trt: candidate because this worker cannot run any
// (no trtexec, no loadable or no supported TensorRT): a candidate failure
// of class unavailable, never a broken worker. Only a real trtexec run whose
// classification says the machine is broken (no GPU, driver or CUDA
// failure) marks the worker broken (fail).
func (b *Backend) unavailable(kind, reason string, evidence ...string) error {
	return b.fail("build", &Error{Stage: StageVersion, Exit: ExitStatus{Code: -1, Unknown: true}, Classification: Classification{
		Class: backend.FailUnavailable, Kind: kind, Reason: reason, Evidence: evidence,
	}})
}

// fail wraps a trtexec Error as a backend failure of its class and notes a
// broken worker.
func (b *Backend) fail(op string, e *Error) error {
	f := backend.Fail(e.Classification.Class, op, e)
	if e.Classification.BrokenWorker {
		b.markBroken(f)
	}
	return f
}

// Version detects the TensorRT version of the configured trtexec once and
// remembers it.
func (b *Backend) Version(ctx context.Context) (Version, error) {
	b.mu.Lock()
	if b.detected {
		v := b.version
		b.mu.Unlock()
		return v, nil
	}
	b.mu.Unlock()
	exe := b.exe()
	if _, err := exec.LookPath(exe); err != nil {
		return Version{}, b.unavailable(KindLibraryMissing, fmt.Sprintf("trtexec executable %q not found (install TensorRT or configure the path of trtexec)", exe))
	}
	v, c, err := detectVersion(ctx, exe, b.opts.Env)
	if err != nil {
		if c != nil && c.Kind == KindCancelled {
			// The task ended while asking: nobody's fault, try again.
			c.Reason = err.Error()
			return Version{}, b.fail("build", &Error{Stage: StageVersion, Exit: ExitStatus{Code: -1, Unknown: true}, Classification: *c})
		}
		kind, evidence := KindNoResult, []string(nil)
		if c != nil {
			kind, evidence = c.Kind, c.Evidence
		}
		// `trtexec --help` needs no GPU, only TensorRT's libraries: when it
		// fails, TensorRT is not usable here, which says nothing about the
		// machine's GPUs or about this worker's other candidates.
		return Version{}, b.unavailable(kind, err.Error(), evidence...)
	}
	if err := supportedVersion(v); err != nil {
		// The machine's TensorRT, not the candidate, and not a broken
		// machine either: trt: candidates cannot run on this platform.
		return Version{}, b.unavailable(KindVersion, err.Error()+" (install a supported TensorRT on this worker)")
	}
	b.mu.Lock()
	b.version, b.detected = v, true
	b.mu.Unlock()
	return v, nil
}

func (b *Backend) exe() string {
	if b.opts.Executable != "" {
		return b.opts.Executable
	}
	return DefaultExecutable
}

// Files in a build's work directory. trtexec runs there and is given
// paths relative to it, so the work directory's own path may contain
// anything.
const (
	EngineFile      = "model.plan"
	BuildLogFile    = "build.log"
	LayerInfoFile   = "layers.json"
	timingCacheFile = "cache/timing.cache" // a private copy; never an artifact
)

// Artifact roles besides "engine" and "log".
const (
	RoleLayers       = "layers"
	RoleBenchmarkLog = "benchmark-log"
	RoleRunLog       = "run-log"
)

// TimingCacheName names the timing cache a build of v with cfg can share:
// one per TensorRT build and TF32 setting (the builder flag that changes
// layer implementations, §4.4); the platform key separates GPUs.
func TimingCacheName(v Version, cfg Config) string {
	tf32 := "tf32"
	if cfg.NoTF32 {
		tf32 = "notf32"
	}
	return fmt.Sprintf("trtexec-%s-%s.cache", v, tf32)
}

func (b *Backend) cache() TimingCache {
	switch {
	case b.opts.Platform == "":
		return nil
	case b.opts.TimingCache != nil:
		return b.opts.TimingCache
	case b.opts.TimingCacheDir != "":
		return DirCache{Dir: b.opts.TimingCacheDir}
	}
	return nil
}

// Build builds an engine with trtexec: detect the version, check the
// candidate against it, fetch the platform's timing cache, run the build,
// classify a failure, store the grown cache.
func (b *Backend) Build(ctx context.Context, req backend.BuildRequest) (backend.Engine, error) {
	cfg, err := ParseConfig(req.Candidate)
	if err != nil {
		return nil, backend.Fail(backend.FailBuild, "build", err)
	}
	if err := os.MkdirAll(req.WorkDir, 0o755); err != nil {
		return nil, backend.Fail(backend.FailInfrastructure, "build", err)
	}
	v, err := b.Version(ctx)
	if err != nil {
		return nil, err
	}
	if err := cfg.Supported(v); err != nil {
		return nil, backend.Fail(backend.FailBuild, "build", err)
	}
	spec := BuildSpec{ONNX: req.ONNXPath, Engine: EngineFile, Profiles: profilesOf(req), LayerInfo: LayerInfoFile, Verbose: b.opts.Verbose}
	if cfg.Calib != "" {
		p := cfg.Calib
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(req.ONNXPath), p)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, backend.Fail(backend.FailBuild, "build", fmt.Errorf("INT8 calibration cache: %w", err))
		}
		spec.Calib = p
	}
	info := map[string]string{"trt_version": v.String(), "config": cfg.String()}
	if b.opts.Platform != "" {
		info["platform"] = b.opts.Platform
	}
	tc := b.cache()
	cacheName := TimingCacheName(v, cfg)
	cachePath := filepath.Join(req.WorkDir, filepath.FromSlash(timingCacheFile))
	info["timing_cache"] = "off"
	if tc != nil {
		if err := os.MkdirAll(filepath.Dir(cachePath), 0o755); err != nil {
			info["timing_cache"] = "off: " + err.Error()
			tc = nil
		} else {
			spec.TimingCache = timingCacheFile
			info["timing_cache"] = b.fetchCache(ctx, tc, cacheName, cachePath)
		}
	}
	args, err := BuildArgs(v, cfg, spec)
	if err != nil {
		return nil, backend.Fail(backend.FailBuild, "build", err)
	}
	l, err := b.invoke(ctx, StageBuild, "build", req.WorkDir, BuildLogFile, args, req.Env)
	if err != nil {
		return nil, err
	}
	enginePath := filepath.Join(req.WorkDir, EngineFile)
	if st, err := os.Stat(enginePath); err != nil || st.Size() == 0 {
		return nil, backend.Failf(backend.FailInfrastructure, "build", "trtexec PASSED but wrote no engine file %s (log: %s)", EngineFile, BuildLogFile)
	}
	if pv, ok := planVersion(enginePath); ok {
		info["plan_version"] = pv
	}
	if tc != nil {
		if err := tc.Store(ctx, b.opts.Platform, cacheName, cachePath); err != nil {
			info["timing_cache_store"] = "failed: " + err.Error()
		} else {
			info["timing_cache_store"] = "ok"
		}
	}
	addLogInfo(info, l)
	e := &Engine{b: b, v: v, cfg: cfg, dir: req.WorkDir, env: req.Env, buildLog: l, info: info}
	e.artifacts = []backend.Artifact{{Role: "engine", Path: enginePath}, {Role: "log", Path: filepath.Join(req.WorkDir, BuildLogFile)}}
	if _, err := os.Stat(filepath.Join(req.WorkDir, LayerInfoFile)); err == nil {
		e.artifacts = append(e.artifacts, backend.Artifact{Role: RoleLayers, Path: filepath.Join(req.WorkDir, LayerInfoFile)})
	}
	return e, nil
}

// profilesOf is the request's one optimization profile (BuildRequest
// carries one; BuildArgs takes several for 10.x).
func profilesOf(req backend.BuildRequest) []shapes.Profile {
	return []shapes.Profile{req.Profile}
}

// fetchCache copies the platform's timing cache to path and says what
// happened. A cache is an optimisation: no failure here fails a build.
func (b *Backend) fetchCache(ctx context.Context, tc TimingCache, name, path string) string {
	err := tc.Fetch(ctx, b.opts.Platform, name, path)
	switch {
	case err == nil:
		return "hit"
	case errors.Is(err, fs.ErrNotExist):
		os.Remove(path)
		return "miss"
	}
	// trtexec must not read a half-written cache: start a new one.
	os.Remove(path)
	return "fetch failed: " + err.Error()
}

// invoke runs trtexec in dir with its log in dir/logName, parses the log
// and classifies the outcome; a failure comes back as a *backend.Failure
// wrapping an *Error.
func (b *Backend) invoke(ctx context.Context, stage Stage, op, dir, logName string, args, env []string) (*Log, error) {
	logPath := filepath.Join(dir, logName)
	out, err := Run(ctx, Invocation{Exe: b.exe(), Args: args, Dir: dir, Env: append(append([]string{}, b.opts.Env...), env...), LogPath: logPath})
	if err != nil {
		return nil, backend.Fail(backend.FailInfrastructure, op, err)
	}
	l, perr := parseFile(logPath)
	if perr != nil {
		return nil, backend.Fail(backend.FailInfrastructure, op, fmt.Errorf("read trtexec log: %w", perr))
	}
	c := Classify(l, out.Exit, stage)
	if !c.OK {
		return l, b.fail(op, &Error{Stage: stage, Exit: out.Exit, Classification: c, LogPath: logPath})
	}
	return l, nil
}

func parseFile(path string) (*Log, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// planVersion reads the TensorRT version a plan was built with from its
// header (§4.2): the little-endian tag "ftrt", and when the next uint32 is
// 0, major, minor, patch and build in bytes 24..27.
func planVersion(path string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	var h [28]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return "", false
	}
	if binary.LittleEndian.Uint32(h[0:4]) != 0x74727466 || binary.LittleEndian.Uint32(h[4:8]) != 0 {
		return "", false
	}
	return fmt.Sprintf("%d.%d.%d.%d", h[24], h[25], h[26], h[27]), true
}

// addLogInfo records what the build log says about the device and the
// engine.
func addLogInfo(info map[string]string, l *Log) {
	if d := l.Device; d != nil {
		set := func(k, v string) {
			if v != "" {
				info[k] = v
			}
		}
		set("device", d.Name)
		set("device_uuid", d.UUID)
		set("compute_capability", d.ComputeCapability)
		if d.GlobalMemoryMiB > 0 {
			info["gpu_memory_mib"] = strconv.FormatInt(d.GlobalMemoryMiB, 10)
		}
	}
	m := l.Milestones
	if m.EngineBuiltS > 0 {
		info["engine_built_s"] = strconv.FormatFloat(m.EngineBuiltS, 'g', -1, 64)
	}
	if m.EngineSizeMiB > 0 {
		info["engine_size_mib"] = strconv.FormatFloat(m.EngineSizeMiB, 'g', -1, 64)
	}
	if p := l.Options["Build Options"]["Precision"]; p != "" {
		info["precision"] = p
	}
}

// DirCache keeps timing caches in a local directory, one file per
// platform and name. Writes go through a temporary file and a rename, so a
// concurrent reader sees the old or the new cache, never half of one; of
// two concurrent builds the later store wins (merging caches needs
// TensorRT itself).
type DirCache struct{ Dir string }

func (d DirCache) path(platform, name string) string {
	return filepath.Join(d.Dir, url.PathEscape(platform), url.PathEscape(name))
}

// Fetch copies the cache to dest.
func (d DirCache) Fetch(ctx context.Context, platform, name, dest string) error {
	return copyFile(d.path(platform, name), dest)
}

// Store replaces the cache with the file at path.
func (d DirCache) Store(ctx context.Context, platform, name, path string) error {
	dst := d.path(platform, name)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-"+filepath.Base(dst)+"-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	src, err := os.Open(path)
	if err != nil {
		tmp.Close()
		return err
	}
	_, err = io.Copy(tmp, src)
	src.Close()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeInputs writes each input's bytes as-is (little-endian, row-major:
// what --loadInputs reads) under dir/sub and returns the files relative to
// dir.
func writeInputs(dir, sub string, inputs []bundle.Tensor) ([]InputFile, error) {
	if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
		return nil, err
	}
	files := make([]InputFile, len(inputs))
	for i, t := range inputs {
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		rel := sub + "/" + strconv.Itoa(i) + ".bin"
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(rel)), t.Data, 0o644); err != nil {
			return nil, err
		}
		files[i] = InputFile{Name: t.Name, Shape: t.Shape, File: rel}
	}
	return files, nil
}

func (b *Backend) reruns() int {
	if b.opts.TelemetryReruns > 0 {
		return b.opts.TelemetryReruns
	}
	return 2
}
