package trt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

// trtexec writes its JSON exports with hand-rolled ostream code, not a JSON
// library (trtexec-nvml.md §2.11): numbers use C++ default formatting, so a
// non-finite value comes out as nan, -nan, inf or -inf, which strict JSON
// decoders reject. tolerantJSON quotes such bare words so encoding/json can
// read the file and Num can turn them back into numbers.
func tolerantJSON(b []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(b) + 64)
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			out.WriteByte(c)
			switch c {
			case '\\':
				if i+1 < len(b) {
					i++
					out.WriteByte(b[i])
				}
			case '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
			out.WriteByte(c)
		case c >= '0' && c <= '9' || c == '.' || (c == '-' || c == '+') && i+1 < len(b) && (b[i+1] >= '0' && b[i+1] <= '9' || b[i+1] == '.'):
			// A number, exponent included ("1e-05").
			j := i + 1
			for j < len(b) && strings.IndexByte("0123456789.eE+-", b[j]) >= 0 {
				j++
			}
			out.Write(b[i:j])
			i = j - 1
		case isWordByte(c) || (c == '-' || c == '+') && i+1 < len(b) && isWordByte(b[i+1]):
			j := i + 1
			for j < len(b) && (isWordByte(b[j]) || b[j] >= '0' && b[j] <= '9' || b[j] == '(' || b[j] == ')' || b[j] == '_') {
				j++
			}
			w := b[i:j]
			switch string(w) {
			case "true", "false", "null":
				out.Write(w)
			default:
				out.WriteByte('"')
				out.Write(w)
				out.WriteByte('"')
			}
			i = j - 1
		default:
			out.WriteByte(c)
		}
	}
	return out.Bytes()
}

