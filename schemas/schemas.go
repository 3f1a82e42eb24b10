package schemas

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tunefleet/tunefleet/internal/jsontree"
)

// BaseURL is the prefix of every schema's $id.
const BaseURL = "https://github.com/tunefleet/tunefleet/schemas/"

// Doc names one published schema.
type Doc string

// The published schemas, by file name (and $id, after BaseURL).
const (
	Bundle      Doc = "bundle.schema.json"          // bundle.json, tunefleet.bundle/v1
	AITuneBlock Doc = "aitune-block.schema.json"    // bundle.json's aitune block, aitune.block/v1
	Result      Doc = "result.schema.json"          // runs/<run>/graphs/<graph>/result.json, tunefleet.result/v1
	State       Doc = "state.schema.json"           // runs/<run>/state.json, tunefleet.state/v1
	Latest      Doc = "latest.schema.json"          // models/<model>/<platform>/latest.json, tunefleet.latest/v1
	Fleet       Doc = "fleet.schema.json"           // fleet.yaml, tunefleet.fleet/v1
	Plan        Doc = "plan.schema.json"            // nightly/<nightly-id>/plan.json, tunefleet.nightly/v1
	History     Doc = "history.schema.json"         // models/<model>/<platform>/history/<created>-<run>.json, tunefleet.history/v1
	Summary     Doc = "nightly-summary.schema.json" // nightly/<nightly-id>/summary.json, tunefleet.nightly-summary/v1
	HistoryHead Doc = "history-head.schema.json"    // models/<model>/<platform>/history-head.json, tunefleet.history-head/v1
)

// Docs lists every published schema.
func Docs() []Doc {
	return []Doc{Bundle, AITuneBlock, Result, State, Latest, Fleet, Plan, History, Summary, HistoryHead}
}

// ID is the schema's $id.
func (d Doc) ID() string { return BaseURL + string(d) }

//go:embed *.schema.json
var files embed.FS

// Raw returns the schema file's bytes.
func Raw(d Doc) ([]byte, error) { return files.ReadFile(string(d)) }

type compiled struct {
	schemas map[Doc]*jsonschema.Schema
	trees   map[string]*jsontree.Node // by $id, for messages (property order, descriptions)
	err     error
}

var (
	once sync.Once
	all  compiled
)

// load compiles every embedded schema once; a schema that does not compile
// is a defect of this package, which its tests catch.
func load() (*compiled, error) {
	once.Do(func() {
		all = compiled{schemas: map[Doc]*jsonschema.Schema{}, trees: map[string]*jsontree.Node{}}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		for _, d := range Docs() {
			raw, err := Raw(d)
			if err != nil {
				all.err = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				all.err = fmt.Errorf("schema %s: %w", d, err)
				return
			}
			if err := c.AddResource(d.ID(), doc); err != nil {
				all.err = fmt.Errorf("schema %s: %w", d, err)
				return
			}
			tree, err := jsontree.Parse(raw, string(d))
			if err != nil {
				all.err = err
				return
			}
			all.trees[d.ID()] = tree
		}
		for _, d := range Docs() {
			s, err := c.Compile(d.ID())
			if err != nil {
				all.err = fmt.Errorf("schema %s: %w", d, err)
				return
			}
			all.schemas[d] = s
		}
	})
	return &all, all.err
}

// Error lists every way a document breaks its schema, one problem per
// line, each starting with the JSON path of the value.
type Error struct {
	Doc      Doc
	Problems []string
}

func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0]
	}
	return fmt.Sprintf("%d problems:\n  - %s", len(e.Problems), strings.Join(e.Problems, "\n  - "))
}

// Problems returns the problems of err when it is an *Error, and nil
// otherwise.
func Problems(err error) []string {
	var se *Error
	if errors.As(err, &se) {
		return se.Problems
	}
	return nil
}

// ValidateJSON parses raw (duplicate keys are refused, naming where) and
// validates it against d. root names the whole document in problems: ""
// for a file (graphs[0].name), or a field name for an embedded document
// (aitune.graphs["0"]). The parsed tree is returned for the caller's own
// checks, which may then assume the structure the schema guarantees.
func ValidateJSON(d Doc, root string, raw []byte) (*jsontree.Node, error) {
	n, err := jsontree.Parse(raw, root)
	if err != nil {
		return nil, &Error{Doc: d, Problems: []string{err.Error()}}
	}
	if err := Validate(d, root, n); err != nil {
		return nil, err
	}
	return n, nil
}

// Validate validates a parsed document against d.
func Validate(d Doc, root string, n *jsontree.Node) error {
	c, err := load()
	if err != nil {
		return err
	}
	s, ok := c.schemas[d]
	if !ok {
		return fmt.Errorf("schemas: no schema %q", d)
	}
	v := n.Value()
	err = s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("validate against %s: %w", d, err)
	}
	m := &messenger{c: c, doc: v, root: root}
	m.walk(ve)
	slices.Sort(m.probs)
	return &Error{Doc: d, Problems: slices.Compact(m.probs)}
}
