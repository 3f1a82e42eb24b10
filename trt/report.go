package trt

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Report is what the parser and classifier make of one trtexec log, for
// people debugging a build (`worker trt-log FILE [-o json]`).
type Report struct {
	File           string         `json:"file,omitempty"`
	Stage          Stage          `json:"stage"`
	Exit           ExitStatus     `json:"exit"`
	Log            *Log           `json:"log"`
	Classification Classification `json:"classification"`
}

// Describe parses a log and classifies it. With st.Unknown the exit status
// is inferred from the result line (PASSED 0, FAILED 1); with StageAuto the
// stage is inferred from the echoed command line.
func Describe(r io.Reader, st ExitStatus, stage Stage) (*Report, error) {
	l, err := Parse(r)
	if err != nil {
		return nil, err
	}
	if st.Unknown {
		st = InferExit(l)
	}
	if stage == StageAuto {
		stage = InferStage(l)
	}
	return &Report{Stage: stage, Exit: st, Log: l, Classification: Classify(l, st, stage)}, nil
}

// DescribeFile is Describe for a file whose exit status and stage are
// unknown: what `worker trt-log FILE` needs.
func DescribeFile(path string) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := Describe(f, ExitStatus{Code: -1, Unknown: true}, StageAuto)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.File = path
	return r, nil
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
