package trt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tunefleet/tunefleet/backend"
)

// Version is a TensorRT version as trtexec reports it. Build is the build
// number of the banner's "[bNN]" (printed from 10.8 on); 0 means unknown.
// An engine is valid only for the exact version and build that built it, so
// platform keys and timing caches use String, which includes the build.
type Version struct {
	Major int `json:"major"`
	Minor int `json:"minor"`
	Patch int `json:"patch"`
	Build int `json:"build,omitempty"`
}

// String renders "10.16.0.72" (TensorRT's own major.minor.patch.build
// form) or "10.3.0" when the build is unknown.
func (v Version) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	if v.Build > 0 {
		s += "." + strconv.Itoa(v.Build)
	}
	return s
}

// IsZero reports whether v is the zero Version (nothing detected).
func (v Version) IsZero() bool { return v == Version{} }

// AtLeast reports whether v is major.minor or newer.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// DecodeVersionCode turns the number of a "[TensorRT vNNNN]" banner into a
// version: major*1000+minor*100+patch up to 8.x (8600 = 8.6.0, 8203 =
// 8.2.3), major*10000+minor*100+patch from 9 on (100300 = 10.3.0, 101600 =
// 10.16.0), as NV_TENSORRT_VERSION is defined in NvInferRuntimeBase.h.
func DecodeVersionCode(n int) (Version, error) {
	switch {
	case n >= 10000:
		return Version{Major: n / 10000, Minor: n / 100 % 100, Patch: n % 100}, nil
	case n >= 1000:
		return Version{Major: n / 1000, Minor: n / 100 % 10, Patch: n % 100}, nil
	}
	return Version{}, fmt.Errorf("TensorRT version code %d is not of the form major*1000+minor*100+patch", n)
}

// bannerTag is what precedes the version code in every &&&& line.
const bannerTag = "[TensorRT v"

// parseBannerLine reads the version code and optional build number out of a
// line containing "[TensorRT vNNNN]" and, from 10.8, " [bNN]". ok is false
// when the line has no well-formed tag.
func parseBannerLine(line string) (code, build int, ok bool) {
	i := strings.Index(line, bannerTag)
	if i < 0 {
		return 0, 0, false
	}
	rest := line[i+len(bannerTag):]
	j := strings.IndexByte(rest, ']')
	if j <= 0 || j > 9 {
		return 0, 0, false
	}
	code, err := strconv.Atoi(rest[:j])
	if err != nil || code <= 0 {
		return 0, 0, false
	}
	rest = rest[j+1:]
	if strings.HasPrefix(rest, " [b") {
		if k := strings.IndexByte(rest, ']'); k > 3 && k <= 12 {
			if b, err := strconv.Atoi(rest[3:k]); err == nil && b >= 0 {
				build = b
			}
		}
	}
	return code, build, true
}

// parseVersionLine reads "TensorRT version: 10.3.0" (printed after the
// device block; major.minor.patch, no build).
func parseVersionText(s string) (Version, bool) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) < 3 || len(parts) > 4 {
		return Version{}, false
	}
	var n [4]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v > 100000 {
			return Version{}, false
		}
		n[i] = v
	}
	return Version{Major: n[0], Minor: n[1], Patch: n[2], Build: n[3]}, true
}

// ParseBanner finds the TensorRT version in trtexec output: the banner of
// the "&&&& RUNNING TensorRT.trtexec [TensorRT v100300] [b43] # …" line (the
// first line of every run, `--help` included), or, failing that, the
// "TensorRT version: 10.3.0" line. When both are present they must agree.
func ParseBanner(out string) (Version, error) {
	var (
		banner    Version
		hasBanner bool
		line      Version
		hasLine   bool
	)
	for _, l := range strings.Split(out, "\n") {
		if !hasBanner && strings.HasPrefix(strings.TrimSpace(l), "&&&& ") {
			if code, build, ok := parseBannerLine(l); ok {
				v, err := DecodeVersionCode(code)
				if err != nil {
					return Version{}, err
				}
				v.Build = build
				banner, hasBanner = v, true
			}
		}
		if !hasLine {
			if i := strings.Index(l, "TensorRT version: "); i >= 0 {
				if v, ok := parseVersionText(l[i+len("TensorRT version: "):]); ok {
					line, hasLine = v, true
				}
			}
		}
		if hasBanner && hasLine {
			break
		}
	}
	switch {
	case hasBanner && hasLine:
		if banner.Major != line.Major || banner.Minor != line.Minor || banner.Patch != line.Patch {
			return Version{}, fmt.Errorf("trtexec banner says TensorRT %s but its log says %d.%d.%d", banner, line.Major, line.Minor, line.Patch)
		}
		return banner, nil
	case hasBanner:
		return banner, nil
	case hasLine:
		return line, nil
	}
	return Version{}, errors.New(`no TensorRT version in trtexec output (want a "&&&& RUNNING TensorRT.trtexec [TensorRT vNNNN]" banner or a "TensorRT version: X.Y.Z" line)`)
}

// DetectVersion runs `exe --help` (no shell) and parses its banner. --help
// needs no GPU, only TensorRT's libraries, and exits 0.
func DetectVersion(ctx context.Context, exe string) (Version, error) {
	v, _, err := detectVersion(ctx, exe, nil)
	return v, err
}

// versionTimeout bounds `trtexec --help`: it loads libraries and prints
// text, nothing more.
const versionTimeout = time.Minute

// detectVersion runs exe --help with extra environment. On failure it also
// returns the classification of what trtexec printed, so that a missing
// library (exit 127) can mark the worker broken.
func detectVersion(ctx context.Context, exe string, env []string) (Version, *Classification, error) {
	if exe == "" {
		exe = DefaultExecutable
	}
	path, err := exec.LookPath(exe)
	if err != nil {
		return Version{}, nil, fmt.Errorf("trtexec executable %q not found (install TensorRT or point the worker at trtexec): %w", exe, err)
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--help")
	cmd.Env = append(os.Environ(), env...)
	// The banner is in the first lines; a flood (a wrong executable) is
	// kept to its first 1 MiB.
	out := &capped{max: 1 << 20}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	// Its own process group (sysProcAttr): the whole group goes on timeout.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A helper that keeps the output pipe open must not hang detection.
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	text := out.String()
	if runErr != nil {
		if parent.Err() != nil {
			// Cancelled by the caller (the task ended): not the machine's fault.
			return Version{}, &Classification{Class: backend.FailInfrastructure, Retryable: true, Kind: KindCancelled}, fmt.Errorf("%s --help: %w", path, parent.Err())
		}
		st := exitStatusOf(cmd.ProcessState)
		st.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		l, _ := Parse(strings.NewReader(text))
		c := Classify(l, st, StageVersion)
		return Version{}, &c, fmt.Errorf("%s --help failed (%s): %s", path, st, c.Reason)
	}
	v, err := ParseBanner(text)
	if err != nil {
		return Version{}, nil, fmt.Errorf("%s --help: %w", path, err)
	}
	return v, nil, nil
}

// capped keeps the first max bytes written to it and drops the rest.
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
