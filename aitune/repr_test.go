package aitune

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestPyStrRepr(t *testing.T) {
	tests := []struct{ in, want string }{
		{"x", `'x'`},
		{"it's", `"it's"`},
		{`both ' and "`, `'both \' and "'`},
		{"tab\t", `'tab\t'`},
		{"\x7f", `'\x7f'`},
		{"é", `'é'`},
		{"\u2028", `'\u2028'`},
		{"\U0001F600", "'\U0001F600'"},
		{"\U000e0001", `'\U000e0001'`},
	}
	for _, tt := range tests {
		if got := pyStrRepr(tt.in); got != tt.want {
			t.Errorf("pyStrRepr(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
	in := make([]string, len(tests))
	for i, tt := range tests {
		in[i] = tt.in
	}
	stdin, _ := json.Marshal(in)
	py3, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 not found; CI must have it")
		}
		t.Skip("python3 not found")
	}
	cmd := exec.Command(py3, "-c", "import json,sys; json.dump([repr(s) for s in json.load(sys.stdin)], sys.stdout)")
	cmd.Stdin = strings.NewReader(string(stdin))
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var py []string
	if err := json.Unmarshal(out, &py); err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		if py[i] != tt.want {
			t.Errorf("Python repr(%q) = %s, the table says %s", tt.in, py[i], tt.want)
		}
	}
}
