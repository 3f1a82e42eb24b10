package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
)

// Run runs the contract against stores made by newStore, which must return a
// fresh, empty store each time it is called (once per subtest).
func Run(t *testing.T, newStore func(t *testing.T) artifacts.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s artifacts.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Overwrite", testOverwrite},
		{"Stat", testStat},
		{"ModTime", testModTime},
		{"Missing", testMissing},
		{"List", testList},
		{"ListInvalidPrefix", testListInvalidPrefix},
		{"ListDirs", testListDirs},
		{"Delete", testDelete},
		{"InvalidKeys", testInvalidKeys},
		{"ConcurrentPuts", testConcurrentPuts},
		{"Create", testCreate},
		{"FailedPut", testFailedPut},
		{"CancelledPut", testCancelledPut},
		{"PutKeepsReaderOpen", testPutKeepsReaderOpen},
		{"PutFile", testPutFile},
		{"PutBytes", testPutBytes},
		{"PutRepairsBitFlippedBlob", testPutRepairsBitFlippedBlob},
		{"VerifyBlob", testVerifyBlob},
		{"FetchFile", testFetchFile},
		{"FetchFileCorrupt", testFetchFileCorrupt},
		{"JSON", testJSON},
		{"NamedObjects", testNamedObjects},
		{"String", testString},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStore(t)) })
	}
}

const mib = 1 << 20

// stream is n pseudo-random bytes from seed, as a reader that is not
// seekable and has no ReadAt, so stores cannot take a shortcut.
func stream(seed byte, n int64) io.Reader {
	return struct{ io.Reader }{io.LimitReader(rand.NewChaCha8([32]byte{seed}), n)}
}

// digest is the sha256 (hex) of stream(seed, n).
func digest(seed byte, n int64) string {
	h := sha256.New()
	io.Copy(h, stream(seed, n))
	return hex.EncodeToString(h.Sum(nil))
}

func put(t *testing.T, s artifacts.Store, key string, b []byte) {
	t.Helper()
	if err := s.Put(t.Context(), key, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func get(t *testing.T, s artifacts.Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q): reading: %v", key, err)
	}
	return b
}

func list(t *testing.T, s artifacts.Store, prefix string) []string {
	t.Helper()
	keys, err := s.List(t.Context(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return keys
}
