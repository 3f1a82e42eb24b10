package scalebench

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// row is one line of the closing table.
type row struct {
	order    int // the order of rows; ties keep insertion order
	what     string
	measured string
	target   string
	met      string // "yes", "no", or "—" where there is nothing to judge
}

var (
	rowsMu sync.Mutex
	rows   []row
)

// report adds a row to the summary and prints it at once, so a benchmark
// cut short still leaves its figures in the log.
func report(order int, what, measured, target string, met *bool) {
	m := "—"
	if met != nil {
		m = map[bool]string{true: "yes", false: "NO"}[*met]
	}
	rowsMu.Lock()
	rows = append(rows, row{order, what, measured, target, m})
	rowsMu.Unlock()
	fmt.Printf("scalebench: %s: %s (target %s, met: %s)\n", what, measured, target, m)
}

// ok makes a *bool for report.
func ok(b bool) *bool { return &b }

// printSummary prints every row, in the order.
func printSummary() {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	if len(rows) == 0 {
		return
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].order < rows[j].order })
	fmt.Printf("\n=== issue 9 scale benchmarks, %s, %s ===\n", time.Now().UTC().Format(time.DateTime), hostDesc())
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tMEASURED\tTARGET\tMET?")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.what, r.measured, r.target, r.met)
	}
	tw.Flush()
}

func hostDesc() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	n := strings.Count(string(b), "processor\t:")
	if err != nil || n == 0 {
		return "unknown CPU"
	}
	return fmt.Sprintf("%d CPU(s)", n)
}
