package provenance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tunefleet/tunefleet/state"
)

// The names and types this package writes.
const (
	// PayloadType is the DSSE payload type of an in-toto Statement.
	PayloadType = "application/vnd.in-toto+json"
	// PredicateType is SLSA provenance v1.
	PredicateType = "https://slsa.dev/provenance/v1"
	// BuildType says how to read the build definition: a tunefleet run
	// (docs/deploy-tooling.md describes its parameters).
	BuildType = "https://github.com/tunefleet/tunefleet/blob/main/docs/deploy-tooling.md#provenance-v1"
	// BuilderID names what built the subjects: tunefleet's finalize.
	BuilderID = "https://github.com/tunefleet/tunefleet/finalize"

	// StateSubject is the subject name of the state blob (state.json).
	StateSubject = "state.json"
)

// EngineSubject is the subject name of a graph's engine.
func EngineSubject(graph, file string) string { return path.Join("engines", graph, path.Base(file)) }

// CheckpointSubject is the subject name of a file of the AITune
// checkpoint, relative to the checkpoint's folder.
func CheckpointSubject(rel string) string { return "aitune/" + rel }

// Run is what finalize knows of a run, for its Statement.
type Run struct {
	State     *state.State
	StateData []byte // the exact bytes of state.json (the state blob)
	// Build definition beyond what the state's provenance block says.
	Tolerances       map[string]any // graph → output → {atol, rtol}, as the bundle gives them
	BenchTime        time.Duration
	CandidateTimeout time.Duration
	// Graphs are the run details of each graph: how and on what it was
	// tuned.
	Graphs []GraphRun
}

// GraphRun is how one graph was tuned.
type GraphRun struct {
	Graph      string
	Platform   string
	Reused     bool // taken from the result index
	BatchSizes []int
	StartedAt  time.Time
	Duration   time.Duration
	Toolchain  map[string]string // what the winner's backend reported (versions, provider)
}

