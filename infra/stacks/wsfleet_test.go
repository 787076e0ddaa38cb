package stacks

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/suggest"
)

var allEnvs = []string{EnvDev, EnvProd}

func TestTableMatchesSchema(t *testing.T) {
	for _, e := range allEnvs {
		t.Run(e, func(t *testing.T) {
			s := synth(t, env(e))
			_, table := s.only(t, "AWS::DynamoDB::Table")
			p := props(table)
			want := map[string]any{
				"KeySchema": []any{map[string]any{"AttributeName": schema.AttrPk, "KeyType": "HASH"}},
				// shared/sessionitem.CreateTableInput, written out in schema
				// names (infra imports schema only).
				"GlobalSecondaryIndexes": []any{
					gsi(schema.IndexByState, schema.AttrIndexShard, schema.AttrPk, nil),
					gsi(schema.IndexByOwner, schema.AttrLeaseOwner, "", []string{schema.AttrLeaseEpoch, schema.AttrDesiredState, schema.AttrGeneration}),
					gsi(schema.IndexByUnowned, schema.AttrUnownedShard, schema.AttrPk, nil),
					gsi(schema.IndexByWorkerList, schema.AttrWorkerList, schema.AttrPk, nil),
				},
				"BillingMode":                      "PAY_PER_REQUEST",
				"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
				"TimeToLiveSpecification":          map[string]any{"AttributeName": schema.AttrExpiresAt, "Enabled": true},
			}
			for k, v := range want {
				if asJSON(p[k]) != asJSON(v) {
					t.Errorf("table %s = %s, want %s", k, asJSON(p[k]), asJSON(v))
				}
			}
			defs := map[string]string{}
			for _, d := range p["AttributeDefinitions"].([]any) {
				m := d.(map[string]any)
				defs[m["AttributeName"].(string)] = m["AttributeType"].(string)
			}
			wantDefs := map[string]string{
				schema.AttrPk:           schema.TypeString,
				schema.AttrIndexShard:   schema.TypeString,
				schema.AttrLeaseOwner:   schema.TypeString,
				schema.AttrUnownedShard: schema.TypeString,
				schema.AttrWorkerList:   schema.TypeString,
			}
			if asJSON(defs) != asJSON(wantDefs) {
				t.Errorf("AttributeDefinitions = %v, want %v", defs, wantDefs)
			}
		})
	}
}

// gsi is a GSI as the template writes it: string keys, KEYS_ONLY unless
// include names projected attributes.
func gsi(name, hash, sort string, include []string) map[string]any {
	ks := []any{map[string]any{"AttributeName": hash, "KeyType": "HASH"}}
	if sort != "" {
		ks = append(ks, map[string]any{"AttributeName": sort, "KeyType": "RANGE"})
	}
	proj := map[string]any{"ProjectionType": "KEYS_ONLY"}
	if len(include) > 0 {
		proj = map[string]any{"ProjectionType": "INCLUDE", "NonKeyAttributes": include}
	}
	return map[string]any{"IndexName": name, "KeySchema": ks, "Projection": proj}
}

// TestTableEncryption: prod encrypts the table (and so its PITR backups)
// with a rotated customer-managed key that only the two roles may use, and
// only through DynamoDB; dev keeps the AWS-owned key.
func TestTableEncryption(t *testing.T) {
	prod := synth(t, env(EnvProd))
	_, table := prod.only(t, "AWS::DynamoDB::Table")
	sse := asJSON(props(table)["SSESpecification"])
	keyID := prod.logicalID(prod.W.TableKey)
	if !strings.Contains(sse, `"SSEEnabled":true`) || !strings.Contains(sse, `"SSEType":"KMS"`) || !strings.Contains(sse, keyID) {
		t.Errorf("prod table SSESpecification = %s, want KMS with %s", sse, keyID)
	}
	_, key := prod.only(t, "AWS::KMS::Key")
	if props(key)["EnableKeyRotation"] != true || key["DeletionPolicy"] != "Retain" {
		t.Errorf("prod table key: rotation %v, DeletionPolicy %v", props(key)["EnableKeyRotation"], key["DeletionPolicy"])
	}
	for _, st := range prod.statements() {
		if strings.Contains(asJSON(st.Resources), keyID) && !strings.Contains(asJSON(st.Condition), "kms:ViaService") {
			t.Errorf("%s: key grant without a kms:ViaService condition: %s", st.Source, asJSON(st.Condition))
		}
	}
	dev := synth(t, env(EnvDev))
	if dev.W.TableKey != nil || len(dev.resources("AWS::KMS::Key")) != 0 {
		t.Error("dev has a table key")
	}
}

