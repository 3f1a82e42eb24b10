package gpu

import (
	"fmt"
	"regexp"
	"strings"
)

// KeyParts is what a platform key says about its machine: the reading of
// PlatformKey's format back, for deploy tooling that names a target by its
// key (fetch --for-platform).
type KeyParts struct {
	Kind string // KindGPU or KindCPU
	// ISATier is a CPU key's tier ("avx512", "avx2", …; ISATier), Flags
	// the CPU flags the tier implies at least (FlagsOfTier).
	ISATier string
	Flags   []string
	// ComputeCapability ("9.0") and TensorRT ("10.3.0", without the build)
	// of a GPU key.
	ComputeCapability string
	TensorRT          string
	// OS and Arch: linux/amd64 unless the key ends in another pair.
	OS, Arch string
}

var (
	smPart  = regexp.MustCompile(`^sm([0-9]{2,3})$`)
	trtPart = regexp.MustCompile(`^trt([0-9]+\.[0-9]+\.[0-9]+)(\.[0-9]+)?$`)
	ortPart = regexp.MustCompile(`^ort([0-9.]+|none)$`)
	// knownOS and knownArch are the GOOS and GOARCH values finishKey may
	// append.
	knownOS   = map[string]bool{"linux": true, "darwin": true, "windows": true, "freebsd": true}
	knownArch = map[string]bool{"amd64": true, "arm64": true, "386": true, "arm": true, "ppc64le": true, "s390x": true, "riscv64": true}
	tiers     = map[string]bool{"amx": true, "avx512": true, "avx2": true, "sse4": true, "sve2": true, "sve": true, "neon": true}
)

// ParseKey reads a platform key made by PlatformKey or DeviceKey. A key
// whose parts are not there (a target class such as "cpu", a key cut short
// and hashed for its length) is an error naming what is missing.
func ParseKey(key string) (KeyParts, error) {
	parts := strings.Split(key, "-")
	if len(parts) < 3 || (parts[0] != KindCPU && parts[0] != KindGPU) {
		return KeyParts{}, fmt.Errorf("%q is not a platform key (cpu-<model>[-<isa>]-ort<version> or gpu-<name>-sm<cc>-trt<version>-drv<driver>, as worker info prints it)", key)
	}
	p := KeyParts{Kind: parts[0], OS: "linux", Arch: "amd64"}
	if n := len(parts); n > 3 && knownOS[parts[n-2]] && knownArch[parts[n-1]] {
		p.OS, p.Arch = parts[n-2], parts[n-1]
		parts = parts[:n-2]
	}
	if p.Kind == KindCPU {
		last := len(parts) - 1
		if !ortPart.MatchString(parts[last]) {
			return KeyParts{}, fmt.Errorf("platform key %q has no ONNX Runtime version (ort<version>) at its end", key)
		}
		if t := parts[last-1]; tiers[t] && last-1 > 0 {
			p.ISATier = t
			p.Flags = FlagsOfTier(t)
		}
		return p, nil
	}
	for _, part := range parts[1:] {
		if m := smPart.FindStringSubmatch(part); m != nil {
			cc := m[1]
			p.ComputeCapability = cc[:len(cc)-1] + "." + cc[len(cc)-1:]
		}
		if m := trtPart.FindStringSubmatch(part); m != nil {
			p.TensorRT = m[1]
		}
	}
	if p.ComputeCapability == "" {
		return KeyParts{}, fmt.Errorf("platform key %q has no compute capability (sm<cc>)", key)
	}
	return p, nil
}

// FlagsOfTier are the CPU flags a machine of ISA tier t has at least (the
// tier is its best extension; x86 tiers imply the ones below).
func FlagsOfTier(t string) []string {
	switch t {
	case "amx":
		return []string{"amx_tile", "avx", "avx2", "avx512f", "fma", "sse4_2"}
	case "avx512":
		return []string{"avx", "avx2", "avx512f", "fma", "sse4_2"}
	case "avx2":
		return []string{"avx", "avx2", "fma", "sse4_2"}
	case "sse4":
		return []string{"sse4_2"}
	case "sve2":
		return []string{"neon", "sve", "sve2"}
	case "sve":
		return []string{"neon", "sve"}
	case "neon":
		return []string{"neon"}
	}
	return nil
}
