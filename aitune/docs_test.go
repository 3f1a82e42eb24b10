package aitune_test

import (
	"os"
	"regexp"
	"testing"
)

// TestDocsImportLocalTorchStorage: the documented import must work with
// real AITune, whose package exports LocalTorchStorage from aitune.torch
// (aitune/torch/__init__.py); aitune.torch.checkpoint's __init__ exports
// nothing, so "from aitune.torch.checkpoint import LocalTorchStorage" is
// an ImportError.
func TestDocsImportLocalTorchStorage(t *testing.T) {
	imp := regexp.MustCompile(`from (\S+) import .*LocalTorchStorage`)
	for _, f := range []string{"../docs/recording.md", "SCHEMA.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		found := imp.FindAllSubmatch(b, -1)
		if len(found) == 0 {
			t.Errorf("%s shows no import of LocalTorchStorage", f)
		}
		for _, m := range found {
			if string(m[1]) != "aitune.torch" {
				t.Errorf("%s: %q; want \"from aitune.torch import LocalTorchStorage\"", f, m[0])
			}
		}
	}
}
