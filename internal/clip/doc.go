// Package clip keeps what a user gave (a name, a path, a URL, a flag's
// value) or what a library repeated of it to a few hundred characters in
// a message, a log line or a table cell: enough to recognise it, never a
// megabyte of it. Lengths are in characters (runes), so a cut never splits
// one.
package clip
