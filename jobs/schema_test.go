package jobs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/tunefleet/tunefleet/schemas"
)

// The documents a store holds, by key, and their schemas.
var storedDocs = []struct {
	key *regexp.Regexp
	doc schemas.Doc
}{
	{regexp.MustCompile(`^runs/[^/]+/state\.json$`), schemas.State},
	{regexp.MustCompile(`^runs/[^/]+/graphs/[^/]+/(attempts/[0-9]+/)?result\.json$`), schemas.Result},
	{regexp.MustCompile(`^results/[^/]+/[^/]+\.json$`), schemas.Result}, // the index, not the negative cache beside it
	{regexp.MustCompile(`^models/[^/]+/[^/]+/latest\.json$`), schemas.Latest},
	{regexp.MustCompile(`^models/[^/]+/[^/]+/history/[^/]+\.json$`), schemas.History},
	{regexp.MustCompile(`^models/[^/]+/[^/]+/history-head\.json$`), schemas.HistoryHead},
}

// validateStoredDocs checks every state.json, result.json (attempts and
// the result index too) and latest.json that a test's runs left in the
// local store at root against its published schema: whatever path wrote
// them (done, failed, cancelled, reused, restored runs).
func validateStoredDocs(t *testing.T, root string) {
	t.Helper()
	checked := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		key := filepath.ToSlash(rel)
		for _, sd := range storedDocs {
			if !sd.key.MatchString(key) {
				continue
			}
			raw, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			checked++
			if _, err := schemas.ValidateJSON(sd.doc, "", raw); err != nil {
				t.Errorf("%s does not validate against %s: %v", key, sd.doc, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("walk the store: %v", err)
	}
	t.Logf("%d stored documents validate against their schemas", checked)
}
