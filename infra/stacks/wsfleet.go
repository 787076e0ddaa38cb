// Package stacks defines wsfleet's AWS deployment as one CDK stack per
// environment: the sessions table, the work queue and its DLQ, the ingest
// Lambda behind an HTTP API, the streamer Fargate service with autoscaling,
// and the dashboard and alarms. Names of tables, attributes, the indexes,
// environment variables and metrics come from shared/schema only.
package stacks

import (
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// Ingest HTTP API routes (the ingest function's contract).
var IngestRoutes = []struct {
	Method awsapigatewayv2.HttpMethod
	Path   string
}{
	{awsapigatewayv2.HttpMethod_POST, "/sessions"},
	{awsapigatewayv2.HttpMethod_GET, "/sessions"},
	{awsapigatewayv2.HttpMethod_GET, "/sessions/{id}"},
	{awsapigatewayv2.HttpMethod_POST, "/sessions/{id}/stop"},
	{awsapigatewayv2.HttpMethod_GET, "/workers"},
}

// Actions granted on the queues and the output stream: exactly the calls
// each component makes (streamer: shared/notify/sqsnotify consumer and
// publisher, workers/streamer/sink/sqssink (SendMessageBatch is authorized
// by sqs:SendMessage), workers/streamer/sink/kinesissink; ingest: the
// notify publisher). The table's grants are in grants.go. The tests hold
// their own copy, so widening a grant is a visible change.
var (
	StreamerWorkQueueActions   = []string{"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:ReceiveMessage", "sqs:SendMessage"}
	StreamerOutputQueueActions = []string{"sqs:SendMessage"}
	// The output stream uses the AWS-managed key (alias/aws/kinesis), which
	// needs no KMS grant to the producer.
	StreamerOutputStreamActions = []string{"kinesis:PutRecord", "kinesis:PutRecords"}
	IngestWorkQueueActions      = []string{"sqs:SendMessage"}
	// StreamerSecretActions are granted on the environment's secret prefix
	// (EnvConfig.SecretPrefix): the worker's resolver reads secret values
	// and nothing else.
	StreamerSecretActions = []string{"secretsmanager:GetSecretValue"}
	// StreamerSecretKeyActions are granted on EnvConfig.SecretKMSKeyARN,
	// when set, through Secrets Manager only: GetSecretValue decrypts the
	// secret's data key with kms:Decrypt (nothing else: the worker never
	// writes a secret, which would need kms:GenerateDataKey).
	StreamerSecretKeyActions = []string{"kms:Decrypt"}
	// IngestLogActions are granted on the function's own log group (its ARN
	// ends in ":*", which covers the group's streams).
	IngestLogActions = []string{"logs:CreateLogStream", "logs:PutLogEvents"}
)

// Streamer container settings.
const (
	StreamerContainerName = "streamer"
	StreamerAdminPort     = 8081
)

// untaggedTypes are resource types the stack tags leave out.
var untaggedTypes = []string{"AWS::ApplicationAutoScaling::ScalableTarget", "AWS::CloudWatch::Dashboard"}

// StackID is the construct id (and CloudFormation stack name) of env's stack.
func StackID(env string) string { return "wsfleet-" + env }

// WsfleetStackProps configures NewWsfleetStack.
type WsfleetStackProps struct {
	awscdk.StackProps
	Config   EnvConfig
	Options  Options
	RepoRoot string // absolute; assets are resolved against it
}

// Wsfleet is the synthesized stack and the constructs tests look at.
type Wsfleet struct {
	Stack       awscdk.Stack
	Table       awsdynamodb.Table
	TableKey    awskms.Key // nil unless the environment encrypts the table with its own key
	WorkQueue   awssqs.Queue
	DLQ         awssqs.Queue
	OutputQueue awssqs.Queue // nil unless the sink is sqs
	// OutputDLQ is the output queue's dead-letter queue (nil with it).
	OutputDLQ awssqs.Queue
	// OutputStream is the kinesis sink's stream: on-demand, encrypted with
	// the AWS-managed key; nil unless the sink is kinesis.
	OutputStream awskinesis.Stream
	Ingest       awslambda.Function
	Api          awsapigatewayv2.HttpApi
	Service      awsecs.FargateService
}

// NewWsfleetStack adds env's stack to scope. It returns an error (and adds
// nothing) if the configuration is invalid or a build asset is missing.
func NewWsfleetStack(scope constructs.Construct, id string, props *WsfleetStackProps) (*Wsfleet, error) {
	cfg, opts := props.Config, props.Options
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("environment %q: %w", cfg.Name, err)
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(props.RepoRoot) {
		return nil, fmt.Errorf("repo root %q is not absolute", props.RepoRoot)
	}
	if err := CheckAssets(props.RepoRoot); err != nil {
		return nil, err
	}

	sp := props.StackProps
	if sp.Description == nil {
		sp.Description = jsii.String(fmt.Sprintf("wsfleet (%s): WebSocket session fleet with epoch-based ownership in DynamoDB", cfg.Name))
	}
	if cfg.Retain && sp.TerminationProtection == nil {
		sp.TerminationProtection = jsii.Bool(true)
	}
	stack := awscdk.NewStack(scope, jsii.String(id), &sp)
	// cdk 2.276 tags scalable targets and dashboards, but the CloudFormation
	// resource schemas cfn-lint 1.51 ships reject Tags on them: leave them
	// untagged rather than deploy properties the linter cannot vouch for.
	tagProps := &awscdk.TagProps{ExcludeResourceTypes: jsii.Strings(untaggedTypes...)}
	awscdk.Tags_Of(stack).Add(jsii.String("project"), jsii.String("wsfleet"), tagProps)
	awscdk.Tags_Of(stack).Add(jsii.String("environment"), jsii.String(cfg.Name), tagProps)

	CheckCompliance(stack)
	w := &Wsfleet{Stack: stack}
	dataRemoval := awscdk.RemovalPolicy_DESTROY
	if cfg.Retain {
		dataRemoval = awscdk.RemovalPolicy_RETAIN
	}

	w.Table, w.TableKey = newTable(stack, cfg, dataRemoval)
	w.DLQ, w.WorkQueue, w.OutputQueue, w.OutputDLQ = newQueues(stack, cfg, opts)
	w.Ingest = newIngest(stack, cfg, opts, props.RepoRoot, w.Table, w.WorkQueue, dataRemoval)
	grantTableKey(stack, w.TableKey, w.Ingest.Role())
	w.Api = newAPI(stack, cfg, opts, w.Ingest)
	w.OutputStream = newOutputStream(stack, cfg)
	cluster, svc := newStreamer(stack, cfg, opts, props.RepoRoot, w.Table, w.WorkQueue, sinkOutput{queue: w.OutputQueue, stream: w.OutputStream}, dataRemoval)
	w.Service = svc
	if StdoutSinkWarns(cfg) {
		awscdk.Annotations_Of(svc).AddWarningV2(jsii.String(StdoutSinkWarningID), jsii.String(StdoutSinkWarning), nil)
	}
	grantTableKey(stack, w.TableKey, svc.TaskDefinition().TaskRole())
	newObservability(stack, cfg, opts, w, cluster)
	addOutputs(stack, w, cluster)
	return w, nil
}

func addOutputs(stack awscdk.Stack, w *Wsfleet, cluster awsecs.Cluster) {
	out := func(id string, value *string, desc string) {
		awscdk.NewCfnOutput(stack, jsii.String(id), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(desc)})
	}
	out("ApiUrl", w.Api.ApiEndpoint(), "ingest HTTP API base URL (SigV4-signed requests, service execute-api, unless auth=none)")
	out("ApiId", w.Api.ApiId(), "ingest HTTP API id")
	out("TableName", w.Table.TableName(), "sessions table ("+schema.EnvTableName+")")
	out("WorkQueueUrl", w.WorkQueue.QueueUrl(), "work queue ("+schema.EnvQueueURL+")")
	out("DeadLetterQueueUrl", w.DLQ.QueueUrl(), "work queue dead-letter queue")
	if w.OutputQueue != nil {
		out("OutputQueueUrl", w.OutputQueue.QueueUrl(), "streamer output queue ("+schema.EnvOutputQueueURL+")")
		out("OutputDeadLetterQueueUrl", w.OutputDLQ.QueueUrl(), "output queue dead-letter queue (what its consumers failed on)")
	}
	if w.OutputStream != nil {
		out("OutputStreamArn", w.OutputStream.StreamArn(), "streamer output stream ("+schema.EnvOutputStream+")")
	}
	out("IngestFunctionName", w.Ingest.FunctionName(), "ingest Lambda function")
	out("ClusterName", cluster.ClusterName(), "ECS cluster")
	out("StreamerServiceName", w.Service.ServiceName(), "streamer ECS service")
	out("StreamerTaskRoleArn", w.Service.TaskDefinition().TaskRole().RoleArn(), "streamer task role (for a key policy of the session secrets' customer-managed key)")
}

func duration(d time.Duration) awscdk.Duration {
	if d%time.Second == 0 {
		return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
	}
	return awscdk.Duration_Millis(jsii.Number(float64(d.Milliseconds())))
}

var retentionByDays = map[int]awslogs.RetentionDays{
	1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS, 5: awslogs.RetentionDays_FIVE_DAYS,
	7: awslogs.RetentionDays_ONE_WEEK, 14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
	60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS, 120: awslogs.RetentionDays_FOUR_MONTHS,
	150: awslogs.RetentionDays_FIVE_MONTHS, 180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
	400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS, 731: awslogs.RetentionDays_TWO_YEARS,
	1096: awslogs.RetentionDays_THREE_YEARS, 1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
	2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS, 3288: awslogs.RetentionDays_NINE_YEARS,
	3653: awslogs.RetentionDays_TEN_YEARS,
}

// retention maps validated days (EnvConfig.Validate checks retentionByDays) to
// the CDK enum.
func retention(days int) awslogs.RetentionDays {
	if r, ok := retentionByDays[days]; ok {
		return r
	}
	panic("stacks: unvalidated log retention " + strconv.Itoa(days) + " days")
}
