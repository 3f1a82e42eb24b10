// Package jsondoc writes an indented JSON document whose one large array
// is written element by element, byte for byte what json.MarshalIndent
// (prefix "", indent two spaces) writes for the whole document: finalize
// streams a 10,000-graph run's state.json and history entry this way
// instead of holding every graph's entry at once.
package jsondoc
