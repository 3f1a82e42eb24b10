// Package version says which tunefleet is running, for provenance records.
package version
