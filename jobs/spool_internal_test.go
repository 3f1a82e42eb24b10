package jobs

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

// Spools hand their memory on from one finalize to the next: what one
// output held is never read back by another, an output past what a spool
// keeps in memory goes to a file (and its buffer back), and remove leaves
// nothing in the work directory.
func TestSpoolsReuseTheirMemory(t *testing.T) {
	dir := t.TempDir()
	read := func(s *spool) string {
		t.Helper()
		r, err := s.reader()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for round := range 3 {
		sps := newSpools(dir)
		small, large := sps.new("small"), sps.new("large")
		want := strings.Repeat("s", 10+round)
		if _, err := io.WriteString(small, want); err != nil {
			t.Fatal(err)
		}
		big := bytes.Repeat([]byte{byte('a' + round)}, spoolInMemory/2+1)
		for range 3 { // past spoolInMemory on the third write: a file
			if _, err := large.Write(big); err != nil {
				t.Fatal(err)
			}
		}
		if got := read(small); got != want {
			t.Fatalf("round %d: the small output reads %q, want %q", round, got, want)
		}
		if large.f == nil || large.mem != nil {
			t.Fatalf("round %d: the large output is not in its file", round)
		}
		if got := read(large); got != strings.Repeat(string(big), 3) {
			t.Fatalf("round %d: the large output reads %d bytes, want %d of %q", round, len(got), 3*len(big), big[0])
		}
		sps.remove()
		if small.mem != nil || large.f != nil {
			t.Fatalf("round %d: an output kept its memory or file after remove", round)
		}
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Fatalf("the work directory holds %v after remove (%v)", left, err)
	}
}