func TestRemovalAndDeletionProtection(t *testing.T) {
	prod := synth(t, env(EnvProd))
	_, table := prod.only(t, "AWS::DynamoDB::Table")
	if props(table)["DeletionProtectionEnabled"] != true {
		t.Errorf("prod table DeletionProtectionEnabled = %v, want true", props(table)["DeletionProtectionEnabled"])
	}
	if table["DeletionPolicy"] != "Retain" || table["UpdateReplacePolicy"] != "Retain" {
		t.Errorf("prod table policies = %v/%v, want Retain/Retain", table["DeletionPolicy"], table["UpdateReplacePolicy"])
	}
	if !*prod.W.Stack.TerminationProtection() {
		t.Error("prod stack has no termination protection")
	}
	for id, lg := range prod.resources("AWS::Logs::LogGroup") {
		if !strings.HasPrefix(id, "ApiAccessLogs") && lg["DeletionPolicy"] != "Retain" {
			t.Errorf("prod log group %s DeletionPolicy = %v, want Retain", id, lg["DeletionPolicy"])
		}
	}
	// Negative check through the assertions API: its helpers panic on a
	// mismatch, so a template without the property must make them panic.
	if _, ok := panics(func() {
		prod.Template.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]any{"DeletionPolicy": "Delete"})
	}); !ok {
		t.Error("prod: HasResource(table, DeletionPolicy=Delete) did not fail")
	}

	// Prod's table is pre-warmed (its write headroom sizes the fleet's claim
	// budget); dev's is a new on-demand table.
	if wt := asJSON(props(table)["WarmThroughput"]); wt != `{"WriteUnitsPerSecond":11000}` {
		t.Errorf("prod table WarmThroughput = %s, want 11,000 write units/s", wt)
	}

	dev := synth(t, env(EnvDev))
	_, table = dev.only(t, "AWS::DynamoDB::Table")
	if wt, ok := props(table)["WarmThroughput"]; ok {
		t.Errorf("dev table WarmThroughput = %s, want none", asJSON(wt))
	}
	if props(table)["DeletionProtectionEnabled"] == true || table["DeletionPolicy"] != "Delete" {
		t.Errorf("dev table: DeletionProtectionEnabled=%v DeletionPolicy=%v, want false/Delete",
			props(table)["DeletionProtectionEnabled"], table["DeletionPolicy"])
	}
	noPanic(t, "dev table is destroyed with the stack", func() {
		dev.Template.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]any{"DeletionPolicy": "Delete", "UpdateReplacePolicy": "Delete"})
	})
}

func TestQueues(t *testing.T) {
	for _, e := range allEnvs {
		t.Run(e, func(t *testing.T) {
			s := synth(t, env(e))
			workID, dlqID := s.logicalID(s.W.WorkQueue), s.logicalID(s.W.DLQ)
			work := props(s.resources("AWS::SQS::Queue")[workID])
			wantRedrive := map[string]any{
				"deadLetterTargetArn": map[string]any{"Fn::GetAtt": []any{dlqID, "Arn"}},
				"maxReceiveCount":     float64(s.Cfg.MaxReceiveCount),
			}
			if asJSON(work["RedrivePolicy"]) != asJSON(wantRedrive) {
				t.Errorf("work queue RedrivePolicy = %s, want %s", asJSON(work["RedrivePolicy"]), asJSON(wantRedrive))
			}
			if work["VisibilityTimeout"] != s.Cfg.WorkQueueVisible.Seconds() {
				t.Errorf("VisibilityTimeout = %v, want %v", work["VisibilityTimeout"], s.Cfg.WorkQueueVisible.Seconds())
			}
			for id, q := range s.resources("AWS::SQS::Queue") {
				if props(q)["SqsManagedSseEnabled"] != true {
					t.Errorf("queue %s is not SSE-SQS encrypted", id)
				}
			}
			if got := len(s.resources("AWS::SQS::QueuePolicy")); got != len(s.resources("AWS::SQS::Queue")) {
				t.Errorf("%d queue policies (TLS-only) for %d queues", got, len(s.resources("AWS::SQS::Queue")))
			}
		})
	}
}

func TestOutputQueue(t *testing.T) {
	dev := synth(t, env(EnvDev))
	if dev.W.OutputQueue != nil || len(dev.resources("AWS::SQS::Queue")) != 2 {
		t.Error("dev (stdout sink) has an output queue")
	}
	if _, ok := containerEnv(t, dev)[schema.EnvOutputQueueURL]; ok {
		t.Errorf("dev container has %s", schema.EnvOutputQueueURL)
	}

	fifo := synth(t, map[string]any{CtxEnv: EnvDev, CtxSink: SinkSQS, CtxOutputFIFO: "true"})
	if fifo.W.OutputQueue == nil {
		t.Fatal("sink=sqs has no output queue")
	}
	out := props(fifo.resources("AWS::SQS::Queue")[fifo.logicalID(fifo.W.OutputQueue)])
	if out["FifoQueue"] != true || out["DeduplicationScope"] != "messageGroup" || out["FifoThroughputLimit"] != "perMessageGroupId" {
		t.Errorf("output queue = %s, want a high-throughput FIFO queue", asJSON(out))
	}
	// Its consumers' poison messages go to a DLQ (FIFO, as the queue).
	outDLQ := props(fifo.resources("AWS::SQS::Queue")[fifo.logicalID(fifo.W.OutputDLQ)])
	wantRedrive := map[string]any{
		"deadLetterTargetArn": map[string]any{"Fn::GetAtt": []any{fifo.logicalID(fifo.W.OutputDLQ), "Arn"}},
		"maxReceiveCount":     float64(OutputMaxReceiveCount),
	}
	if asJSON(out["RedrivePolicy"]) != asJSON(wantRedrive) || outDLQ["FifoQueue"] != true || outDLQ["MessageRetentionPeriod"] != float64(14*24*3600) {
		t.Errorf("output queue RedrivePolicy %s, DLQ %s; want %s to a 14-day FIFO DLQ", asJSON(out["RedrivePolicy"]), asJSON(outDLQ), asJSON(wantRedrive))
	}
	ce := containerEnv(t, fifo)
	if ce[schema.EnvSink] != SinkSQS || ce[schema.EnvOutputQueueURL] == nil {
		t.Errorf("container env sink=%v output=%v", ce[schema.EnvSink], ce[schema.EnvOutputQueueURL])
	}

	prod := synth(t, env(EnvProd))
	if prod.W.OutputQueue == nil {
		t.Error("prod (sqs sink) has no output queue")
	}
}

