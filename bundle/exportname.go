package bundle

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// MaxExportNameBytes is the longest name a graph spec may have in an
// exported layout: one directory per graph spec, and a directory name is
// at most 255 bytes on the file systems a deploy machine uses (ext4, xfs,
// overlayfs).
const MaxExportNameBytes = 255

var unexportable = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// ExportName is a graph spec's name in the layouts that give each graph
// spec of a model a directory of its own, Triton's model repository
// among them: "<model>_<graph>", with every run of characters other than
// letters, digits, '_' and '-' replaced by '_' (AITune's "tests.MLP"
// graph "0" is "tests_MLP_0"). Triton clients call the model by it.
//
// It lives with the bundle, not with the exporter, because the names are
// the bundle's: two graph specs whose names differ only in such
// characters ("a.b" and "a_b") would both become one directory, and a
// long model name with a long graph name would not fit one; Open refuses
// both before anything is tuned rather than at the fetch after it.
func ExportName(model, graph string) string {
	return strings.Trim(unexportable.ReplaceAllString(model, "_"), "_") + "_" + strings.Trim(unexportable.ReplaceAllString(graph, "_"), "_")
}

// exportNameProblems checks that every graph spec of the model has an
// export name of its own that fits a directory.
func exportNameProblems(model string, graphs []string) []string {
	var probs []string
	byName := map[string][]string{}
	for _, g := range graphs {
		n := ExportName(model, g)
		if len(n) > MaxExportNameBytes {
			probs = append(probs, fmt.Sprintf("graph %q: exported as the directory (and Triton model) %q, %d bytes, more than a directory name's %d: shorten the model or the graph name",
				g, n[:40]+"…", len(n), MaxExportNameBytes))
			continue
		}
		byName[n] = append(byName[n], g)
	}
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		if gs := byName[n]; len(gs) > 1 {
			probs = append(probs, fmt.Sprintf("graphs %s all export as the directory (and Triton model) %q (characters other than letters, digits, '_' and '-' become '_'): rename all but one",
				quoteAll(gs), n))
		}
	}
	return probs
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}
