package faults_test

import (
	"testing"

	"github.com/tunefleet/tunefleet/internal/testkit/stack"
)

func TestMain(m *testing.M) {
	// Scenarios mostly wait (for a lease to expire, a server to come
	// back): run them all at once rather than GOMAXPROCS at a time.
	stack.Main(m, stack.MainOptions{MinParallel: 16, After: printTable})
}
