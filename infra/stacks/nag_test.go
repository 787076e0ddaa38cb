package stacks

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// nagFindings are the unsuppressed cdk-nag AwsSolutions findings the
// synthesis of stack left as error or warning annotations, as
// "level path: message".
func nagFindings(stack awscdk.Stack) []string {
	ann := assertions.Annotations_FromStack(stack)
	match := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
	var out []string
	for level, msgs := range map[string]any{"error": ann.FindError(jsii.String("*"), match), "warning": ann.FindWarning(jsii.String("*"), match)} {
		// Read through JSON: the Go fields of cxapi.SynthesisMessage are
		// deprecated (the type moved to another package), its shape is not.
		var found []struct {
			ID    string `json:"id"`
			Entry struct {
				Data any `json:"data"`
			} `json:"entry"`
		}
		raw, err := json.Marshal(msgs)
		if err == nil {
			err = json.Unmarshal(raw, &found)
		}
		if err != nil {
			out = append(out, fmt.Sprintf("%s annotations unreadable: %v", level, err))
		}
		for _, m := range found {
			out = append(out, fmt.Sprintf("%s %s: %v", level, m.ID, m.Entry.Data))
		}
	}
	slices.Sort(out)
	return out
}

// wantSuppressions are the cdk-nag findings the stacks accept, as
// "rule[applies to]": a new suppression is a visible change here (and
// its reason is in the code, next to the resource).
var wantSuppressions = []string{
	"AwsSolutions-ECS2[]",
	"AwsSolutions-IAM5[Resource::*]",
	"AwsSolutions-SMG4[]",
}

// TestAwsSolutionsChecks: cdk-nag's AwsSolutions pack runs on both
// environments' stacks (NewWsfleetStack adds it) and leaves no
// unsuppressed error or warning; the suppressions are the known ones, each
// with a reason.
func TestAwsSolutionsChecks(t *testing.T) {
	for _, e := range allEnvs {
		t.Run(e, func(t *testing.T) {
			s := synth(t, env(e))
			for _, f := range s.Nag {
				t.Errorf("unsuppressed cdk-nag finding: %s", f)
			}
			// No stack-wide suppression: each sits on its resource.
			if meta, _ := s.JSON["Metadata"].(map[string]any); meta["cdk_nag"] != nil {
				t.Errorf("stack-wide cdk-nag suppressions: %s", asJSON(meta["cdk_nag"]))
			}
			got := map[string]bool{}
			for id, r := range s.JSON["Resources"].(map[string]any) {
				meta, _ := r.(map[string]any)["Metadata"].(map[string]any)
				nag, _ := meta["cdk_nag"].(map[string]any)
				for _, sup := range asSlice(nag["rules_to_suppress"]) {
					m := sup.(map[string]any)
					reason, _ := m["reason"].(string)
					if len(reason) < 60 {
						t.Errorf("%s: suppression of %v with a reason too short to review: %q", id, m["id"], reason)
					}
					got[fmt.Sprintf("%v%v", m["id"], strs(m["applies_to"]))] = true
				}
			}
			have := slices.Sorted(maps.Keys(got))
			want := slices.Sorted(slices.Values(append(slices.Clone(wantSuppressions),
				"AwsSolutions-IAM5["+SecretPrefixResource(s.Cfg.SecretPrefix)+"]")))
			if strings.Join(have, " ") != strings.Join(want, " ") {
				t.Errorf("cdk-nag suppressions %v, want %v", have, want)
			}
		})
	}
}

// The check is live: a queue without TLS-only access or a DLQ is reported
// (AwsSolutions-SQS3, SQS4), and suppress hides only the rule it names.
func TestAwsSolutionsChecksReport(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack := awscdk.NewStack(app, jsii.String("nag-probe"), nil)
	CheckCompliance(stack)
	q := awssqs.NewQueue(stack, jsii.String("Probe"), &awssqs.QueueProps{Encryption: awssqs.QueueEncryption_SQS_MANAGED})
	suppress(q, "AwsSolutions-SQS3", "a probe queue of this test: only SQS4 must still be reported")
	found := strings.Join(nagFindings(stack), "\n")
	if !strings.Contains(found, "AwsSolutions-SQS4") {
		t.Errorf("a queue without TLS-only access is not reported; findings:\n%s", found)
	}
	if strings.Contains(found, "AwsSolutions-SQS3") {
		t.Errorf("a suppressed finding is reported:\n%s", found)
	}
}
