package ort

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LibraryEnv names the environment variable that points at the ONNX Runtime
// shared library (the name onnxruntime_go's own tests use).
const LibraryEnv = "ONNXRUNTIME_SHARED_LIBRARY_PATH"

// relLibrary is where `make ort` puts the library in a checkout.
const relLibrary = "third_party/onnxruntime/lib/libonnxruntime.so"

// FindLibrary returns the ONNX Runtime library to load: explicit if set,
// else $ONNXRUNTIME_SHARED_LIBRARY_PATH, else the copy `make ort` fetched
// into the checkout, looked for beside the executable and upwards from the
// working directory.
func FindLibrary(explicit string) (string, error) {
	if explicit != "" {
		return checkLibrary(explicit, "--ort-lib")
	}
	if p := os.Getenv(LibraryEnv); p != "" {
		return checkLibrary(p, "$"+LibraryEnv)
	}
	var roots []string
	if exe, err := os.Executable(); err == nil {
		roots = append(roots, filepath.Dir(filepath.Dir(exe)), filepath.Dir(exe))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			roots = append(roots, d)
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, r := range roots {
		p := filepath.Join(r, relLibrary)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("ONNX Runtime library not found: run `make ort` in the tunefleet checkout, or set %s to a libonnxruntime.so (1.24.x)", LibraryEnv)
}

func checkLibrary(p, from string) (string, error) {
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("ONNX Runtime library %s (from %s): %w; run `make ort` or point it at a libonnxruntime.so (1.24.x)", p, from, err)
	}
	return filepath.Abs(p)
}

// LibraryVersion reads the ONNX Runtime version from the library's file
// name ("libonnxruntime.so.1.24.1", through symbolic links), for platform
// keys computed without loading the library. It returns "" when the name
// carries no version.
func LibraryVersion(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	base := filepath.Base(path)
	const prefix = "libonnxruntime.so."
	if !strings.HasPrefix(base, prefix) {
		return ""
	}
	v := strings.TrimPrefix(base, prefix)
	if strings.Count(v, ".") != 2 {
		return ""
	}
	return v
}
