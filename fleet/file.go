package fleet

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tunefleet/tunefleet/internal/fsutil"
)

// Format is the version of the fleet file.
const Format = "tunefleet.fleet/v1"

// MaxFileSize bounds a fleet file: it lists models, not data.
const MaxFileSize = 4 << 20

// File is fleet.yaml: defaults plus one entry per model.
type File struct {
	Format string `yaml:"format" json:"format"`
	// Classes are target classes declared ahead of any worker: the nightly
	// submits to them with no worker live (scale-from-zero), as it does to
	// the classes of TUNEFLEET_CLASSES (package targetclass).
	Classes  []string `yaml:"classes,omitempty" json:"classes,omitempty"`
	Defaults Settings `yaml:"defaults" json:"defaults"`
	Models   []Model  `yaml:"models" json:"models"`

	// Digest is "sha256:<hex>" of the file's bytes (the nightly id's).
	Digest string `yaml:"-" json:"-"`
	// Path is where the file was read from; relative bundle paths are
	// relative to its directory.
	Path string `yaml:"-" json:"-"`

	// Where the top-level values and the defaults' settings are (Parse's
	// walk), to blame a mistake on the line that holds it.
	topPos, defaultsPos map[string]pos
	// meant are the keys a misspelt one was taken for: a model then
	// lacking that setting is a consequence, not a mistake of its own.
	meant []string
}

// Settings say how a model is tuned. A model's own settings override the
// defaults field by field (a field left out inherits).
type Settings struct {
	// Targets are the target classes (queues) to tune on.
	Targets []string `yaml:"targets,omitempty" json:"targets,omitempty"`
	// Strategy picks each graph's winner (strategy.Names()).
	Strategy        string   `yaml:"strategy,omitempty" json:"strategy,omitempty"`
	LatencyBudgetMs float64  `yaml:"latency_budget_ms,omitempty" json:"latency_budget_ms,omitempty"`
	Candidates      []string `yaml:"candidates,omitempty" json:"candidates,omitempty"`
	// ATol and RTol are tolerance overrides, "[OUTPUT=]VALUE" as the
	// --atol/--rtol flags of producer submit take them.
	ATol      []string `yaml:"atol,omitempty" json:"atol,omitempty"`
	RTol      []string `yaml:"rtol,omitempty" json:"rtol,omitempty"`
	BenchTime Duration `yaml:"bench_time,omitempty" json:"bench_time,omitempty"`
	// Warmup bounds a measurement's warm-up in time (submit's --warmup;
	// zero: a quarter of the bench time).
	Warmup           Duration `yaml:"warmup,omitempty" json:"warmup,omitempty"`
	CandidateTimeout Duration `yaml:"candidate_timeout,omitempty" json:"candidate_timeout,omitempty"`
	// FindMaxBatch is submit's --find-max-batch: each graph's max batch
	// extended first, as AITune's tune does (default false).
	FindMaxBatch *bool `yaml:"find_max_batch,omitempty" json:"find_max_batch,omitempty"`
	// Priority orders submission: higher first (its tasks queue first).
	Priority *int     `yaml:"priority,omitempty" json:"priority,omitempty"`
	Owners   []string `yaml:"owners,omitempty" json:"owners,omitempty"`
	// Enabled false leaves a model out of the nightly (default true).
	Enabled *bool `yaml:"enabled,omitempty" json:"enabled,omitempty"`
}

// Model is one fleet entry.
type Model struct {
	// Model is the bundle's model name (bundle.json's model): the name its
	// states and history are kept under.
	Model string `yaml:"model" json:"model"`
	// Bundle is the bundle: a directory or a .tar/.tar.gz/.tgz, relative to
	// the fleet file's directory unless absolute.
	Bundle   string `yaml:"bundle" json:"bundle"`
	Settings `yaml:",inline" json:",inline"`

	// Line is where the entry starts in the fleet file (for messages).
	Line int `yaml:"-" json:"-"`
	// pos is where each of its keys' values is.
	pos map[string]pos
}

