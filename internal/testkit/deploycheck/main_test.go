package deploycheck

import (
	"fmt"
	"os"
	"testing"
)

// binDir holds the binaries the tests build (kbuild, producer, worker).
var binDir string

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "deploycheck-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}
