package stacks

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// The sessions' secret references: ingest is told the environment's
// prefix only with a host binding (-c secretHosts), which ingest and the
// workers both get; without one, neither gets either, and ingest takes no
// reference. The streamer task role may read the secrets under the prefix
// and no others (one statement, GetSecretValue only, on the prefix's ARNs);
// the ingest role reads no secret (without a signing secret).
func TestSessionSecretsGrant(t *testing.T) {
	for _, e := range allEnvs {
		t.Run(e, func(t *testing.T) {
			ingestVars := func(s *synthesized) map[string]any {
				fn := props(s.resources("AWS::Lambda::Function")[s.logicalID(s.W.Ingest)])
				vars, _ := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
				return vars
			}
			off := synth(t, env(e))
			vars, ce := ingestVars(off), containerEnv(t, off)
			for name, v := range map[string]any{
				"ingest " + schema.EnvSecretPrefix: vars[schema.EnvSecretPrefix], "ingest " + schema.EnvSecretHosts: vars[schema.EnvSecretHosts],
				"streamer " + schema.EnvSecretHosts: ce[schema.EnvSecretHosts],
			} {
				if v != nil {
					t.Errorf("without %s: %s = %v, want unset (no reference taken)", CtxSecretHosts, name, v)
				}
			}
			hosts := off.Cfg.SecretPrefix + "=stream.example.com," + "stream2.example.com:443"
			s := synth(t, map[string]any{CtxEnv: e, CtxSecretHosts: hosts})
			vars, ce = ingestVars(s), containerEnv(t, s)
			if vars[schema.EnvSecretPrefix] != s.Cfg.SecretPrefix || !strings.HasSuffix(s.Cfg.SecretPrefix, "/") {
				t.Errorf("ingest %s = %v, want %q", schema.EnvSecretPrefix, vars[schema.EnvSecretPrefix], s.Cfg.SecretPrefix)
			}
			if vars[schema.EnvSecretHosts] != hosts || ce[schema.EnvSecretHosts] != hosts {
				t.Errorf("%s: ingest %v, streamer %v, want %q in both", schema.EnvSecretHosts, vars[schema.EnvSecretHosts], ce[schema.EnvSecretHosts], hosts)
			}
			task := logicalIDOf(s, s.W.Service.TaskDefinition().TaskRole())
			ingest := logicalIDOf(s, s.W.Ingest.Role())
			var grants []string
			for _, r := range s.resources("AWS::IAM::Policy") {
				p := props(r)
				roles := asJSON(p["Roles"])
				for _, st := range asSlice(p["PolicyDocument"].(map[string]any)["Statement"]) {
					j := asJSON(st)
					if !strings.Contains(j, "secretsmanager:") {
						continue
					}
					switch {
					case strings.Contains(roles, ingest):
						t.Errorf("the ingest role may use Secrets Manager: %s", j)
					case strings.Contains(roles, task):
						grants = append(grants, j)
					}
				}
			}
			if len(grants) != 1 || !strings.Contains(grants[0], `"Action":"secretsmanager:GetSecretValue"`) ||
				!strings.Contains(grants[0], ":secret:"+s.Cfg.SecretPrefix+"*") {
				t.Errorf("task role's Secrets Manager statements %v: want one, GetSecretValue on %s*", grants, s.Cfg.SecretPrefix)
			}
		})
	}
}

// testSecretKey is a customer-managed key's ARN for the tests (the key
// need not exist: the grant names it, nothing reads it at synthesis).
const testSecretKey = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"

