package stacks

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// tableGrant is one role's statements on the sessions table, by target:
// "table" (the table's own ARN) or "index/<name>".
type tableGrant struct {
	actions    map[string][]string // target -> actions
	conditions map[string][]any    // action on the table -> its statements' conditions
}

// tableGrants collects the Allow statements of role (a logical id) that
// name the sessions table or one of its indexes.
func tableGrants(t *testing.T, s *synthesized, role string) tableGrant {
	t.Helper()
	tableID := s.logicalID(s.W.Table)
	g := tableGrant{actions: map[string][]string{}, conditions: map[string][]any{}}
	for _, st := range s.statements() {
		if st.Effect != "Allow" || !slices.Contains(st.Roles, role) || !strings.Contains(asJSON(st.Resources), `"`+tableID+`"`) {
			continue
		}
		for _, r := range asSlice(st.Resources) {
			target := tableTarget(t, r, tableID)
			g.actions[target] = append(g.actions[target], st.Actions...)
			if target == "table" {
				for _, a := range st.Actions {
					g.conditions[a] = append(g.conditions[a], st.Condition)
				}
			}
		}
	}
	for k, acts := range g.actions {
		g.actions[k] = slices.Compact(slices.Sorted(slices.Values(acts)))
	}
	return g
}

// tableTarget names what resource r (a template ARN expression) is: the
// table itself ("table"), one named index ("index/<name>"), or anything
// else (reported, with a target no expectation has).
func tableTarget(t *testing.T, r any, tableID string) string {
	t.Helper()
	arn := asJSON(map[string]any{"Fn::GetAtt": []any{tableID, "Arn"}})
	if asJSON(r) == arn {
		return "table"
	}
	m, _ := r.(map[string]any)
	join := asSlice(m["Fn::Join"])
	if len(join) == 2 && join[0] == "" {
		parts := asSlice(join[1])
		if len(parts) == 2 && asJSON(parts[0]) == arn {
			if tail, ok := parts[1].(string); ok && strings.HasPrefix(tail, "/index/") && !strings.Contains(tail, "*") {
				return strings.TrimPrefix(tail, "/")
			}
		}
	}
	t.Errorf("table grant on %s: neither the table nor one named index", asJSON(r))
	return "other:" + asJSON(r)
}

// The expected table grants, written out here (not taken from grants.go):
// each role may do on the table, on each index and on each key prefix
// exactly what its code calls (grants.go lists the calls).
var (
	wantTaskTable = map[string][]string{
		"table":                             {"dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
		"index/" + schema.IndexByOwner:      {"dynamodb:Query"},
		"index/" + schema.IndexByUnowned:    {"dynamodb:Query"},
		"index/" + schema.IndexByWorkerList: {"dynamodb:Query"},
	}
	wantIngestTable = map[string][]string{
		"table":                             {"dynamodb:BatchGetItem", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:UpdateItem"},
		"index/" + schema.IndexByState:      {"dynamodb:Query"},
		"index/" + schema.IndexByWorkerList: {"dynamodb:Query"},
	}
	// The streamer writes whole items (PutItem) only to register its own
	// worker record: its key must start with worker#.
	wantWorkerPutCondition = map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": []any{schema.WorkerKeyPrefix + "*"}}}
	// Ingest deletes only spec items (the one a start superseded).
	wantSpecDeleteCondition = map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": []any{schema.SpecKeyPrefix + "*"}}}
)

// TestTableGrants: each role may Query only the indexes it reads, nothing
// queries the table's own key, and the streamer's PutItem is limited to
// worker# keys by dynamodb:LeadingKeys.
func TestTableGrants(t *testing.T) {
	for _, e := range allEnvs {
		t.Run(e, func(t *testing.T) {
			s := synth(t, env(e))
			task := logicalIDOf(s, s.W.Service.TaskDefinition().TaskRole())
			fn := logicalIDOf(s, s.W.Ingest.Role())

			tg := tableGrants(t, s, task)
			if asJSON(tg.actions) != asJSON(wantTaskTable) {
				t.Errorf("streamer task role on the table:\n got  %s\n want %s", asJSON(tg.actions), asJSON(wantTaskTable))
			}
			if slices.Contains(tg.actions["index/"+schema.IndexByState], "dynamodb:Query") {
				t.Errorf("the streamer may Query %s, which it never reads", schema.IndexByState)
			}
			puts := tg.conditions["dynamodb:PutItem"]
			if len(puts) != 1 || asJSON(puts[0]) != asJSON(wantWorkerPutCondition) {
				t.Errorf("streamer PutItem conditions %s, want exactly one statement with %s", asJSON(puts), asJSON(wantWorkerPutCondition))
			}
			for a, conds := range tg.conditions {
				for _, c := range conds {
					if a != "dynamodb:PutItem" && c != nil {
						t.Errorf("streamer %s carries a condition %s (only PutItem is narrowed)", a, asJSON(c))
					}
				}
			}

			ig := tableGrants(t, s, fn)
			if asJSON(ig.actions) != asJSON(wantIngestTable) {
				t.Errorf("ingest role on the table:\n got  %s\n want %s", asJSON(ig.actions), asJSON(wantIngestTable))
			}
			for _, ix := range []string{schema.IndexByOwner, schema.IndexByUnowned} {
				if _, ok := ig.actions["index/"+ix]; ok {
					t.Errorf("ingest may use %s, which it never reads", ix)
				}
			}
			if _, ok := ig.conditions["dynamodb:PutItem"]; ok {
				t.Error("ingest may PutItem (it creates items with conditional UpdateItems)")
			}
			if dels := ig.conditions["dynamodb:DeleteItem"]; len(dels) != 1 || asJSON(dels[0]) != asJSON(wantSpecDeleteCondition) {
				t.Errorf("ingest DeleteItem conditions %s, want exactly one statement with %s", asJSON(dels), asJSON(wantSpecDeleteCondition))
			}

			// The same facts through the assertions API: the streamer's
			// register statement as the template has it.
			noPanic(t, "streamer PutItem limited to worker# leading keys", func() {
				s.Template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
					"Roles": []any{map[string]any{"Ref": task}},
					"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
						"Action":    "dynamodb:PutItem",
						"Effect":    "Allow",
						"Condition": assertions.Match_Exact(wantWorkerPutCondition),
						"Resource":  map[string]any{"Fn::GetAtt": []any{s.logicalID(s.W.Table), "Arn"}},
					})})},
				})
			})
			if _, ok := panics(func() {
				s.Template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
					"Roles": []any{map[string]any{"Ref": task}},
					"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
						"Resource": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
							"Fn::Join": []any{"", []any{map[string]any{"Fn::GetAtt": []any{s.logicalID(s.W.Table), "Arn"}}, "/index/" + schema.IndexByState}},
						})}),
					})})},
				})
			}); !ok {
				t.Errorf("the streamer task role's policy names the %s index", schema.IndexByState)
			}
		})
	}
}