// Duration is a Go duration written as a string ("2s", "30m").
type Duration time.Duration

// UnmarshalYAML reads "2s"-style durations.
// A mistake is a *yaml.TypeError, so that decoding goes on and the file's
// other mistakes are found in the same pass.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want a duration such as 2s or 30m", n.Line)}}
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a positive duration (e.g. 2s, 30m)", n.Line, s)}}
	}
	*d = Duration(v)
	return nil
}

// Load reads and parses a fleet file (Parse), checking it (Check).
func Load(path string) (*File, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, &Error{Path: path, Msg: fmt.Sprintf("cannot read the fleet file: %v", errors.Unwrap(err))}
	}
	if info.Size() > MaxFileSize {
		return nil, &Error{Path: path, Msg: fmt.Sprintf("%d bytes: a fleet file is at most %d", info.Size(), MaxFileSize)}
	}
	if !info.Mode().IsRegular() {
		return nil, &Error{Path: path, Msg: fmt.Sprintf("cannot read the fleet file: %v", fsutil.NotRegular(path, info.Mode()).(*fs.PathError).Err)}
	}
	data, err := fsutil.ReadRegular(path)
	if err != nil {
		return nil, &Error{Path: path, Msg: fmt.Sprintf("cannot read the fleet file: %v", err)}
	}
	f, err := Parse(path, data)
	if f == nil {
		return nil, err
	}
	// A file that decoded despite its mistakes (unknown keys, values of
	// the wrong type) is checked too: every mistake at once.
	var probs Problems
	errors.As(err, &probs)
	var more Problems
	if errors.As(f.Check(), &more) {
		probs = append(probs, more...)
	}
	if len(probs) > 0 {
		return nil, probs.sorted()
	}
	return f, nil
}

// yamlLine finds yaml.v3's "line N: msg" in its errors.
var yamlLine = regexp.MustCompile(`line (\d+): (.*)`)

// Parse decodes a fleet file strictly, in one pass over its nodes: every
// unknown key (with a did-you-mean) and every value of the wrong type is
// a problem naming its line, column and field, and so is a second
// document. It returns the file as far as it decoded (nil when the YAML
// itself does not parse) with the problems (Problems), so that Load can
// check the rest of it too.
func Parse(path string, data []byte) (*File, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		return nil, Problems{yamlError(path, err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, Problems{{Path: path, Line: extra.Line, Col: extra.Column, Msg: "a second YAML document: a fleet file is one document"}}
	}
	f := &File{Path: path}
	var probs Problems
	if err := root.Decode(f); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, Problems{yamlError(path, err)}
		}
		for _, msg := range te.Errors {
			probs = append(probs, typeError(path, msg))
		}
	}
	f.Path = path
	walked, fields := f.walk(&root)
	probs = append(probs, walked...)
	for _, p := range probs {
		if at, ok := fields[p.Line]; ok && p.Field == "" && p.Line > 0 {
			p.Field, p.Col = at.field, at.col
		}
	}
	sum := sha256.Sum256(data)
	f.Digest = "sha256:" + hex.EncodeToString(sum[:])
	return f, probs.orNil()
}

// typeError reads yaml.v3's "line N: msg" of a value of the wrong type.
func typeError(path, msg string) *Error {
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return &Error{Path: path, Msg: msg}
	}
	var line int
	fmt.Sscan(m[1], &line)
	return &Error{Path: path, Line: line, Msg: m[2]}
}

// yamlError turns a YAML that does not parse into the problem at its line.
func yamlError(path string, err error) *Error {
	if errors.Is(err, errEOF) || err.Error() == "EOF" {
		return &Error{Path: path, Msg: "empty: a fleet file needs format and models"}
	}
	e := typeError(path, strings.TrimPrefix(err.Error(), "yaml: "))
	return e
}

var errEOF = errors.New("EOF")
