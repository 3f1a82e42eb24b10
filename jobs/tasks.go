package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hibiken/asynq"
)

// Task types.
const (
	TypeGraph    = "tune:graph"
	TypeFinalize = "tune:finalize"
)

// PayloadVersion is the version of the task payloads below.
const PayloadVersion = 1

// GraphPayload is the payload of a tune:graph task: keys, never data. The
// worker reads the rest from the run's run.json.
type GraphPayload struct {
	V       int    `json:"v"`
	Run     string `json:"run"`
	Graph   string `json:"graph"`
	WorkKey string `json:"work_key"`
	// EnqueuedAt is when the task was enqueued: the worker's queue-wait
	// metric runs from it to the first attempt's start.
	EnqueuedAt time.Time `json:"enqueued_at,omitzero"`
}

// FinalizePayload is the payload of a tune:finalize task.
type FinalizePayload struct {
	V   int    `json:"v"`
	Run string `json:"run"`
}

// GraphTaskID is deterministic, so that re-submitting a run enqueues
// nothing (asynq refuses a second task with the same ID).
func GraphTaskID(run, graph string) string { return "tunefleet:graph:" + run + ":" + graph }

// FinalizeTaskID is deterministic, so that finalize is enqueued once per
// generation. A generation ends when its task is archived or completed
// without the run becoming final (asynq keeps such a task, and its ID
// refuses every later enqueue): the next enqueue takes the next generation
// (enqueueFinalize). Generation 0 is the ID of earlier versions.
func FinalizeTaskID(run string, gen int) string {
	if gen == 0 {
		return "tunefleet:finalize:" + run
	}
	return fmt.Sprintf("tunefleet:finalize:%s:%d", run, gen)
}

// maxRetry is what asynq is told of every task's retries: in effect none.
// Retries are budgeted by time (WorkerConfig.RetryBudget) and deaths
// (WorkerConfig.MaxDeaths), which the worker enforces; a count would
// archive a task during an outage, or on its last hand-back to another
// platform, without anyone recording its graph.
const maxRetry = 1 << 20

var targetRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// CheckTarget validates a target class, which is also the queue name
// ("cpu", "gpu.h100"). asynq queue names must not hold '{' or '}'.
func CheckTarget(t string) error {
	if !targetRE.MatchString(t) {
		return fmt.Errorf("target %q must be lowercase letters, digits and ._- (e.g. cpu, gpu.h100)", t)
	}
	return nil
}

// Queue is the asynq queue of a target class.
func Queue(target string) string { return target }

// newGraphTask builds the task of one graph. Its timeout grows with the
// number of candidates: every candidate may build, check and benchmark. It
// is twice that, since a prefetched task (WorkerConfig.Prefetch) may wait
// for the task ahead of it in its worker to tune first; a hang is still
// caught sooner, by the per-candidate timeout the tuner enforces.
// GraphTaskTimeout is a tune:graph task's deadline for a run of candidates
// candidates of perCandidate each (see newGraphTask). A deployment that
// bounds a worker's life (a Job's activeDeadlineSeconds) must allow this
// and the shutdown after it, or it cuts builds asynq would let finish.
func GraphTaskTimeout(perCandidate time.Duration, candidates int) time.Duration {
	return 2*perCandidate*time.Duration(candidates) + 10*time.Minute
}

func newGraphTask(p GraphPayload, target string, perCandidate time.Duration, candidates int) (*asynq.Task, []asynq.Option, error) {
	if p.EnqueuedAt.IsZero() {
		p.EnqueuedAt = time.Now().UTC()
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, nil, err
	}
	timeout := GraphTaskTimeout(perCandidate, candidates)
	return asynq.NewTask(TypeGraph, b), []asynq.Option{
		asynq.Queue(Queue(target)),
		asynq.TaskID(GraphTaskID(p.Run, p.Graph)),
		asynq.MaxRetry(maxRetry),
		asynq.Timeout(timeout),
	}, nil
}

func newFinalizeTask(run, target string, gen int) (*asynq.Task, []asynq.Option, error) {
	b, err := json.Marshal(FinalizePayload{V: PayloadVersion, Run: run})
	if err != nil {
		return nil, nil, err
	}
	return asynq.NewTask(TypeFinalize, b), []asynq.Option{
		asynq.Queue(Queue(target)),
		asynq.TaskID(FinalizeTaskID(run, gen)),
		asynq.MaxRetry(maxRetry),
		asynq.Timeout(10 * time.Minute),
	}, nil
}

// RunID names a run after what determines its outcome, so that submitting
// the same bundle with the same settings again is recognised as the same
// run. salt is empty except for --force, which makes a new run.
func RunID(model, bundleDigest, target, strategy string, budgetMs float64, candidates []string, salt string) string {
	h := sha256.New()
	fmt.Fprintf(h, "run/v1\x00%s\x00%s\x00%s\x00%s\x00%g\x00%s\x00%s", model, bundleDigest, target, strategy, budgetMs, strings.Join(candidates, ","), salt)
	return model + "-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// WorkKey is the content digest of everything that determines one graph's
// result on a target: the graph's files, its declaration, the candidates,
// the strategy and the result schema version.
func WorkKey(graphDigest, target, strategy string, budgetMs float64, candidates []string, resultFormat string) string {
	h := sha256.New()
	fmt.Fprintf(h, "work/v1\x00%s\x00%s\x00%s\x00%g\x00%s\x00%s", graphDigest, target, strategy, budgetMs, strings.Join(candidates, ","), resultFormat)
	return hex.EncodeToString(h.Sum(nil))
}