// -c sink=kinesis creates one on-demand stream encrypted with the
// AWS-managed key and hands its ARN to the workers; no output queue.
func TestOutputStream(t *testing.T) {
	if synth(t, env(EnvDev)).W.OutputStream != nil {
		t.Error("dev (stdout sink) has an output stream")
	}
	s := synth(t, map[string]any{CtxEnv: EnvDev, CtxSink: SinkKinesis})
	if s.W.OutputStream == nil || s.W.OutputQueue != nil {
		t.Fatalf("sink=kinesis: stream %v, output queue %v", s.W.OutputStream != nil, s.W.OutputQueue != nil)
	}
	_, stream := s.only(t, "AWS::Kinesis::Stream")
	p := props(stream)
	mode, _ := p["StreamModeDetails"].(map[string]any)
	enc, _ := p["StreamEncryption"].(map[string]any)
	if mode["StreamMode"] != "ON_DEMAND" || enc["EncryptionType"] != "KMS" || enc["KeyId"] != "alias/aws/kinesis" {
		t.Errorf("stream = %s, want on-demand, encrypted with alias/aws/kinesis", asJSON(p))
	}
	if _, ok := p["ShardCount"]; ok {
		t.Errorf("an on-demand stream with a shard count: %s", asJSON(p))
	}
	ce := containerEnv(t, s)
	if ce[schema.EnvSink] != SinkKinesis || ce[schema.EnvOutputStream] == nil || ce[schema.EnvOutputQueueURL] != nil {
		t.Errorf("container env sink=%v stream=%v queue=%v", ce[schema.EnvSink], ce[schema.EnvOutputStream], ce[schema.EnvOutputQueueURL])
	}
	if got := asJSON(ce[schema.EnvSinkKinesisHashBuckets]); got != `"256"` {
		t.Errorf("%s = %s, want the on-demand stream's 256 buckets", schema.EnvSinkKinesisHashBuckets, got)
	}
	if !strings.Contains(asJSON(ce[schema.EnvOutputStream]), s.logicalID(s.W.OutputStream)) {
		t.Errorf("%s = %s, not the output stream", schema.EnvOutputStream, asJSON(ce[schema.EnvOutputStream]))
	}
}

// statement is one IAM policy statement and where it came from.
type statement struct {
	Source    string // resource logical id (and policy name)
	Roles     []string
	Effect    string
	Actions   []string
	Resources any
	Condition any
}

func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return nil
}

func refs(v any) []string {
	var out []string
	for _, e := range asSlice(v) {
		if m, ok := e.(map[string]any); ok {
			if r, ok := m["Ref"].(string); ok {
				out = append(out, r)
			}
		}
	}
	return out
}

