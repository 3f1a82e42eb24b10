package faults_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// scenario is one row of the suite's table.
type scenario struct {
	n          int
	name       string
	injection  string
	assertions []string
	start      time.Time
	wall       time.Duration
	outcome    string
}

var (
	tableMu sync.Mutex
	table   []*scenario
)

// begin starts a scenario's row; the row is completed (wall time, outcome)
// and logged when the test ends.
func begin(t *testing.T, n int, injection string) *scenario {
	t.Helper()
	t.Parallel()
	sc := &scenario{n: n, name: t.Name(), injection: injection, start: time.Now()}
	t.Cleanup(func() {
		sc.wall = time.Since(sc.start).Round(time.Second)
		switch {
		case t.Skipped():
			sc.outcome = "skipped"
		case t.Failed():
			sc.outcome = "FAILED"
		default:
			sc.outcome = "passed"
		}
		t.Logf("| %d | %s | %s | %s | %s | %s |", sc.n, sc.name, sc.injection, strings.Join(sc.assertions, "; "), sc.wall, sc.outcome)
		tableMu.Lock()
		table = append(table, sc)
		tableMu.Unlock()
	})
	return sc
}

// assert records what a scenario checked, for the table.
func (sc *scenario) assert(what ...string) { sc.assertions = append(sc.assertions, what...) }

// printTable prints the scenarios' table (Markdown) after the tests.
func printTable() {
	tableMu.Lock()
	defer tableMu.Unlock()
	if len(table) == 0 {
		return
	}
	slices.SortFunc(table, func(a, b *scenario) int { return a.n - b.n })
	w := os.Stdout
	fmt.Fprintln(w, "\nfault suite:")
	fmt.Fprintln(w, "| # | scenario | injection | assertions | wall | outcome |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, sc := range table {
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s |\n", sc.n, sc.name, sc.injection, strings.Join(sc.assertions, "; "), sc.wall, sc.outcome)
	}
}
