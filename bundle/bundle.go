package bundle

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tunefleet/tunefleet/internal/fsutil"
	"github.com/tunefleet/tunefleet/shapes"
)

// Bundle is an opened, validated bundle directory.
type Bundle struct {
	Dir      string
	Manifest Manifest
	// IO holds each graph's inputs and outputs as its ONNX file declares
	// them, keyed by graph name.
	IO map[string]GraphIO

	badShapes bool // dynamic_shapes did not validate: sizes are not derived from it
	// verified holds the digests of files checked right before Open (see
	// OpenVerified), by bundle-relative path; nil for a plain Open.
	verified map[string]FileDigest
	// res resolves its paths (Resolve), remembering its directories.
	res *resolver
}

// resolve is Resolve(b.Dir, rel), through the bundle's resolver.
func (b *Bundle) resolve(rel string) (string, error) {
	if b.res == nil || b.res.root != b.Dir {
		return Resolve(b.Dir, rel)
	}
	return b.res.resolve(rel)
}

// Sample is one recorded call of a graph spec: its inputs and the original
// model's outputs, in the order the graph declares them.
type Sample struct {
	Dir     string // bundle-relative directory
	Inputs  []Tensor
	Outputs []Tensor
}

// InvalidError lists every problem found in a bundle.
type InvalidError struct {
	Dir      string
	Problems []string
}

func (e *InvalidError) Error() string {
	if len(e.Problems) == 1 {
		return fmt.Sprintf("bundle %s is invalid: %s", e.Dir, e.Problems[0])
	}
	return fmt.Sprintf("bundle %s is invalid (%d problems):\n  - %s", e.Dir, len(e.Problems), strings.Join(e.Problems, "\n  - "))
}

// Open reads and validates the bundle in dir.
func Open(dir string) (*Bundle, error) { return open(dir, nil) }

// OpenVerified opens a bundle whose files were just checked against the
// digests in files, by a caller that knows the bundle was validated in
// full before (a worker's download, each file verified against run.json
// of a submission that Open validated). It trusts those digests instead of
// hashing the files again (Files, GraphFiles and Digest use them while a
// file keeps its size), and it does not decode the samples, which the
// tuner decodes and checks anyway (Samples) when it loads them.
//
// What protects memory and the machine is still checked, since the
// manifest comes back from shared storage: every limit on names, counts
// and sizes, the graph's declaration against its ONNX file (walked without
// reading its weights), and that external data stays inside the bundle.
func OpenVerified(dir string, files []FileDigest) (*Bundle, error) {
	known := make(map[string]FileDigest, len(files))
	for _, f := range files {
		known[clean(f.Path)] = f
	}
	return open(dir, known)
}

func open(dir string, verified map[string]FileDigest) (*Bundle, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("open bundle: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("open bundle: %s is not a directory (a bundle is a directory with %s at its root)", dir, ManifestName)
	}
	if fi, err := os.Stat(filepath.Join(dir, ManifestName)); err == nil && fi.Size() > MaxManifestBytes {
		return nil, &InvalidError{Dir: dir, Problems: []string{fmt.Sprintf("%s is %d bytes, more than the limit of %d MiB", ManifestName, fi.Size(), MaxManifestBytes>>20)}}
	}
	raw, err := fsutil.ReadRegular(filepath.Join(dir, ManifestName))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, &InvalidError{Dir: dir, Problems: []string{"no " + ManifestName + " at its root"}}
		}
		if errors.Is(err, fsutil.ErrNotRegular) {
			return nil, &InvalidError{Dir: dir, Problems: []string{err.Error()}}
		}
		return nil, fmt.Errorf("open bundle: %w", err)
	}
	m, err := ParseManifest(raw)
	if err != nil {
		if me := (*ManifestError)(nil); errors.As(err, &me) {
			return nil, &InvalidError{Dir: dir, Problems: me.Problems}
		}
		return nil, &InvalidError{Dir: dir, Problems: []string{err.Error()}}
	}
	b := &Bundle{Dir: dir, Manifest: m, IO: map[string]GraphIO{}, verified: verified, res: newResolver(dir)}
	if probs := b.validate(); len(probs) > 0 {
		return nil, &InvalidError{Dir: dir, Problems: probs}
	}
	return b, nil
}