// TestSessionSecretsKeyGrant: with a customer-managed key for the session
// secrets (-c secretKmsKeyArn=), the task role may kms:Decrypt with exactly
// that key, only through Secrets Manager in the stack's region and only for
// the secrets under the prefix; without one, the task role has no KMS
// statement but the table key's (prod) and none about Secrets Manager;
// the ingest role never gets the key. cdk-nag stays clean with no new
// suppression.
func TestSessionSecretsKeyGrant(t *testing.T) {
	for _, e := range allEnvs {
		t.Run(e+"/without", func(t *testing.T) {
			s := synth(t, env(e))
			if s.Cfg.SecretKMSKeyARN != "" {
				t.Fatalf("%s has a default SecretKMSKeyARN %q: want none (aws/secretsmanager)", e, s.Cfg.SecretKMSKeyARN)
			}
			task := logicalIDOf(s, s.W.Service.TaskDefinition().TaskRole())
			for _, st := range s.statements() {
				if !slices.Contains(st.Roles, task) || !hasKMSAction(st) {
					continue
				}
				// The only KMS grant the task role may hold without the
				// setting is the table key's, through DynamoDB.
				if s.W.TableKey == nil || !strings.Contains(asJSON(st.Resources), `"`+s.logicalID(s.W.TableKey)+`"`) ||
					!strings.Contains(asJSON(st.Condition), "dynamodb.") || strings.Contains(asJSON(st), "secretsmanager") {
					t.Errorf("%s: the task role has a KMS statement other than the table key's: %s", st.Source, asJSON(st))
				}
			}
		})
	}
	t.Run("with", func(t *testing.T) {
		s := synth(t, map[string]any{CtxEnv: EnvProd, CtxSecretKMSKeyARN: testSecretKey})
		if s.Cfg.SecretKMSKeyARN != testSecretKey {
			t.Fatalf("SecretKMSKeyARN = %q, want the context's %q", s.Cfg.SecretKMSKeyARN, testSecretKey)
		}
		task := logicalIDOf(s, s.W.Service.TaskDefinition().TaskRole())
		ingest := logicalIDOf(s, s.W.Ingest.Role())
		secrets := map[string]any{"Fn::Join": []any{"", []any{
			"arn:", map[string]any{"Ref": "AWS::Partition"}, ":secretsmanager:", map[string]any{"Ref": "AWS::Region"},
			":", map[string]any{"Ref": "AWS::AccountId"}, ":secret:" + s.Cfg.SecretPrefix + "*",
		}}}
		wantCondition := map[string]any{
			"StringEquals": map[string]any{"kms:ViaService": map[string]any{"Fn::Join": []any{"", []any{
				"secretsmanager.", map[string]any{"Ref": "AWS::Region"}, ".amazonaws.com",
			}}}},
			"StringLike": map[string]any{"kms:EncryptionContext:SecretARN": secrets},
		}
		var grants []statement
		for _, st := range s.statements() {
			mentions := strings.Contains(asJSON(st), testSecretKey)
			switch {
			case slices.Contains(st.Roles, ingest) && (mentions || strings.Contains(asJSON(st), "secretsmanager")):
				t.Errorf("%s: the ingest role may use the secrets' key or Secrets Manager: %s", st.Source, asJSON(st))
			case slices.Contains(st.Roles, task) && mentions:
				grants = append(grants, st)
			case mentions:
				t.Errorf("%s: a statement of another principal names the secrets' key: %s", st.Source, asJSON(st))
			}
		}
		if len(grants) != 1 {
			t.Fatalf("task role statements on the secrets' key: %d, want 1: %s", len(grants), asJSON(grants))
		}
		g := grants[0]
		if g.Effect != "Allow" || asJSON(g.Actions) != asJSON(StreamerSecretKeyActions) || asJSON(g.Actions) != `["kms:Decrypt"]` ||
			asJSON(g.Resources) != asJSON(testSecretKey) || asJSON(g.Condition) != asJSON(wantCondition) {
			t.Errorf("task role's key statement:\n got  %s\n want Allow kms:Decrypt on %s with %s", asJSON(g), testSecretKey, asJSON(wantCondition))
		}
		// The same through the assertions API, the secrets statement beside
		// it unchanged (GetSecretValue on the same prefix the key's
		// condition names).
		noPanic(t, "task role: kms:Decrypt on the secrets' key through Secrets Manager", func() {
			s.Template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
				"Roles": []any{map[string]any{"Ref": task}},
				"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
					assertions.Match_ObjectLike(&map[string]any{
						"Sid": "SessionSecrets", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": secrets,
					}),
					assertions.Match_ObjectLike(&map[string]any{
						"Sid": "SessionSecretsKey", "Effect": "Allow", "Action": "kms:Decrypt", "Resource": testSecretKey,
						"Condition": assertions.Match_Exact(wantCondition),
					}),
				})},
			})
		})
		for _, f := range s.Nag {
			t.Errorf("unsuppressed cdk-nag finding with a secrets key: %s", f)
		}
		// The key adds no environment variable: the worker does not need
		// to know it (Secrets Manager picks the secret's key).
		for _, r := range s.resources("AWS::Lambda::Function") {
			if strings.Contains(asJSON(r), testSecretKey) {
				t.Errorf("a function's properties name the secrets' key: %s", asJSON(props(r)["Environment"]))
			}
		}
		for _, r := range s.resources("AWS::ECS::TaskDefinition") {
			if strings.Contains(asJSON(r), testSecretKey) {
				t.Error("the task definition names the secrets' key")
			}
		}
	})
}

// hasKMSAction reports whether st allows any kms: action.
func hasKMSAction(st statement) bool {
	for _, a := range st.Actions {
		if strings.HasPrefix(a, "kms:") {
			return true
		}
	}
	return false
}