func asSlice(v any) []any {
	if s, ok := v.([]any); ok {
		return s
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

// statements walks every policy document in the template: IAM policies,
// managed policies, inline role policies and resource policies.
func (s *synthesized) statements() []statement {
	var out []statement
	add := func(source string, roles []string, doc any) {
		d, _ := doc.(map[string]any)
		for _, st := range asSlice(d["Statement"]) {
			m := st.(map[string]any)
			out = append(out, statement{Source: source, Roles: roles, Effect: fmt.Sprint(m["Effect"]), Actions: strs(m["Action"]), Resources: m["Resource"], Condition: m["Condition"]})
		}
	}
	for id, r := range s.JSON["Resources"].(map[string]any) {
		res := r.(map[string]any)
		p := props(res)
		switch res["Type"] {
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy":
			add(id, refs(p["Roles"]), p["PolicyDocument"])
		case "AWS::IAM::Role":
			for _, pol := range asSlice(p["Policies"]) {
				add(id, []string{id}, pol.(map[string]any)["PolicyDocument"])
			}
		case "AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy":
			add(id, nil, p["PolicyDocument"])
		}
	}
	return out
}

// logicalIDOf is s.logicalID, kept for the callers that name it so.
func logicalIDOf(s *synthesized, c constructs.IConstruct) string { return s.logicalID(c) }

func TestLeastPrivilegeIAM(t *testing.T) {
	cases := map[string]map[string]any{
		"dev":           env(EnvDev),
		"prod":          env(EnvProd),
		"dev-fifo-sqs":  {CtxEnv: EnvDev, CtxSink: SinkSQS, CtxOutputFIFO: "true"},
		"dev-kinesis":   {CtxEnv: EnvDev, CtxSink: SinkKinesis},
		"dev-auth-none": {CtxEnv: EnvDev, CtxAuth: AuthNone},
	}
	for name, ctx := range cases {
		t.Run(name, func(t *testing.T) {
			s := synth(t, ctx)
			data := map[string]string{
				s.logicalID(s.W.Table):     "table",
				s.logicalID(s.W.WorkQueue): "work",
				s.logicalID(s.W.DLQ):       "dlq",
			}
			if s.W.OutputQueue != nil {
				data[s.logicalID(s.W.OutputQueue)] = "output"
				data[s.logicalID(s.W.OutputDLQ)] = "outputdlq"
			}
			if s.W.OutputStream != nil {
				data[s.logicalID(s.W.OutputStream)] = "stream"
			}
			if s.W.TableKey != nil {
				data[s.logicalID(s.W.TableKey)] = "key"
			}
			task := logicalIDOf(s, s.W.Service.TaskDefinition().TaskRole())
			fn := logicalIDOf(s, s.W.Ingest.Role())
			role := map[string]string{task: "task", fn: "ingest"}
			// The calls each component makes (see the grant lists in
			// wsfleet.go and grants.go; TestTableGrants splits the table's
			// by index and key prefix); nothing on either DLQ.
			want := map[string][]string{
				"task/table":   {"dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"},
				"task/work":    {"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:ReceiveMessage", "sqs:SendMessage"},
				"ingest/table": {"dynamodb:BatchGetItem", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"},
				"ingest/work":  {"sqs:SendMessage"},
			}
			if s.W.OutputQueue != nil {
				want["task/output"] = []string{"sqs:SendMessage"}
			}
			if s.W.OutputStream != nil {
				want["task/stream"] = []string{"kinesis:PutRecord", "kinesis:PutRecords"}
			}
			if s.W.TableKey != nil {
				want["task/key"] = TableKeyActions
				want["ingest/key"] = TableKeyActions
			}
			got := map[string][]string{}
			for _, st := range s.statements() {
				if st.Effect != "Allow" {
					continue
				}
				for _, a := range st.Actions {
					if strings.Contains(a, "*") {
						t.Errorf("%s: wildcard action %q on %s", st.Source, a, asJSON(st.Resources))
					}
				}
				resJSON := asJSON(st.Resources)
				for id, kind := range data {
					if !strings.Contains(resJSON, `"`+id+`"`) {
						continue
					}
					for _, r := range asSlice(st.Resources) {
						if !strings.Contains(asJSON(r), `"`+id+`"`) {
							t.Errorf("%s: statement on %s also grants %s", st.Source, kind, asJSON(r))
						}
					}
					if len(st.Roles) != 1 || role[st.Roles[0]] == "" {
						t.Errorf("%s: grant on %s to unexpected principals %v", st.Source, kind, st.Roles)
						continue
					}
					k := role[st.Roles[0]] + "/" + kind
					got[k] = append(got[k], st.Actions...)
				}
			}
			for k, acts := range got {
				got[k] = slices.Compact(slices.Sorted(slices.Values(acts)))
			}
			for k, acts := range want {
				want[k] = slices.Sorted(slices.Values(acts))
			}
			if asJSON(got) != asJSON(want) {
				t.Errorf("grants on data resources:\n got  %s\n want %s", asJSON(got), asJSON(want))
			}
		})
	}
}

func containerDef(t *testing.T, s *synthesized) map[string]any {
	t.Helper()
	_, td := s.only(t, "AWS::ECS::TaskDefinition")
	defs := props(td)["ContainerDefinitions"].([]any)
	if len(defs) != 1 {
		t.Fatalf("%d containers, want 1", len(defs))
	}
	return defs[0].(map[string]any)
}

func containerEnv(t *testing.T, s *synthesized) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, kv := range asSlice(containerDef(t, s)["Environment"]) {
		m := kv.(map[string]any)
		out[m["Name"].(string)] = m["Value"]
	}
	return out
}

// envNames is env's variables as NAME= pairs (os.Environ's form, values
// left out) for suggest.UnknownEnv.
func envNames(env map[string]any) []string {
	out := make([]string, 0, len(env))
	for k := range env {
		out = append(out, k+"=")
	}
	return out
}

func TestStreamerService(t *testing.T) {
	for _, e := range allEnvs {
		t.Run(e, func(t *testing.T) {
			s := synth(t, env(e))
			c := containerDef(t, s)

			stop, _ := c["StopTimeout"].(float64)
			if stop < s.Cfg.ShutdownDeadline.Seconds() || stop != s.Cfg.StopTimeout.Seconds() {
				t.Errorf("StopTimeout = %v s, want %v s (>= worker shutdown deadline %v)", c["StopTimeout"], s.Cfg.StopTimeout.Seconds(), s.Cfg.ShutdownDeadline)
			}
			hc, _ := c["HealthCheck"].(map[string]any)
			if asJSON(hc["Command"]) != asJSON([]string{"CMD", StreamerBinary, "healthcheck"}) {
				t.Errorf("health check = %s", asJSON(hc))
			}
			lc, _ := c["LogConfiguration"].(map[string]any)
			if lc["LogDriver"] != "awslogs" {
				t.Errorf("log driver = %v", lc["LogDriver"])
			}
			// The admin token reaches the worker as a Secrets Manager
			// reference in the container's secrets, never in its
			// environment (WSFLEET_ADMIN_ADDR listens beyond loopback,
			// so the worker refuses to start without it).
			secrets, _ := c["Secrets"].([]any)
			var tokenFrom any
			for _, x := range secrets {
				if m, _ := x.(map[string]any); m["Name"] == schema.EnvAdminToken {
					tokenFrom = m["ValueFrom"]
				}
			}
			if ref, _ := tokenFrom.(map[string]any); ref["Ref"] == nil || len(*s.Template.FindResources(jsii.String("AWS::SecretsManager::Secret"), nil)) != 1 {
				t.Errorf("container secrets %s: want %s from the stack's one Secrets Manager secret", asJSON(secrets), schema.EnvAdminToken)
			}
			ce := containerEnv(t, s)
			if _, ok := ce[schema.EnvAdminToken]; ok {
				t.Errorf("the admin token is in the container's environment")
			}
			wantEnv := map[string]string{
				schema.EnvShutdownDeadline:     s.Cfg.ShutdownDeadline.String(),
				schema.EnvLeaseTTL:             s.Cfg.LeaseTTL.String(),
				schema.EnvHeartbeatEvery:       "1s",
				schema.EnvCheckpointEvery:      "1m0s",
				schema.EnvMaxConcurrentWrites:  "64",
				schema.EnvSafetyMargin:         s.Cfg.SafetyMargin.String(),
				schema.EnvMaxSessions:          fmt.Sprint(s.Cfg.MaxSessionsPerTask),
				schema.EnvAdminAddr:            fmt.Sprintf("0.0.0.0:%d", StreamerAdminPort),
				schema.EnvSink:                 s.Cfg.Sink,
				schema.EnvEnvironment:          e,
				schema.EnvMetricsNS:            schema.DefaultMetricsNamespace,
				schema.EnvGoMemLimit:           fmt.Sprintf("%dMiB", s.Cfg.TaskMemoryMiB*9/10),
				schema.EnvFleetClaimsPerSecond: fmt.Sprint(s.Cfg.FleetClaimsPerSecond()),
			}
			for k, v := range wantEnv {
				if ce[k] != v {
					t.Errorf("container env %s = %v, want %q", k, ce[k], v)
				}
			}
			for _, k := range []string{schema.EnvTableName, schema.EnvQueueURL} {
				if ce[k] == nil {
					t.Errorf("container env %s missing", k)
				}
			}
			// The worker refuses to start on a WSFLEET_ variable it does not read.
			if errs := suggest.UnknownEnv(envNames(ce), schema.WorkerEnv()); len(errs) > 0 {
				t.Errorf("container env: %v", errs)
			}

			_, td := s.only(t, "AWS::ECS::TaskDefinition")
			if rp := asJSON(props(td)["RuntimePlatform"]); rp != `{"CpuArchitecture":"ARM64","OperatingSystemFamily":"LINUX"}` {
				t.Errorf("RuntimePlatform = %s", rp)
			}
			_, svc := s.only(t, "AWS::ECS::Service")
			dc := asJSON(props(svc)["DeploymentConfiguration"])
			for _, want := range []string{`"MinimumHealthyPercent":100`, fmt.Sprintf(`"MaximumPercent":%d`, s.Cfg.DeployMaxPercent), `"DeploymentCircuitBreaker":{"Enable":true,"Rollback":true}`} {
				if !strings.Contains(dc, want) {
					t.Errorf("DeploymentConfiguration %s lacks %s", dc, want)
				}
			}
			if nc := asJSON(props(svc)["NetworkConfiguration"]); !strings.Contains(nc, `"AssignPublicIp":"ENABLED"`) {
				t.Errorf("NetworkConfiguration = %s, want a public IP (no NAT)", nc)
			}
			if _, ok := props(svc)["DesiredCount"]; ok {
				t.Error("service sets DesiredCount: every deploy would reset autoscaling")
			}
			// The admin port is open between the tasks (rebalancing
			// hand-offs), from the tasks' own group only, and to nothing else.
			var ingress []string
			for _, r := range s.resources("AWS::EC2::SecurityGroupIngress") {
				ingress = append(ingress, asJSON(props(r)))
			}
			if len(ingress) != 1 || !strings.Contains(ingress[0], fmt.Sprintf(`"FromPort":%d`, StreamerAdminPort)) ||
				!strings.Contains(ingress[0], fmt.Sprintf(`"ToPort":%d`, StreamerAdminPort)) || !strings.Contains(ingress[0], `"SourceSecurityGroupId"`) ||
				strings.Contains(ingress[0], "CidrIp") {
				t.Errorf("security group ingress %v, want only the admin port from the tasks' own group", ingress)
			}
			// Flow logs of all traffic to a log group of the stack's.
			_, fl := s.only(t, "AWS::EC2::FlowLog")
			if p := props(fl); p["TrafficType"] != "ALL" || p["LogDestinationType"] != "cloud-watch-logs" || p["ResourceType"] != "VPC" ||
				!strings.Contains(asJSON(p["LogGroupName"]), "VpcFlowLogs") {
				t.Errorf("flow log = %s, want all traffic of the VPC to the VpcFlowLogs group", asJSON(p))
			}
			if n := len(s.resources("AWS::EC2::NatGateway")); n != 0 {
				t.Errorf("%d NAT gateways, want 0", n)
			}
			_, cluster := s.only(t, "AWS::ECS::Cluster")
			if cs := asJSON(props(cluster)["ClusterSettings"]); !strings.Contains(cs, `"Value":"enabled"`) {
				t.Errorf("Container Insights not enabled: %s", cs)
			}
		})
	}
}

func TestAutoscaling(t *testing.T) {
	for _, e := range allEnvs {
		t.Run(e, func(t *testing.T) {
			s := synth(t, env(e))
			_, target := s.only(t, "AWS::ApplicationAutoScaling::ScalableTarget")
			if p := props(target); p["MinCapacity"] != float64(s.Cfg.MinTasks) || p["MaxCapacity"] != float64(s.Cfg.MaxTasks) {
				t.Errorf("capacity %v-%v, want %d-%d", p["MinCapacity"], p["MaxCapacity"], s.Cfg.MinTasks, s.Cfg.MaxTasks)
			}
			noPanic(t, "target tracking on CapacityUtilization", func() {
				s.Template.HasResourceProperties(jsii.String("AWS::ApplicationAutoScaling::ScalingPolicy"), map[string]any{
					"PolicyType": "TargetTrackingScaling",
					"TargetTrackingScalingPolicyConfiguration": map[string]any{
						"TargetValue": s.Cfg.TargetUtilization,
						"CustomizedMetricSpecification": map[string]any{
							"MetricName": schema.MetricCapacityUtilization,
							"Namespace":  schema.DefaultMetricsNamespace,
							"Statistic":  "Average",
							"Dimensions": assertions.Match_ArrayWith(&[]any{
								map[string]any{"Name": schema.DimEnvironment, "Value": e},
								map[string]any{"Name": schema.DimService, "Value": schema.ServiceStreamer},
							}),
						},
					},
				})
			})
		})
	}
}

// The VPC has a public subnet in each of the environment's AZs, the
// Region's first ones by deploy-time tokens (an environment-agnostic
// stack's own list would stop at two), and the service's tasks may run in
// every one of them: ECS spreads them over the AZs AZLossShortfall counts.
func TestVPCSpansTheConfiguredAZs(t *testing.T) {
	for _, e := range allEnvs {
		t.Run(e, func(t *testing.T) {
			s := synth(t, env(e))
			subnets := s.resources("AWS::EC2::Subnet")
			if len(subnets) != s.Cfg.AZs {
				t.Fatalf("%d subnets, want one in each of %d AZs", len(subnets), s.Cfg.AZs)
			}
			seen := map[string]bool{}
			for id, r := range subnets {
				az := asJSON(props(r)["AvailabilityZone"])
				seen[az] = true
				if !strings.Contains(az, `"Fn::GetAZs"`) {
					t.Errorf("subnet %s in AZ %s, want a Fn::Select over Fn::GetAZs", id, az)
				}
			}
			if len(seen) != s.Cfg.AZs {
				t.Errorf("subnets in %d distinct AZs (%v), want %d", len(seen), seen, s.Cfg.AZs)
			}
			_, svc := s.only(t, "AWS::ECS::Service")
			nc, _ := props(svc)["NetworkConfiguration"].(map[string]any)
			vpcCfg, _ := nc["AwsvpcConfiguration"].(map[string]any)
			if got, _ := vpcCfg["Subnets"].([]any); len(got) != s.Cfg.AZs {
				t.Errorf("the service runs in %d subnets (%s), want %d", len(got), asJSON(vpcCfg["Subnets"]), s.Cfg.AZs)
			}
		})
	}
}

func TestIngestFunctionAndAPI(t *testing.T) {
	s := synth(t, env(EnvDev))
	p := props(s.resources("AWS::Lambda::Function")[s.logicalID(s.W.Ingest)])
	if p["Runtime"] != "provided.al2023" || asJSON(p["Architectures"]) != `["arm64"]` || p["Handler"] != IngestBootstrap {
		t.Errorf("function runtime=%v arch=%v handler=%v", p["Runtime"], p["Architectures"], p["Handler"])
	}
	if p["ReservedConcurrentExecutions"] != float64(s.Cfg.IngestReservedConcurrency) {
		t.Errorf("ReservedConcurrentExecutions = %v, want %d", p["ReservedConcurrentExecutions"], s.Cfg.IngestReservedConcurrency)
	}
	vars := p["Environment"].(map[string]any)["Variables"].(map[string]any)
	for _, k := range []string{schema.EnvTableName, schema.EnvQueueURL, schema.EnvMetricsNS, schema.EnvEnvironment} {
		if vars[k] == nil {
			t.Errorf("ingest env %s missing", k)
		}
	}
	// Ingest refuses to start on a WSFLEET_ variable it does not read.
	if errs := suggest.UnknownEnv(envNames(vars), schema.IngestEnv()); len(errs) > 0 {
		t.Errorf("ingest env: %v", errs)
	}
	if lc := asJSON(p["LoggingConfig"]); !strings.Contains(lc, "IngestLogs") {
		t.Errorf("LoggingConfig = %s, want the explicit log group", lc)
	}
	// The function's role has no AWS-managed policy (AWSLambdaBasicExecutionRole
	// would let it create and write any log group): it writes its own.
	fnRole := logicalIDOf(s, s.W.Ingest.Role())
	if mp := props(s.resources("AWS::IAM::Role")[fnRole])["ManagedPolicyArns"]; mp != nil {
		t.Errorf("ingest role ManagedPolicyArns = %s, want none", asJSON(mp))
	}
	var logsID string
	for id := range s.resources("AWS::Logs::LogGroup") {
		if strings.HasPrefix(id, "IngestLogs") {
			logsID = id
		}
	}
	var logGrants []string
	for _, st := range s.statements() {
		if slices.Contains(st.Roles, fnRole) && strings.Contains(asJSON(st.Actions), "logs:") {
			logGrants = append(logGrants, asJSON(st.Actions)+" on "+asJSON(st.Resources))
		}
	}
	wantLogs := asJSON(IngestLogActions) + " on " + asJSON(map[string]any{"Fn::GetAtt": []any{logsID, "Arn"}})
	if len(logGrants) != 1 || logGrants[0] != wantLogs {
		t.Errorf("ingest log grants %v, want only %s", logGrants, wantLogs)
	}
	for id, lg := range s.resources("AWS::Logs::LogGroup") {
		if props(lg)["RetentionInDays"] != float64(s.Cfg.LogRetentionDays) {
			t.Errorf("log group %s retention %v, want %d", id, props(lg)["RetentionInDays"], s.Cfg.LogRetentionDays)
		}
	}

	wantRoutes := map[string]bool{}
	for _, r := range IngestRoutes {
		wantRoutes[string(r.Method)+" "+r.Path] = true
	}
	for _, tc := range []struct {
		ctx  map[string]any
		auth string
	}{{env(EnvDev), "AWS_IAM"}, {env(EnvProd), "AWS_IAM"}, {map[string]any{CtxEnv: EnvDev, CtxAuth: AuthNone}, "NONE"}} {
		s := synth(t, tc.ctx)
		routes := s.resources("AWS::ApiGatewayV2::Route")
		got := map[string]bool{}
		for id, r := range routes {
			p := props(r)
			got[p["RouteKey"].(string)] = true
			if p["AuthorizationType"] != tc.auth {
				t.Errorf("%v: route %s AuthorizationType = %v, want %s", tc.ctx, id, p["AuthorizationType"], tc.auth)
			}
		}
		if asJSON(got) != asJSON(wantRoutes) {
			t.Errorf("%v: routes %v, want %v", tc.ctx, got, wantRoutes)
		}
		_, stage := s.only(t, "AWS::ApiGatewayV2::Stage")
		if sp := props(stage); sp["StageName"] != "$default" || sp["AutoDeploy"] != true || sp["AccessLogSettings"] == nil {
			t.Errorf("stage = %s", asJSON(sp))
		}
	}
}

func TestAlarmsAndDashboard(t *testing.T) {
	for _, e := range allEnvs {
		t.Run(e, func(t *testing.T) {
			s := synth(t, env(e))
			alarms := map[string]map[string]any{}
			for _, a := range s.resources("AWS::CloudWatch::Alarm") {
				alarms[props(a)["AlarmName"].(string)] = props(a)
			}
			wantMetric := map[string]string{
				AlarmDLQNotEmpty: "ApproximateNumberOfMessagesVisible",
				AlarmOrphans:     schema.MetricOrphansSeen,
				AlarmLeaseLost:   schema.MetricLeaseLost,
				AlarmFailed:      schema.MetricSessionsFailed,
				AlarmIngest5xx:   "5xx",
				AlarmAliveLow:    schema.MetricAliveWorkers,
			}
			if s.W.OutputDLQ != nil {
				wantMetric[AlarmOutputDLQ] = "ApproximateNumberOfMessagesVisible"
			} else if _, ok := alarms[AlarmName(e, AlarmOutputDLQ)]; ok {
				t.Errorf("alarm %s without an output DLQ", AlarmOutputDLQ)
			}
			for suffix, metric := range wantMetric {
				a, ok := alarms[AlarmName(e, suffix)]
				if !ok {
					t.Errorf("alarm %s missing (have %v)", AlarmName(e, suffix), slices.Collect(maps.Keys(alarms)))
					continue
				}
				if a["MetricName"] != metric {
					t.Errorf("alarm %s metric %v, want %s", suffix, a["MetricName"], metric)
				}
				if len(asSlice(a["AlarmActions"])) == 0 {
					t.Errorf("alarm %s has no action", suffix)
				}
			}
			orphans := alarms[AlarmName(e, AlarmOrphans)]
			if orphans["EvaluationPeriods"] != float64(s.Cfg.OrphanAlarmMinutes) || orphans["Period"] != float64(60) || orphans["Threshold"] != float64(0) {
				t.Errorf("orphans alarm = %s, want > 0 for %d one-minute periods", asJSON(orphans), s.Cfg.OrphanAlarmMinutes)
			}

			failed := alarms[AlarmName(e, AlarmFailed)]
			if failed["Period"] != float64(300) || failed["Threshold"] != s.Cfg.FailedPer5Min || failed["Statistic"] != "Sum" ||
				failed["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" || failed["EvaluationPeriods"] != float64(1) || s.Cfg.FailedPer5Min != 1 {
				t.Errorf("sessions-failed alarm = %s, want Sum ≥ 1 in one 5-minute period", asJSON(failed))
			}

			alive := alarms[AlarmName(e, AlarmAliveLow)]
			if alive["Threshold"] != float64(s.Cfg.MinTasks) || alive["ComparisonOperator"] != "LessThanThreshold" || alive["Statistic"] != "Maximum" ||
				alive["Period"] != float64(60) || alive["EvaluationPeriods"] != float64(s.Cfg.AliveAlarmMinutes) || alive["TreatMissingData"] != "breaching" {
				t.Errorf("alive-workers alarm = %s, want Maximum < %d for %d one-minute periods, missing data breaching", asJSON(alive), s.Cfg.MinTasks, s.Cfg.AliveAlarmMinutes)
			}

			_, dash := s.only(t, "AWS::CloudWatch::Dashboard")
			if props(dash)["DashboardName"] != DashboardName(e) {
				t.Errorf("dashboard name %v", props(dash)["DashboardName"])
			}
			body := asJSON(props(dash)["DashboardBody"])
			for _, m := range []string{schema.MetricOwnedSessions, schema.MetricOrphansSeen, schema.MetricLeaseLost, schema.MetricSessionsFailed, schema.MetricClaimLatencyMs,
				schema.MetricCapacityUtilization, schema.MetricAliveWorkers, schema.MetricHeartbeatLatencyMs, schema.MetricWorkersDeclaredDead, "ApproximateNumberOfMessagesVisible", "4xx", "5xx", `p99`, `p50`} {
				if !strings.Contains(body, m) {
					t.Errorf("dashboard does not show %s", m)
				}
			}
			if strings.Contains(body, "RenewLatencyMs") {
				t.Error("dashboard shows the renewal latency, which no worker emits any more")
			}
		})
	}
}

func TestOutputsAndAgnostic(t *testing.T) {
	s := synth(t, env(EnvProd))
	outs, _ := s.JSON["Outputs"].(map[string]any)
	for _, k := range []string{"ApiUrl", "TableName", "WorkQueueUrl", "DeadLetterQueueUrl", "OutputQueueUrl", "OutputDeadLetterQueueUrl", "AlarmTopicArn", "ClusterName", "StreamerServiceName", "StreamerTaskRoleArn"} {
		if _, ok := outs[k]; !ok {
			t.Errorf("output %s missing", k)
		}
	}
	if !*awscdk.Token_IsUnresolved(s.W.Stack.Account()) || !*awscdk.Token_IsUnresolved(s.W.Stack.Region()) {
		t.Errorf("stack is pinned to %s/%s; it must be environment-agnostic", *s.W.Stack.Account(), *s.W.Stack.Region())
	}
	if *s.W.Stack.StackName() != StackID(EnvProd) {
		t.Errorf("stack name %s", *s.W.Stack.StackName())
	}
}

func TestUnknownEnvironmentIsAnError(t *testing.T) {
	root := repoRoot(t)
	for _, tc := range []struct {
		ctx  map[string]any
		want string
	}{
		{map[string]any{CtxEnv: "staging"}, `unknown environment "staging"`},
		{map[string]any{CtxEnv: ""}, "context env is not set"},
		{map[string]any{CtxEnv: EnvDev, CtxAuth: "cognito"}, `auth="cognito"`},
		{map[string]any{CtxEnv: EnvDev, CtxOutputFIFO: "yes please"}, "outputFifo"},
		{map[string]any{CtxEnv: EnvDev, CtxOutputFIFO: "true"}, "needs the sqs sink"},
	} {
		ctx := cdkContext(t, root)
		for k, v := range tc.ctx {
			ctx[k] = v
		}
		app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(t.TempDir())})
		w, err := NewFromContext(app, root)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to mention %q", tc.ctx, err, tc.want)
		}
		if w != nil || len(*app.Node().Children()) != 0 {
			t.Errorf("%v: a stack was added despite the error", tc.ctx)
		}
	}
}
