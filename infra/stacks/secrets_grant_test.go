package stacks

import (
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// The sessions' secret references: ingest is told the environment's
// prefix, and the streamer task role may read the secrets under it and no
// others (one statement, GetSecretValue only, on the prefix's ARNs); the
// ingest role reads no secret (without a signing secret).
func TestSessionSecretsGrant(t *testing.T) {
	for _, e := range allEnvs {
		t.Run(e, func(t *testing.T) {
			s := synth(t, env(e))
			fn := props(s.resources("AWS::Lambda::Function")[s.logicalID(s.W.Ingest)])
			vars, _ := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
			if vars[schema.EnvSecretPrefix] != s.Cfg.SecretPrefix || !strings.HasSuffix(s.Cfg.SecretPrefix, "/") {
				t.Errorf("ingest %s = %v, want %q", schema.EnvSecretPrefix, vars[schema.EnvSecretPrefix], s.Cfg.SecretPrefix)
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
