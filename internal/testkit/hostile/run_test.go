package hostile_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/tunefleet/tunefleet/internal/cli"
)

type cobraCommand = cobra.Command

// outcome is what one in-process run of a CLI did.
type outcome struct {
	args           []string
	code           int
	stdout, stderr string
}

func (o outcome) String() string {
	return fmt.Sprintf("%q: exit %d\n--- stdout:\n%s--- stderr:\n%s", o.args, o.code, o.stdout, o.stderr)
}

func run(t *testing.T, root *cobra.Command, args ...string) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Execute(root, args, &stdout, &stderr)
	return outcome{args: args, code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func protoMarshal(m proto.Message) ([]byte, error) { return proto.Marshal(m) }
