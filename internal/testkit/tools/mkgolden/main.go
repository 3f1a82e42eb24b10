// Command mkgolden regenerates the golden AITune checkpoints of package
// aitune (aitune/testdata/golden/<case>) from the cases in
// aitune/aitunetest. Run it from the repository root after a deliberate
// change to the checkpoint format:
//
//	go run ./internal/testkit/tools/mkgolden
//
// The tests compare freshly written checkpoints with these files byte for
// byte, so CI fails until they are regenerated and reviewed.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tunefleet/tunefleet/aitune/aitunetest"
)

func main() {
	dir := flag.String("dir", filepath.Join("aitune", "testdata", "golden"), "golden directory")
	flag.Parse()
	for _, c := range aitunetest.Cases() {
		out := filepath.Join(*dir, c.Dir)
		if err := os.RemoveAll(out); err != nil {
			fail(err)
		}
		man, err := c.Write(out)
		if err != nil {
			fail(fmt.Errorf("case %s: %w", c.Dir, err))
		}
		for _, f := range man.Files {
			fmt.Printf("%s/%s  %d bytes\n", out, f.Path, f.Size)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mkgolden:", err)
	os.Exit(1)
}
