package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
)

// testListDirs: one level of the keys, from the store's own listing (a
// DirLister) and from the keys of a store that is not one (Counting
// hides the method), the same.
func testListDirs(t *testing.T, s artifacts.Store) {
	for _, k := range []string{
		"models/a/cpu/latest.json",
		"models/a/cpu/history/x.json",
		"models/a/gpu/history-head.json",
		"models/b/cpu/latest.json",
		"models/top.json",
		"runs/r1/run.json",
	} {
		put(t, s, k, []byte(k))
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"models/", []string{"a", "b"}},
		{"models/a/", []string{"cpu", "gpu"}},
		{"models/a/cpu/", []string{"history"}},
		{"models/a/gpu/", nil},
		{"", []string{"models", "runs"}},
		{"nope/", nil},
	} {
		for _, via := range []struct {
			name  string
			store artifacts.Store
		}{{"own", s}, {"from the keys", &Counting{Store: s}}} {
			got, err := artifacts.ListDirs(context.Background(), via.store, tc.prefix)
			if err != nil {
				t.Fatalf("%s: ListDirs(%q): %v", via.name, tc.prefix, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: ListDirs(%q) = %v, want %v", via.name, tc.prefix, got, tc.want)
			}
		}
	}
}
