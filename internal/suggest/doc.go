// Package suggest finds the known name a mistyped one was meant to be
// (a did-you-mean): the closest by edit distance, when close enough to be
// a typo. Target classes, model names and fleet-file keys use the one
// rule, so a suggestion means the same everywhere.
package suggest