// Statement builds the in-toto Statement of a finished (done) run.
func Statement(r Run) (*intoto.Statement, error) {
	st := r.State
	if st == nil || len(r.StateData) == 0 {
		return nil, fmt.Errorf("provenance: no state")
	}
	sum := sha256.Sum256(r.StateData)
	subjects := []*intoto.ResourceDescriptor{{
		Name: StateSubject, Digest: map[string]string{"sha256": hex.EncodeToString(sum[:])}, MediaType: "application/json",
	}}
	for _, g := range st.Graphs {
		if g.Engine == nil {
			continue
		}
		subjects = append(subjects, &intoto.ResourceDescriptor{
			Name: EngineSubject(g.Name, g.Engine.File), Digest: map[string]string{"sha256": g.Engine.SHA256},
		})
	}
	if cp := st.AITune; cp != nil && cp.Error == "" && cp.Skipped == "" {
		for _, f := range cp.Files {
			subjects = append(subjects, &intoto.ResourceDescriptor{
				Name: CheckpointSubject(f.Path), Digest: map[string]string{"sha256": f.SHA256},
			})
		}
	}
	p := st.Provenance
	graphs := make([]any, 0, len(st.Graphs))
	for _, g := range st.Graphs {
		graphs = append(graphs, g.Name)
	}
	cands := make([]any, len(p.Candidates))
	for i, c := range p.Candidates {
		cands[i] = c
	}
	ext := map[string]any{
		"model":         st.Model,
		"target":        p.Target,
		"bundle_digest": p.BundleDigest,
		"graphs":        graphs,
		"candidates":    cands,
		"strategy":      p.Strategy,
		"bench": map[string]any{
			"bench_time":        r.BenchTime.String(),
			"candidate_timeout": r.CandidateTimeout.String(),
		},
	}
	if p.LatencyBudgetMs != 0 {
		ext["latency_budget_ms"] = p.LatencyBudgetMs
	}
	if len(r.Tolerances) > 0 {
		ext["tolerances"] = r.Tolerances
	}
	extS, err := toStruct(ext)
	if err != nil {
		return nil, fmt.Errorf("provenance: external parameters: %w", err)
	}
	// Nothing local: no command line (it names key and store paths), no
	// user or host. What reproduces the result is the bundle, the
	// settings above and the toolchains of the byproducts.
	intl := map[string]any{"run": st.Run, "platform": st.Platform}
	intlS, err := toStruct(intl)
	if err != nil {
		return nil, fmt.Errorf("provenance: internal parameters: %w", err)
	}
	var byproducts []*intoto.ResourceDescriptor
	for _, g := range r.Graphs {
		// Not the worker: its name is a host's (a pod, a machine).
		ann := map[string]any{
			"platform":   g.Platform,
			"reused":     g.Reused,
			"started_at": g.StartedAt.UTC().Format(time.RFC3339Nano),
			"duration":   g.Duration.String(),
		}
		if len(g.BatchSizes) > 0 {
			bs := make([]any, len(g.BatchSizes))
			for i, b := range g.BatchSizes {
				bs[i] = float64(b)
			}
			ann["batch_sizes"] = bs
		}
		if len(g.Toolchain) > 0 {
			tc := map[string]any{}
			for k, v := range g.Toolchain {
				// The timing cache's fate is operations, not toolchain, and
				// its failures quote the store's address.
				if !strings.HasPrefix(k, "timing_cache") {
					tc[k] = v
				}
			}
			ann["toolchain"] = tc
		}
		a, err := toStruct(ann)
		if err != nil {
			return nil, fmt.Errorf("provenance: graph %s: %w", g.Graph, err)
		}
		byproducts = append(byproducts, &intoto.ResourceDescriptor{Name: "graphs/" + g.Graph, Annotations: a})
	}
	sort.Slice(byproducts, func(i, j int) bool { return byproducts[i].Name < byproducts[j].Name })
	var deps []*intoto.ResourceDescriptor
	if alg, hexd, ok := splitDigest(p.BundleDigest); ok {
		deps = append(deps, &intoto.ResourceDescriptor{Name: "bundle", Digest: map[string]string{alg: hexd}})
	}
	version := map[string]string{"tunefleet": p.Tunefleet, "go": p.Go}
	pred := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{
			BuildType: BuildType, ExternalParameters: extS, InternalParameters: intlS, ResolvedDependencies: deps,
		},
		RunDetails: &slsa.RunDetails{
			Builder: &slsa.Builder{Id: BuilderID, Version: version},
			Metadata: &slsa.BuildMetadata{
				InvocationId: st.Run,
				StartedOn:    timestamppb.New(p.SubmittedAt),
				FinishedOn:   timestamppb.New(p.FinalizedAt),
			},
			Byproducts: byproducts,
		},
	}
	if err := pred.Validate(); err != nil {
		return nil, fmt.Errorf("provenance: predicate: %w", err)
	}
	predJSON, err := protojson.Marshal(pred)
	if err != nil {
		return nil, err
	}
	predS := &structpb.Struct{}
	if err := protojson.Unmarshal(predJSON, predS); err != nil {
		return nil, err
	}
	s := &intoto.Statement{Type: intoto.StatementTypeUri, Subject: subjects, PredicateType: PredicateType, Predicate: predS}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("provenance: statement: %w", err)
	}
	return s, nil
}

// Sign builds the run's Statement, signs it and returns the line of
// attestation.intoto.jsonl (the envelope's JSON and a newline).
func Sign(ctx context.Context, s *Signer, r Run) ([]byte, error) {
	stmt, err := Statement(r)
	if err != nil {
		return nil, err
	}
	return signStatement(ctx, s, stmt)
}

// signStatement signs a Statement into a DSSE envelope and returns its
// line (the envelope's JSON and a newline), as attestation files hold it.
func signStatement(ctx context.Context, s *Signer, stmt *intoto.Statement) ([]byte, error) {
	payload, err := protojson.Marshal(stmt)
	if err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	es, err := dsse.NewEnvelopeSigner(s)
	if err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	env, err := es.SignPayload(ctx, PayloadType, payload)
	if err != nil {
		return nil, fmt.Errorf("provenance: sign: %w", err)
	}
	line, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	return append(line, '\n'), nil
}

// toStruct turns plain JSON values into a structpb.Struct.
func toStruct(m map[string]any) (*structpb.Struct, error) {
	// Round-trip through JSON so that nested maps of other types (the
	// bundle's tolerances) become the plain values structpb takes.
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var plain map[string]any
	if err := json.Unmarshal(b, &plain); err != nil {
		return nil, err
	}
	return structpb.NewStruct(plain)
}

// splitDigest splits "sha256:<hex>" (a bundle digest).
func splitDigest(d string) (alg, hexd string, ok bool) {
	for i := 0; i < len(d); i++ {
		if d[i] == ':' {
			return d[:i], d[i+1:], i > 0 && i < len(d)-1
		}
	}
	return "", "", false
}
