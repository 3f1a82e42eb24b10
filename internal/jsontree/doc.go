// Package jsontree parses JSON into a tree that keeps what encoding/json
// loses: the order of object keys (an output skeleton's dict is a Python
// dict, whose order matters; messages list fields in schema order) and
// every key (a duplicate key is an error naming where it is, where
// encoding/json keeps the last one silently).
package jsontree
