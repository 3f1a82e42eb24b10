package provenance

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// A layout's envelopes say which layout they sign (internal parameter
// "layout") and, for the envelope of one file, which file ("layout_file").
const (
	layoutParam     = "layout"
	layoutFileParam = "layout_file"
)

// SignLayout signs what a directory fetch lays out in one layout (files:
// every file by its slash-separated path there → its sha256) and returns
// the lines of the layout's attestation: first one envelope whose
// Statement names every file (what `producer verify` checks a directory
// against), then one envelope per file, sorted by path, whose Statement
// names that file alone. The single-file envelopes are for verifiers that
// match a file to a Statement by its digest only (cosign's
// verify-blob-attestation): the envelope picked by the file's path says
// which bytes belong there, so two files swapped are refused. Every
// Statement carries the run's SLSA provenance predicate.
func SignLayout(ctx context.Context, s *Signer, r Run, layout string, files map[string]string) ([]byte, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("provenance: layout %s: no files", layout)
	}
	base, err := Statement(r)
	if err != nil {
		return nil, err
	}
	names := slices.Sorted(maps.Keys(files))
	var out bytes.Buffer
	sign := func(file string, subjects []string) error {
		stmt := proto.Clone(base).(*intoto.Statement)
		stmt.Subject = nil
		for _, n := range subjects {
			stmt.Subject = append(stmt.Subject, &intoto.ResourceDescriptor{Name: n, Digest: map[string]string{"sha256": files[n]}})
		}
		intl := stmt.GetPredicate().GetFields()["buildDefinition"].GetStructValue().GetFields()["internalParameters"].GetStructValue()
		if intl == nil {
			return fmt.Errorf("provenance: layout %s: the predicate has no internal parameters", layout)
		}
		intl.Fields[layoutParam] = structpb.NewStringValue(layout)
		if file != "" {
			intl.Fields[layoutFileParam] = structpb.NewStringValue(file)
		}
		if err := stmt.Validate(); err != nil {
			return fmt.Errorf("provenance: layout %s: %w", layout, err)
		}
		line, err := signStatement(ctx, s, stmt)
		if err != nil {
			return err
		}
		out.Write(line)
		return nil
	}
	if err := sign("", names); err != nil {
		return nil, err
	}
	for _, n := range names {
		if err := sign(n, []string{n}); err != nil {
			return nil, err
		}
	}
	return out.Bytes(), nil
}

// VerifyLayout checks a layout's attestation (what names it in messages)
// against the verify keys and returns its envelope that names every file
// of the layout given: Subjects maps each path to its sha256.
func VerifyLayout(ctx context.Context, what string, jsonl []byte, keys []*Verifier, layout string) (*Verified, error) {
	v, err := verifyWhere(ctx, what, jsonl, keys, PredicateType, func(s *intoto.Statement) bool {
		p := internalParams(s)
		return p[layoutParam].GetStringValue() == layout && p[layoutFileParam] == nil
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// LayoutOf is the layout a verified Statement signs ("" for a run's own
// Statement, which names the store's layout).
func (v *Verified) LayoutOf() string {
	return internalParams(v.Statement)[layoutParam].GetStringValue()
}

func internalParams(s *intoto.Statement) map[string]*structpb.Value {
	return s.GetPredicate().GetFields()["buildDefinition"].GetStructValue().GetFields()["internalParameters"].GetStructValue().GetFields()
}