func isWordByte(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// Num is a number from a trtexec export: a JSON number, or one of the
// words C++ prints for non-finite values.
type Num float64

// UnmarshalJSON accepts a number or a quoted nan/inf word.
func (n *Num) UnmarshalJSON(b []byte) error {
	v, err := parseNumText(string(b), true)
	if err != nil {
		return err
	}
	*n = Num(v)
	return nil
}

// parseNumText reads a number as trtexec prints it; quoted is true when b
// may be a JSON string produced by tolerantJSON.
func parseNumText(s string, quoted bool) (float64, error) {
	if quoted && len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	w := strings.ToLower(s)
	switch {
	case strings.HasPrefix(w, "nan"), strings.HasPrefix(w, "-nan"), strings.HasPrefix(w, "+nan"):
		return math.NaN(), nil
	case w == "inf", w == "+inf", w == "infinity", w == "+infinity":
		return math.Inf(1), nil
	case w == "-inf", w == "-infinity":
		return math.Inf(-1), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", clip(s, 40))
	}
	return v, nil
}

func decodeTolerant(b []byte, v any) error {
	return json.Unmarshal(tolerantJSON(b), v)
}

// TimeRecord is one timed query of --exportTimes (warm-up queries are not
// exported). Times are ms from the start of the run; 8.0-8.2 also wrote
// endToEndMs.
type TimeRecord struct {
	StartEnqMs     float64  `json:"startEnqMs"`
	EndEnqMs       float64  `json:"endEnqMs"`
	StartH2DMs     float64  `json:"startH2dMs"`
	EndH2DMs       float64  `json:"endH2dMs"`
	StartComputeMs float64  `json:"startComputeMs"`
	EndComputeMs   float64  `json:"endComputeMs"`
	StartD2HMs     float64  `json:"startD2hMs"`
	EndD2HMs       float64  `json:"endD2hMs"`
	H2DMs          float64  `json:"h2dMs"`
	ComputeMs      float64  `json:"computeMs"`
	D2HMs          float64  `json:"d2hMs"`
	LatencyMs      float64  `json:"latencyMs"`
	EndToEndMs     *float64 `json:"endToEndMs,omitempty"`
}

// ReadTimes reads an --exportTimes file.
func ReadTimes(path string) ([]TimeRecord, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	recs, err := ParseTimes(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return recs, nil
}

// ParseTimes decodes --exportTimes JSON: an array with one object per
// query. TensorRT 7's field names (startInMs, inMs, …) are refused rather
// than misread.
func ParseTimes(b []byte) ([]TimeRecord, error) {
	// One struct per query, not a map: a fast engine records hundreds of
	// thousands of queries in a measurement.
	var raw []struct {
		StartEnqMs, EndEnqMs         Num
		StartH2DMs                   Num `json:"startH2dMs"`
		EndH2DMs                     Num `json:"endH2dMs"`
		StartComputeMs, EndComputeMs Num
		StartD2HMs                   Num `json:"startD2hMs"`
		EndD2HMs                     Num `json:"endD2hMs"`
		H2DMs                        Num `json:"h2dMs"`
		ComputeMs                    Num
		D2HMs                        Num `json:"d2hMs"`
		LatencyMs                    *Num
		EndToEndMs                   *Num
		StartInMs                    *Num // TensorRT 7
	}
	if err := decodeTolerant(b, &raw); err != nil {
		return nil, fmt.Errorf("exportTimes: %w", err)
	}
	out := make([]TimeRecord, 0, len(raw))
	for i, m := range raw {
		if m.LatencyMs == nil {
			if m.StartInMs != nil {
				return nil, fmt.Errorf("exportTimes: query %d uses TensorRT 7 field names (startInMs, …), not supported", i)
			}
			return nil, fmt.Errorf("exportTimes: query %d has no latencyMs", i)
		}
		r := TimeRecord{
			StartEnqMs: float64(m.StartEnqMs), EndEnqMs: float64(m.EndEnqMs),
			StartH2DMs: float64(m.StartH2DMs), EndH2DMs: float64(m.EndH2DMs),
			StartComputeMs: float64(m.StartComputeMs), EndComputeMs: float64(m.EndComputeMs),
			StartD2HMs: float64(m.StartD2HMs), EndD2HMs: float64(m.EndD2HMs),
			H2DMs: float64(m.H2DMs), ComputeMs: float64(m.ComputeMs), D2HMs: float64(m.D2HMs),
			LatencyMs: float64(*m.LatencyMs),
		}
		if m.EndToEndMs != nil {
			v := float64(*m.EndToEndMs)
			r.EndToEndMs = &v
		}
		out = append(out, r)
	}
	return out, nil
}

// Latencies returns each query's latency (H2D + compute + D2H; compute
// alone under --noDataTransfers) as durations, in query order: what
// backend.Summarise takes.
func Latencies(recs []TimeRecord) ([]time.Duration, error) {
	out := make([]time.Duration, len(recs))
	for i, r := range recs {
		if math.IsNaN(r.LatencyMs) || math.IsInf(r.LatencyMs, 0) || r.LatencyMs < 0 || r.LatencyMs > 1e9 {
			return nil, fmt.Errorf("exportTimes: query %d has latency %v ms", i, r.LatencyMs)
		}
		out[i] = time.Duration(r.LatencyMs * float64(time.Millisecond))
	}
	return out, nil
}

// ApplyStopRule replays backend.Measure's stopping rule on a trace that
// trtexec measured in one go: the first n ≥ MinSamples queries whose last
// Window have a coefficient of variation ≤ MaxCV ("stable"), else the
// first MaxSamples ("max_samples"), else all of them ("time_limit": trtexec
// ran for its duration). The statistics then mean the same as for a
// backend that Measure timed call by call.
func ApplyStopRule(batchSize int, durs []time.Duration, rule backend.StopRule) backend.Stats {
	n, reason := len(durs), backend.StopTimeLimit
	for i := 1; i <= len(durs); i++ {
		if i >= rule.MinSamples && i >= rule.Window && rule.Window >= 2 && windowCV(durs[i-rule.Window:i]) <= rule.MaxCV {
			n, reason = i, backend.StopStable
			break
		}
		if rule.MaxSamples > 0 && i >= rule.MaxSamples {
			n, reason = i, backend.StopMaxSamples
			break
		}
	}
	st := backend.Summarise(batchSize, durs[:n])
	st.StopReason = reason
	st.Short = n < rule.MinCalls
	// Stable describes the whole measurement, by backend's one rule.
	st.UnstableCause = st.Unstable(rule, 1, 1)
	st.Stable = st.UnstableCause == ""
	return st
}

// windowCV is the population coefficient of variation, as backend computes
// it.
func windowCV(durs []time.Duration) float64 {
	if len(durs) == 0 {
		return 0
	}
	var sum float64
	for _, d := range durs {
		sum += float64(d)
	}
	mean := sum / float64(len(durs))
	if mean == 0 {
		return 0
	}
	var ss float64
	for _, d := range durs {
		ss += (float64(d) - mean) * (float64(d) - mean)
	}
	return math.Sqrt(ss/float64(len(durs))) / mean
}

// OutputTensor is one tensor of an --exportOutput file: trtexec writes
// `{ "name" : "y", "dimensions" : "1x10", "values" : [ … ] }` per output,
// from the last query only, with C++ default formatting (six significant
// digits for floating point: close enough for the correctness check's
// tolerances; integers exact; bool as 0/1). The element type is not in the
// file: the caller knows it.
type OutputTensor struct {
	Name       string   `json:"name"`
	Dimensions string   `json:"dimensions"`
	Shape      []int64  `json:"shape"`
	Values     []string `json:"-"` // each value as printed
}

// ReadOutputs reads an --exportOutput file.
func ReadOutputs(path string) ([]OutputTensor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := ParseOutputs(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// ParseOutputs decodes --exportOutput JSON.
func ParseOutputs(b []byte) ([]OutputTensor, error) {
	var raw []struct {
		Name       *string           `json:"name"`
		Dimensions *string           `json:"dimensions"`
		Values     []json.RawMessage `json:"values"`
	}
	if err := decodeTolerant(b, &raw); err != nil {
		return nil, fmt.Errorf("exportOutput: %w", err)
	}
	out := make([]OutputTensor, 0, len(raw))
	for i, r := range raw {
		if r.Name == nil || r.Dimensions == nil {
			return nil, fmt.Errorf("exportOutput: tensor %d lacks a name or dimensions", i)
		}
		shape, err := parseDims(*r.Dimensions)
		if err != nil {
			return nil, fmt.Errorf("exportOutput: tensor %q: %w", *r.Name, err)
		}
		t := OutputTensor{Name: *r.Name, Dimensions: *r.Dimensions, Shape: shape, Values: make([]string, len(r.Values))}
		for k, v := range r.Values {
			s := string(v)
			if len(s) >= 2 && s[0] == '"' {
				s = s[1 : len(s)-1]
			}
			t.Values[k] = s
		}
		if n := bundle.NumElements(shape); n != int64(len(t.Values)) {
			return nil, fmt.Errorf("exportOutput: tensor %q has dimensions %s (%d elements) but %d values", t.Name, t.Dimensions, n, len(t.Values))
		}
		out = append(out, t)
	}
	return out, nil
}

// parseDims reads "1x10" ("" or "scalar" for a 0-D tensor).
func parseDims(s string) ([]int64, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "scalar" {
		return []int64{}, nil
	}
	d, err := shapes.ParseShape(s)
	if err != nil {
		return nil, err
	}
	for _, v := range d {
		if v > 1<<40 {
			return nil, fmt.Errorf("dimension %d is too large", v)
		}
	}
	if bundle.NumElements(d) > 1<<34 || bundle.NumElements(d) < 0 {
		return nil, fmt.Errorf("dimensions %s are too large", s)
	}
	return d, nil
}

// Tensor converts the exported values into a tensor of dtype dt:
// little-endian bytes, as bundle.Tensor holds them.
func (o OutputTensor) Tensor(dt bundle.DType) (bundle.Tensor, error) {
	if !dt.Valid() {
		return bundle.Tensor{}, fmt.Errorf("output %q: unknown dtype %q", o.Name, dt)
	}
	size := dt.Size()
	data := make([]byte, len(o.Values)*size)
	for i, s := range o.Values {
		b := data[i*size : (i+1)*size]
		if err := encodeValue(b, dt, s); err != nil {
			return bundle.Tensor{}, fmt.Errorf("output %q value %d: %w", o.Name, i, err)
		}
	}
	return bundle.Tensor{Name: o.Name, DType: dt, Shape: append([]int64{}, o.Shape...), Data: data}, nil
}

func encodeValue(b []byte, dt bundle.DType, s string) error {
	if dt.IsFloat() {
		v, err := parseNumText(s, false)
		if err != nil {
			return err
		}
		bundle.PutFloat(b, dt, v)
		return nil
	}
	if dt == bundle.Bool {
		switch s {
		case "0", "false":
			b[0] = 0
		case "1", "true":
			b[0] = 1
		default:
			return fmt.Errorf("%q is not a bool", clip(s, 40))
		}
		return nil
	}
	var lo, hi int64
	unsigned := false
	switch dt {
	case bundle.Int8:
		lo, hi = math.MinInt8, math.MaxInt8
	case bundle.Uint8:
		lo, hi = 0, math.MaxUint8
	case bundle.Int16:
		lo, hi = math.MinInt16, math.MaxInt16
	case bundle.Uint16:
		lo, hi = 0, math.MaxUint16
	case bundle.Int32:
		lo, hi = math.MinInt32, math.MaxInt32
	case bundle.Uint32:
		lo, hi = 0, math.MaxUint32
	case bundle.Int64:
		lo, hi = math.MinInt64, math.MaxInt64
	case bundle.Uint64:
		unsigned = true
	}
	if unsigned {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a %s", clip(s, 40), dt)
		}
		binary.LittleEndian.PutUint64(b, v)
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < lo || v > hi {
		return fmt.Errorf("%q is not a %s", clip(s, 40), dt)
	}
	bundle.PutUint(b, len(b), uint64(v))
	return nil
}

// OutputsFor picks the exported tensors in the order of outs and converts
// each to its spec's dtype (float32 when the spec has none). An output the
// engine did not export is an error naming what it did export.
func OutputsFor(exported []OutputTensor, outs []backend.OutputSpec) ([]bundle.Tensor, error) {
	res := make([]bundle.Tensor, len(outs))
	for i, spec := range outs {
		k := -1
		for j := range exported {
			if exported[j].Name == spec.Name {
				k = j
				break
			}
		}
		if k < 0 {
			names := make([]string, len(exported))
			for j, e := range exported {
				names[j] = strconv.Quote(e.Name)
			}
			return nil, fmt.Errorf("trtexec exported no output %q (it exported %s)", spec.Name, strings.Join(names, ", "))
		}
		dt := spec.DType
		if dt == "" {
			dt = bundle.Float32
		}
		t, err := exported[k].Tensor(dt)
		if err != nil {
			return nil, err
		}
		res[i] = t
	}
	return res, nil
}

// ProfileExport is an --exportProfile file: the iteration count, then one
// entry per layer. medianMs exists from 8.4 on; percentage is nan when the
// total time is 0.
type ProfileExport struct {
	Count  int            `json:"count"`
	Layers []ProfileLayer `json:"layers"`
}

// ProfileLayer is one layer of an --exportProfile file.
type ProfileLayer struct {
	Name       string   `json:"name"`
	TimeMs     float64  `json:"timeMs"`
	AverageMs  float64  `json:"averageMs"`
	MedianMs   *float64 `json:"medianMs,omitempty"`
	Percentage float64  `json:"percentage"`
}

// ReadProfile reads an --exportProfile file.
func ReadProfile(path string) (*ProfileExport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := ParseProfile(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// ParseProfile decodes --exportProfile JSON: `[ { "count" : N }, { "name"
// : …, "timeMs" : …, "averageMs" : …, "medianMs" : …, "percentage" : … },
// … ]`.
func ParseProfile(b []byte) (*ProfileExport, error) {
	var raw []map[string]json.RawMessage
	if err := decodeTolerant(b, &raw); err != nil {
		return nil, fmt.Errorf("exportProfile: %w", err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("exportProfile: empty")
	}
	p := &ProfileExport{}
	var cnt Num
	c, ok := raw[0]["count"]
	if !ok {
		return nil, fmt.Errorf(`exportProfile: the first element is not { "count" : N }`)
	}
	if err := cnt.UnmarshalJSON(c); err != nil || cnt < 0 || cnt > math.MaxInt32 {
		return nil, fmt.Errorf("exportProfile: bad count %s", clip(string(c), 40))
	}
	p.Count = int(cnt)
	for i, m := range raw[1:] {
		var l ProfileLayer
		name, ok := m["name"]
		if !ok || json.Unmarshal(name, &l.Name) != nil {
			return nil, fmt.Errorf("exportProfile: layer %d has no name", i)
		}
		for key, dst := range map[string]*float64{"timeMs": &l.TimeMs, "averageMs": &l.AverageMs, "percentage": &l.Percentage} {
			if v, ok := m[key]; ok {
				var n Num
				if err := n.UnmarshalJSON(v); err != nil {
					return nil, fmt.Errorf("exportProfile: layer %q %s: %w", l.Name, key, err)
				}
				*dst = float64(n)
			}
		}
		if v, ok := m["medianMs"]; ok {
			var n Num
			if err := n.UnmarshalJSON(v); err != nil {
				return nil, fmt.Errorf("exportProfile: layer %q medianMs: %w", l.Name, err)
			}
			f := float64(n)
			l.MedianMs = &f
		}
		p.Layers = append(p.Layers, l)
	}
	return p, nil
}

// LayerInfo is an --exportLayerInfo file, the engine inspector's JSON.
// With --profilingVerbosity=detailed every layer is an object; otherwise
// layers are bare names.
type LayerInfo struct {
	Layers   []LayerDesc `json:"Layers"`
	Bindings []string    `json:"Bindings"`
}

// LayerDesc is one engine layer. Raw keeps the whole object: its other
// keys depend on the layer type.
type LayerDesc struct {
	Name          string          `json:"Name"`
	LayerType     string          `json:"LayerType,omitempty"`
	Inputs        []LayerTensor   `json:"Inputs,omitempty"`
	Outputs       []LayerTensor   `json:"Outputs,omitempty"`
	ParameterType string          `json:"ParameterType,omitempty"`
	TacticName    string          `json:"TacticName,omitempty"`
	TacticValue   string          `json:"TacticValue,omitempty"`
	StreamID      *int            `json:"StreamId,omitempty"` // 10.x
	Metadata      string          `json:"Metadata,omitempty"` // 10.x: ONNX node names joined by U+001E
	Raw           json.RawMessage `json:"-"`
}

// LayerTensor is an input or output of a layer.
type LayerTensor struct {
	Name       string  `json:"Name"`
	Location   string  `json:"Location,omitempty"` // 10.x
	Dimensions []int64 `json:"Dimensions"`
	Format     string  `json:"Format/Datatype"`
}

// UnmarshalJSON accepts a layer object or a bare layer name.
func (d *LayerDesc) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		*d = LayerDesc{}
		return json.Unmarshal(b, &d.Name)
	}
	type plain LayerDesc
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*d = LayerDesc(p)
	d.Raw = append(json.RawMessage{}, b...)
	return nil
}

// ONNXNodes splits Metadata into the ONNX nodes a layer came from.
func (d LayerDesc) ONNXNodes() []string {
	if d.Metadata == "" {
		return nil
	}
	return strings.Split(d.Metadata, "\x1e")
}

// ReadLayerInfo reads an --exportLayerInfo file.
func ReadLayerInfo(path string) (*LayerInfo, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var li LayerInfo
	if err := decodeTolerant(b, &li); err != nil {
		return nil, fmt.Errorf("%s: exportLayerInfo: %w", path, err)
	}
	return &li, nil
}
