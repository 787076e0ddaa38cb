package stacks

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// stdoutWarnings counts the synth's stdout-sink warnings on stack.
func stdoutWarnings(t *testing.T, stack awscdk.Stack) int {
	t.Helper()
	msgs := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String(".*stdout sink sends every message through CloudWatch Logs.*")))
	var found []json.RawMessage
	raw, err := json.Marshal(msgs)
	if err == nil {
		err = json.Unmarshal(raw, &found)
	}
	if err != nil {
		t.Fatalf("warnings unreadable: %v", err)
	}
	return len(found)
}

// A deployment on the stdout sink is warned at synth that every message
// goes through CloudWatch Logs at its ingestion price; dev's default
// stdout and prod's sqs are not.
func TestSynthWarnsOfTheStdoutSinksBill(t *testing.T) {
	for name, c := range map[string]struct {
		ctx  map[string]any
		want int
	}{
		"prod-stdout": {map[string]any{CtxEnv: EnvProd, CtxSink: SinkStdout}, 1},
		"prod":        {env(EnvProd), 0},
		"dev":         {env(EnvDev), 0},
	} {
		t.Run(name, func(t *testing.T) {
			s := synth(t, c.ctx)
			if got := s.StdoutSinkWarnings; got != c.want {
				t.Errorf("%d stdout-sink warnings (sink %s), want %d", got, s.Cfg.Sink, c.want)
			}
		})
	}
}
