package deploycheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// LoadBake merges inherited targets as bake does: parents in order, the
// target's own attributes last, args key by key; a cycle or a missing
// parent is an error, not a silently empty target.
func TestLoadBakeInherits(t *testing.T) {
	for _, tc := range []struct {
		name, hcl, want string
	}{
		{"merged", `
target "_a" {
  context = "."
  args = { X = "1", Y = "a" }
  platforms = ["linux/amd64"]
}
target "_b" {
  args = { Y = "b" }
}
target "img" {
  inherits = ["_a", "_b"]
  dockerfile = "d"
  args = { Z = "3" }
}`, "img context=. dockerfile=d args=X:1,Y:b,Z:3 platforms=linux/amd64"},
		{"cycle", `
target "a" {
  inherits = ["b"]
}
target "b" {
  inherits = ["a"]
}`, "inherits itself ([a b a])"},
		{"missing parent", `
target "a" {
  inherits = ["_gone"]
}`, "error: target _gone is inherited but not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "docker-bake.hcl")
			if err := os.WriteFile(p, []byte(tc.hcl), 0o644); err != nil {
				t.Fatal(err)
			}
			targets, err := LoadBake(p, nil)
			var got string
			if err != nil {
				got = "error: " + err.Error()
			} else {
				for _, bt := range targets {
					if bt.Name != "img" {
						continue
					}
					got = bt.Name + " context=" + bt.Context + " dockerfile=" + bt.Dockerfile + " args="
					var kv []string
					for _, k := range []string{"X", "Y", "Z"} {
						kv = append(kv, k+":"+bt.Args[k])
					}
					got += strings.Join(kv, ",") + " platforms=" + strings.Join(bt.Platforms, ",")
				}
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
