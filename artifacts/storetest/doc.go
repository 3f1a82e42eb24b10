// Package storetest is the contract every artifacts.Store implementation
// must pass: round trips of every size class, atomic and concurrent writes,
// failed writes that leave nothing behind, listing, key checks, and the blob
// and JSON helpers on top. Implementations call Run from their tests.
package storetest
