package testsvc

import (
	"path/filepath"
	"testing"
)

func TestFindVersitygwPrefersThirdParty(t *testing.T) {
	root := moduleRoot()
	if root == "" {
		t.Fatal("no go.mod above the working directory")
	}
	want := filepath.Join(root, "third_party", "bin", "versitygw")
	if !isExecutable(want) {
		t.Skipf("%s not installed (make versitygw)", want)
	}
	if got := VersitygwBinary(); got != want {
		t.Fatalf("VersitygwBinary() = %q, want %q (third_party/bin first)", got, want)
	}
}

func TestInCI(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "FALSE": false, "no": false, "true": true, "1": true, "yes": true} {
		t.Setenv("CI", v)
		if got := InCI(); got != want {
			t.Errorf("CI=%q: InCI() = %v, want %v", v, got, want)
		}
	}
}