// IsInvalid reports whether err says a bundle is invalid (as opposed to,
// say, unreadable because of the disk).
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._ ()-]*$`)

// CheckModelName reports whether name can name a model: it becomes part of
// run ids, store keys and AITune checkpoint names.
func CheckModelName(name string) error {
	if name == "" {
		return fmt.Errorf("model is empty (name the model, e.g. \"my_package.MyModel\")")
	}
	if len(name) > MaxModelNameBytes {
		return fmt.Errorf("model name is %d bytes, more than the limit of %d bytes (it is part of store keys, which S3 caps at 1,024 bytes)", len(name), MaxModelNameBytes)
	}
	if strings.ContainsAny(name, "/\\") || !nameRE.MatchString(name) {
		return fmt.Errorf("model %q must be letters, digits and ._-() (AITune replaces '/' with '_')", name)
	}
	return nil
}

// validate returns every problem the schema cannot see, each naming where
// it is: the model and graph names' byte limits, cross-references, and
// everything that needs the files.
func (b *Bundle) validate() []string {
	var probs []string
	add := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	m := b.Manifest // its structure (format, types, dtypes, axis labels, signs) passed the schema
	if err := CheckModelName(m.Model); err != nil {
		add("%v", err)
	}
	if len(m.Graphs) == 0 {
		add("graphs is empty: a bundle needs at least one graph spec")
	}
	if len(m.Graphs) > MaxGraphs {
		add("%d graphs, more than the limit of %d per bundle (split the bundle)", len(m.Graphs), MaxGraphs)
		return probs
	}
	if err := m.DynamicShapes.Validate(); err != nil {
		add("%v", err)
		b.badShapes = true
	}
	for _, name := range slices.Sorted(maps.Keys(m.DynamicShapes)) {
		if !slices.ContainsFunc(m.Graphs, func(g Graph) bool { return containsDecl(g.Inputs, name) }) {
			add("dynamic_shapes names %q, which is not an input of any graph", name)
		}
	}
	seen := map[string]bool{}
	for i, g := range m.Graphs {
		where := fmt.Sprintf("graphs[%d]", i)
		if len(g.Name) > MaxGraphNameBytes {
			add("%s: name is %d bytes, more than the limit of %d bytes (it is part of store keys, which S3 caps at 1,024 bytes)", where, len(g.Name), MaxGraphNameBytes)
			continue
		}
		if g.Name == "" || !nameRE.MatchString(g.Name) || strings.Contains(g.Name, "..") {
			add("%s: name %q must be non-empty letters, digits and ._-() (AITune names graphs \"0\", \"1\", …)", where, g.Name)
			continue
		}
		where = fmt.Sprintf("graph %q", g.Name)
		if seen[g.Name] {
			add("%s: name is used twice", where)
			continue
		}
		seen[g.Name] = true
		probs = append(probs, b.validateGraph(where, &b.Manifest.Graphs[i])...)
	}
	if CheckModelName(m.Model) == nil {
		probs = append(probs, exportNameProblems(m.Model, slices.Sorted(maps.Keys(seen)))...)
	}
	return probs
}

// validateGraph checks one graph spec and fills in what Open derives from
// its files (the ONNX file's external data). The checks go in stages —
// the declarations, their sizes, the ONNX file, the samples — and stop at
// the first stage with problems: a later stage would only repeat them.
func (b *Bundle) validateGraph(where string, gp *Graph) []string {
	c := &graphCheck{b: b, g: *gp, where: where}
	if c.decls(); len(c.probs) > 0 {
		return c.probs
	}
	if !b.badShapes {
		for _, p := range b.checkSizes(c.g) {
			c.add("%s", p)
		}
		if len(c.probs) > 0 {
			return c.probs
		}
	}
	ext, ok := c.onnx()
	if !ok || len(c.probs) > 0 {
		return c.probs
	}
	gp.ExternalData = ext
	c.samples()
	return c.probs
}

// graphCheck collects one graph's problems, each prefixed with where.
type graphCheck struct {
	b     *Bundle
	g     Graph
	where string
	probs []string
}

func (c *graphCheck) add(format string, args ...any) {
	c.probs = append(c.probs, c.where+": "+fmt.Sprintf(format, args...))
}

// decls: the graph's tensor declarations, their counts and names, and the
// tolerances and dynamic shapes that refer to them.
func (c *graphCheck) decls() {
	g := c.g
	if len(g.Inputs) == 0 {
		c.add("no inputs declared (graphs without inputs cannot be tuned)")
	}
	if len(g.Outputs) == 0 {
		c.add("no outputs declared")
	}
	if n := len(g.Inputs) + len(g.Outputs); n > MaxTensors {
		c.add("%d inputs and outputs, more than the limit of %d per graph", n, MaxTensors)
		return
	}
	if len(g.Samples) > MaxSamples {
		c.add("%d samples, more than the limit of %d per graph", len(g.Samples), MaxSamples)
		return
	}
	names := map[string]bool{}
	for _, d := range append(append([]TensorDecl{}, g.Inputs...), g.Outputs...) {
		if d.Name == "" {
			c.add("a tensor has an empty name")
			continue
		}
		if len(d.Name) > MaxTensorNameBytes {
			c.add("a tensor name is %d bytes, more than the limit of %d bytes", len(d.Name), MaxTensorNameBytes)
			continue
		}
		if d.Rank() > MaxRank {
			c.add("tensor %q has rank %d, more than the limit of %d", d.Name, d.Rank(), MaxRank)
			continue
		}
		if names[d.Name] {
			c.add("tensor %q is declared twice", d.Name)
		}
		names[d.Name] = true
		if err := shapes.ValidateSpec(d.TensorSpec); err != nil {
			c.add("%v", err)
		}
	}
	for out := range g.Tolerances {
		if !containsDecl(g.Outputs, out) {
			c.add("tolerances name %q, which is not a declared output", out)
		}
	}
	for name, dims := range c.b.Manifest.DynamicShapes {
		if d, ok := findDecl(g.Inputs, name); ok && len(dims) != d.Rank() {
			c.add("dynamic_shapes[%q] has %d dims, the input has rank %d", name, len(dims), d.Rank())
		}
	}
}

// onnx: the ONNX file (size, graph I/O, external data inside the bundle
// and as long as its tensors) against the declarations. ok is false when
// the file could not be read far enough to say more.
func (c *graphCheck) onnx() (ext []string, ok bool) {
	g, b := c.g, c.b
	onnxPath, err := b.resolve(g.ONNX)
	if err != nil {
		c.add("onnx: %v", err)
		return nil, false
	}
	if fi, err := os.Stat(onnxPath); err == nil && fi.Size() > MaxONNXBytes {
		c.add("onnx %q is %d bytes, more than the limit of %s (protobuf's; keep the weights as ONNX external data)", g.ONNX, fi.Size(), gib(MaxONNXBytes))
		return nil, false
	}
	io, err := ReadGraphIO(onnxPath)
	if err != nil {
		c.add("onnx %q: %v", g.ONNX, strings.TrimPrefix(err.Error(), onnxPath+": "))
		return nil, false
	}
	b.IO[g.Name] = io
	ext, eprobs := resolveExternal(b, g.ONNX, io.ExternalData)
	for _, p := range eprobs {
		c.add("%s", p)
	}
	if len(eprobs) > 0 {
		return nil, false
	}
	if g.ExternalData != nil && !slices.Equal(cleanSorted(g.ExternalData), ext) {
		c.add("external_data lists %q, but the ONNX file's external data is %q (leave external_data out: it is derived)", g.ExternalData, ext)
		return nil, false
	}
	if p := checkExternalSizes(b, g.ONNX, io.ExternalSizes); len(p) > 0 {
		c.probs = append(c.probs, p...)
		return nil, false
	}
	c.probs = append(c.probs, checkAgainstONNX(c.where, "input", g.Inputs, io.Inputs)...)
	c.probs = append(c.probs, checkAgainstONNX(c.where, "output", g.Outputs, io.Outputs)...)
	return ext, true
}

// samples: at least one, each decodes and fits the declarations (unless a
// verified download leaves that to the tuner), within the size limit.
func (c *graphCheck) samples() {
	g, b := c.g, c.b
	if len(g.Samples) == 0 {
		c.add("no samples: every graph needs at least one recorded sample with reference outputs")
	}
	if b.verified != nil {
		return // decoded and checked by Samples, which the tuner calls
	}
	var setBytes int64
	for _, s := range g.Samples {
		smp, err := b.loadSample(g, s)
		if err != nil {
			c.add("%v", err)
			continue
		}
		for _, t := range append(append([]Tensor{}, smp.Inputs...), smp.Outputs...) {
			setBytes += int64(len(t.Data))
		}
		if setBytes > MaxSampleSetBytes {
			c.add("its samples hold more than %s, the limit per graph (bundle.MaxSampleSetBytes): record fewer or smaller samples", gib(MaxSampleSetBytes))
			break
		}
		for k, d := range g.Inputs {
			if dims, ok := b.Manifest.DynamicShapes[d.Name]; ok && !b.badShapes {
				if err := fitsExplicit(d.Name, dims, smp.Inputs[k].Shape); err != nil {
					c.add("sample %q: input_%d.pb: %v", s, k, err)
				}
			}
		}
	}
}

// fitsExplicit checks a recorded shape against the input's explicit dims, as
// AITune does per sample: static sizes equal, dynamic sizes within bounds.
func fitsExplicit(name string, dims []shapes.Dim, shape []int64) error {
	if len(dims) != len(shape) {
		return fmt.Errorf("tensor %q: sample has rank %d, dynamic_shapes has %d dims", name, len(shape), len(dims))
	}
	for i, d := range dims {
		switch {
		case d.IsStatic() && shape[i] != d.Size:
			return fmt.Errorf("tensor %q: sample axis %d is %d, dynamic_shapes fixes it at %d", name, i, shape[i], d.Size)
		case !d.IsStatic() && (shape[i] < d.Min || shape[i] > d.Max):
			return fmt.Errorf("tensor %q: sample axis %d is %d, outside dynamic_shapes dim %q [%d, %d]", name, i, shape[i], d.Name, d.Min, d.Max)
		}
	}
	return nil
}

// checkAgainstONNX compares declared tensors with the model's: same names in
// the same order (samples are matched by position, input_<k>.pb is the k-th
// input), same dtypes, same ranks, and declared bounds that respect the
// model's static dims.
func checkAgainstONNX(where, kind string, decls []TensorDecl, model []ValueInfo) []string {
	var probs []string
	add := func(format string, args ...any) { probs = append(probs, where+": "+fmt.Sprintf(format, args...)) }
	if len(decls) != len(model) {
		add("declares %d %ss %v, the ONNX graph has %d %v", len(decls), kind, declNames(decls), len(model), infoNames(model))
		return probs
	}
	for k, d := range decls {
		v := model[k]
		if d.Name != v.Name {
			add("%s %d is %q, the ONNX graph's %s %d is %q (declare them in the graph's order)", kind, k, d.Name, kind, k, v.Name)
			continue
		}
		if d.DType != v.DType {
			add("%s %q is declared %s, the ONNX graph says %s", kind, d.Name, d.DType, v.DType)
		}
		if !v.RankKnown() {
			continue
		}
		if len(v.Dims) != d.Rank() {
			add("%s %q is declared with rank %d, the ONNX graph says rank %d", kind, d.Name, d.Rank(), len(v.Dims))
			continue
		}
		for i, dim := range v.Dims {
			if dim >= 0 && (d.Min[i] != dim || d.Max[i] != dim) {
				add("%s %q axis %d is %d in the ONNX graph, but declared [%d, %d]", kind, d.Name, i, dim, d.Min[i], d.Max[i])
			}
		}
	}
	return probs
}

// Samples loads every recorded sample of a graph.
func (b *Bundle) Samples(graph string) ([]Sample, error) {
	g, ok := b.Manifest.Graph(graph)
	if !ok {
		return nil, fmt.Errorf("bundle %s has no graph %q", b.Dir, graph)
	}
	out := make([]Sample, 0, len(g.Samples))
	// The bound Open checks, checked here too: OpenVerified leaves the
	// samples to this function, and they are all held in memory at once.
	var setBytes int64
	for _, s := range g.Samples {
		smp, err := b.loadSample(g, s)
		if err != nil {
			return nil, err
		}
		for _, t := range append(append([]Tensor{}, smp.Inputs...), smp.Outputs...) {
			setBytes += int64(len(t.Data))
		}
		if setBytes > MaxSampleSetBytes {
			return nil, fmt.Errorf("graph %q: its samples hold more than %s, the limit per graph (bundle.MaxSampleSetBytes)", graph, gib(MaxSampleSetBytes))
		}
		out = append(out, smp)
	}
	return out, nil
}

var samplePB = regexp.MustCompile(`^(input|output)_(\d+)\.pb$`)

func (b *Bundle) loadSample(g Graph, rel string) (Sample, error) {
	dir, err := b.resolve(rel)
	if err != nil {
		return Sample{}, fmt.Errorf("sample %q: %w", rel, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Sample{}, fmt.Errorf("sample %q: %w", rel, err)
	}
	for _, e := range entries {
		m := samplePB.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		k, _ := strconv.Atoi(m[2])
		limit := len(g.Inputs)
		if m[1] == "output" {
			limit = len(g.Outputs)
		}
		if k >= limit {
			return Sample{}, fmt.Errorf("sample %q: %s has no matching %s (the graph declares %d)", rel, e.Name(), m[1], limit)
		}
	}
	s := Sample{Dir: rel}
	if s.Inputs, err = b.loadTensors(rel, "input", g.Inputs); err != nil {
		return Sample{}, err
	}
	if s.Outputs, err = b.loadTensors(rel, "output", g.Outputs); err != nil {
		return Sample{}, err
	}
	return s, nil
}

func (b *Bundle) loadTensors(rel, kind string, decls []TensorDecl) ([]Tensor, error) {
	root := b.Dir
	out := make([]Tensor, len(decls))
	for k, d := range decls {
		file := fmt.Sprintf("%s_%d.pb", kind, k)
		p, err := b.resolve(rel + "/" + file)
		if err != nil {
			if _, serr := os.Lstat(filepath.Join(root, filepath.FromSlash(rel), file)); os.IsNotExist(serr) {
				return nil, fmt.Errorf("sample %q: %s for %s %q is missing", rel, file, kind, d.Name)
			}
			return nil, fmt.Errorf("sample %q: %s for %s %q: %v", rel, file, kind, d.Name, err)
		}
		t, err := ReadTensorFile(p)
		if err != nil {
			return nil, fmt.Errorf("sample %q: %s: %v", rel, file, strings.TrimPrefix(err.Error(), p+": "))
		}
		// The ONNX test-data layout matches files to tensors by position;
		// the name inside the file is often empty or stale.
		t.Name = d.Name
		if t.DType != d.DType {
			return nil, fmt.Errorf("sample %q: %s holds %s, %s %q is declared %s", rel, file, t.DType, kind, d.Name, d.DType)
		}
		if err := d.Fits(t.Shape); err != nil {
			return nil, fmt.Errorf("sample %q: %s: %v", rel, file, err)
		}
		out[k] = t
	}
	return out, nil
}

func containsDecl(decls []TensorDecl, name string) bool { _, ok := findDecl(decls, name); return ok }

func findDecl(decls []TensorDecl, name string) (TensorDecl, bool) {
	for _, d := range decls {
		if d.Name == name {
			return d, true
		}
	}
	return TensorDecl{}, false
}

func declNames(decls []TensorDecl) []string {
	out := make([]string, len(decls))
	for i, d := range decls {
		out[i] = d.Name
	}
	return out
}

func infoNames(vs []ValueInfo) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Name
	}
	return out
}
