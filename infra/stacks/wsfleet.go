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
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapplicationautoscaling"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecrassets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
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

// newTable creates the sessions table. With cfg.TableCMK the table (and its
// point-in-time backups) is encrypted with a customer-managed key of its own,
// so reading the handshake headers stored in it takes kms:Decrypt on that
// key as well as table access; otherwise DynamoDB's AWS-owned key is used.
func newTable(stack awscdk.Stack, cfg EnvConfig, removal awscdk.RemovalPolicy) (awsdynamodb.Table, awskms.Key) {
	var key awskms.Key
	encryption := awsdynamodb.TableEncryption_DEFAULT
	if cfg.TableCMK {
		key = awskms.NewKey(stack, jsii.String("TableKey"), &awskms.KeyProps{
			Description:       jsii.String("wsfleet sessions table (handshake headers at rest)"),
			EnableKeyRotation: jsii.Bool(true),
			RemovalPolicy:     removal,
		})
		encryption = awsdynamodb.TableEncryption_CUSTOMER_MANAGED
	}
	table := awsdynamodb.NewTable(stack, jsii.String("Sessions"), &awsdynamodb.TableProps{
		Encryption:    encryption,
		EncryptionKey: key,
		PartitionKey:  &awsdynamodb.Attribute{Name: jsii.String(schema.AttrPk), Type: attrType(schema.TypeString)},
		BillingMode:   awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(cfg.Retain),
		// Nonce items of signed requests and DEAD or LEFT worker records
		// (one day after they ended) expire (schema.NonceKey, schema.WorkerKey).
		TimeToLiveAttribute: jsii.String(schema.AttrExpiresAt),
		RemovalPolicy:       removal,
	})
	if cfg.TableWarmWrites > 0 {
		// Pre-warmed (TableV2's warmThroughput; the Table construct has no
		// prop for it, and moving to TableV2 would replace the table).
		cfn := table.Node().DefaultChild().(awsdynamodb.CfnTable)
		cfn.SetWarmThroughput(&awsdynamodb.CfnTable_WarmThroughputProperty{WriteUnitsPerSecond: jsii.Number(cfg.TableWarmWrites)})
	}
	str := func(name string) *awsdynamodb.Attribute {
		return &awsdynamodb.Attribute{Name: jsii.String(name), Type: attrType(schema.TypeString)}
	}
	for _, g := range Indexes {
		props := &awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:      jsii.String(g.Name),
			PartitionKey:   str(g.Hash),
			ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
		}
		if g.Sort != "" {
			props.SortKey = str(g.Sort)
		}
		if len(g.Include) > 0 {
			props.ProjectionType = awsdynamodb.ProjectionType_INCLUDE
			props.NonKeyAttributes = jsii.Strings(g.Include...)
		}
		table.AddGlobalSecondaryIndex(props)
	}
	return table, key
}

// Index is one of the table's global secondary indexes: string keys, KEYS_ONLY
// unless Include names projected attributes.
type Index struct {
	Name, Hash, Sort string
	Include          []string
}

// Indexes are the table's GSIs, as shared/sessionitem's CreateTableInput
// defines them (the local stack and the tests create the table from it;
// the infra tests hold their own copy from schema names). Nothing they
// index changes on a heartbeat or a checkpoint.
var Indexes = []Index{
	{Name: schema.IndexByState, Hash: schema.AttrIndexShard, Sort: schema.AttrPk},
	{Name: schema.IndexByOwner, Hash: schema.AttrLeaseOwner,
		Include: []string{schema.AttrLeaseEpoch, schema.AttrDesiredState, schema.AttrGeneration}},
	{Name: schema.IndexByUnowned, Hash: schema.AttrUnownedShard, Sort: schema.AttrPk},
	{Name: schema.IndexByWorkerList, Hash: schema.AttrWorkerList, Sort: schema.AttrPk},
}

// TableKeyActions are what a principal of the table needs on its
// customer-managed key, only through DynamoDB (kms:ViaService).
var TableKeyActions = []string{"kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey"}

// grantTableKey lets role use the table's key through DynamoDB in this
// region; nothing when the table uses the AWS-owned key.
func grantTableKey(stack awscdk.Stack, key awskms.Key, role awsiam.IRole) {
	if key == nil {
		return
	}
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("SessionsTableKey"),
		Actions:   jsii.Strings(TableKeyActions...),
		Resources: &[]*string{key.KeyArn()},
		Conditions: &map[string]any{"StringEquals": map[string]any{
			"kms:ViaService": "dynamodb." + *stack.Region() + ".amazonaws.com",
		}},
	}))
}

func attrType(t string) awsdynamodb.AttributeType {
	if t == schema.TypeNumber {
		return awsdynamodb.AttributeType_NUMBER
	}
	return awsdynamodb.AttributeType_STRING
}

// OutputMaxReceiveCount is how many times the output queue's consumers may
// receive a message before it moves to the output DLQ: a message they keep
// failing on stops blocking its FIFO message group and is kept 14 days.
const OutputMaxReceiveCount = 10

func newQueues(stack awscdk.Stack, cfg EnvConfig, opts Options) (dlq, work, output, outputDLQ awssqs.Queue) {
	// Queues hold notifications only (the table is the source of truth), so
	// they are destroyed with the stack in every environment.
	dlq = awssqs.NewQueue(stack, jsii.String("WorkDLQ"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		RemovalPolicy:   awscdk.RemovalPolicy_DESTROY,
	})
	work = awssqs.NewQueue(stack, jsii.String("WorkQueue"), &awssqs.QueueProps{
		Encryption:             awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:             jsii.Bool(true),
		VisibilityTimeout:      duration(cfg.WorkQueueVisible),
		ReceiveMessageWaitTime: awscdk.Duration_Seconds(jsii.Number(20)),
		RetentionPeriod:        awscdk.Duration_Days(jsii.Number(4)),
		DeadLetterQueue: &awssqs.DeadLetterQueue{
			Queue:           dlq,
			MaxReceiveCount: jsii.Number(float64(cfg.MaxReceiveCount)),
		},
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	if cfg.Sink != SinkSQS {
		return dlq, work, nil, nil
	}
	// The output queue's consumers are outside this stack; its DLQ keeps
	// what they cannot process (a FIFO queue's DLQ must be FIFO too).
	dlqProps := &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		RemovalPolicy:   awscdk.RemovalPolicy_DESTROY,
	}
	if opts.OutputFIFO {
		dlqProps.Fifo = jsii.Bool(true)
	}
	outputDLQ = awssqs.NewQueue(stack, jsii.String("OutputDLQ"), dlqProps)
	outProps := &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(4)),
		DeadLetterQueue: &awssqs.DeadLetterQueue{
			Queue:           outputDLQ,
			MaxReceiveCount: jsii.Number(OutputMaxReceiveCount),
		},
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	}
	if opts.OutputFIFO {
		// One message group per connection, deduplicated by the sink's
		// MessageDeduplicationId (connection id + seq): high-throughput FIFO.
		outProps.Fifo = jsii.Bool(true)
		outProps.DeduplicationScope = awssqs.DeduplicationScope_MESSAGE_GROUP
		outProps.FifoThroughputLimit = awssqs.FifoThroughputLimit_PER_MESSAGE_GROUP_ID
	}
	output = awssqs.NewQueue(stack, jsii.String("OutputQueue"), outProps)
	return dlq, work, output, outputDLQ
}

func newIngest(stack awscdk.Stack, cfg EnvConfig, opts Options, root string, table awsdynamodb.Table, work awssqs.Queue, removal awscdk.RemovalPolicy) awslambda.Function {
	logs := awslogs.NewLogGroup(stack, jsii.String("IngestLogs"), &awslogs.LogGroupProps{
		Retention:     retention(cfg.LogRetentionDays),
		RemovalPolicy: removal,
	})
	env := map[string]*string{
		schema.EnvTableName:   table.TableName(),
		schema.EnvQueueURL:    work.QueueUrl(),
		schema.EnvMetricsNS:   jsii.String(schema.DefaultMetricsNamespace),
		schema.EnvEnvironment: jsii.String(cfg.Name),
	}
	if opts.AllowedHosts != "" {
		env[schema.EnvAllowedHosts] = jsii.String(opts.AllowedHosts)
	}
	if opts.SessionSecrets() {
		// A prefix goes with its host binding or not at all
		// (Options.SessionSecrets): without it ingest takes no reference.
		env[schema.EnvSecretPrefix] = jsii.String(cfg.SecretPrefix)
		env[schema.EnvSecretHosts] = jsii.String(opts.SecretHosts)
	}
	if opts.SigningSecretARN != "" {
		env[schema.EnvSigningSecretARN] = jsii.String(opts.SigningSecretARN)
	}
	// A role of its own rather than CDK's default, which attaches the
	// AWS-managed AWSLambdaBasicExecutionRole (logs:CreateLogGroup and
	// writes to every log group in the account): the function writes to
	// its own log group only, which exists before it runs.
	role := awsiam.NewRole(stack, jsii.String("IngestRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("wsfleet ingest function: desired state and mailboxes in the sessions table, the work queue, its own log group"),
	})
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("OwnLogGroup"),
		Actions:   jsii.Strings(IngestLogActions...),
		Resources: &[]*string{logs.LogGroupArn()},
	}))
	fn := awslambda.NewFunction(stack, jsii.String("Ingest"), &awslambda.FunctionProps{
		Role:         role,
		Description:  jsii.String("wsfleet ingest: writes desired_state and notifies the work queue"),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String(IngestBootstrap),
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(root, IngestAssetDir)), nil),
		MemorySize:   jsii.Number(float64(cfg.IngestMemoryMiB)),
		// A flood of requests cannot take the account's whole concurrency
		// (or the table's capacity) with it.
		ReservedConcurrentExecutions: jsii.Number(float64(cfg.IngestReservedConcurrency)),
		Timeout:                      duration(cfg.IngestTimeout),
		Environment:                  &env,
		LogGroup:                     logs,
	})
	grantIngestTable(fn.Role(), table)
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("WorkQueue"),
		Actions:   jsii.Strings(IngestWorkQueueActions...),
		Resources: &[]*string{work.QueueArn()},
	}))
	if opts.SigningSecretARN != "" {
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("SigningSecret"),
			Actions:   jsii.Strings("secretsmanager:GetSecretValue"),
			Resources: jsii.Strings(opts.SigningSecretARN),
		}))
	}
	return fn
}

func newAPI(stack awscdk.Stack, cfg EnvConfig, opts Options, fn awslambda.Function) awsapigatewayv2.HttpApi {
	var authorizer awsapigatewayv2.IHttpRouteAuthorizer = awsapigatewayv2authorizers.NewHttpIamAuthorizer()
	if opts.Auth == AuthNone {
		authorizer = awsapigatewayv2.NewHttpNoneAuthorizer()
	}
	api := awsapigatewayv2.NewHttpApi(stack, jsii.String("Api"), &awsapigatewayv2.HttpApiProps{
		ApiName:            jsii.String(StackID(cfg.Name)),
		Description:        jsii.String("wsfleet ingest API"),
		CreateDefaultStage: jsii.Bool(false),
		DefaultAuthorizer:  authorizer,
	})
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("Ingest"), fn, nil)
	for _, r := range IngestRoutes {
		api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String(r.Path),
			Methods:     &[]awsapigatewayv2.HttpMethod{r.Method},
			Integration: integration,
		})
	}
	if opts.Auth == AuthNone {
		awscdk.Annotations_Of(api).AddWarningV2(jsii.String("wsfleet:auth-none"),
			jsii.String("the ingest API has NO authorization (-c auth=none): anyone who knows its URL can start sessions"), nil)
		// Only on request (-c auth=none), refused for prod
		// (EnvConfig.AllowAuthNone), and warned about above.
		suppress(api, "AwsSolutions-APIG4",
			"The operator asked for an unauthenticated API with -c auth=none (allowed only where EnvConfig.AllowAuthNone, never in prod); the synth warns about it (wsfleet:auth-none).")
	}

	accessLogs := awslogs.NewLogGroup(stack, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{
		Retention:     retention(cfg.LogRetentionDays),
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	stage := awsapigatewayv2.NewHttpStage(stack, jsii.String("ApiDefaultStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    api,
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
		Throttle: &awsapigatewayv2.ThrottleSettings{
			RateLimit:  jsii.Number(cfg.APIRateLimit),
			BurstLimit: jsii.Number(cfg.APIBurstLimit),
		},
	})
	// The L2 takes access-log settings as a jsii interface; set them on the
	// L1 instead.
	cfnStage := stage.Node().DefaultChild().(awsapigatewayv2.CfnStage)
	cfnStage.SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: accessLogs.LogGroupArn(),
		Format:         jsii.String(accessLogFormat),
	})
	return api
}

// accessLogFormat is one JSON object per request.
const accessLogFormat = `{"requestId":"$context.requestId","ip":"$context.identity.sourceIp",` +
	`"caller":"$context.identity.caller","user":"$context.identity.user","userArn":"$context.identity.userArn",` +
	`"time":"$context.requestTime","method":"$context.httpMethod","route":"$context.routeKey",` +
	`"status":"$context.status","len":"$context.responseLength","latency":"$context.responseLatency",` +
	`"integrationError":"$context.integrationErrorMessage","authError":"$context.authorizer.error"}`

// sinkOutput is where the streamer's sink writes (at most one is set).
type sinkOutput struct {
	queue  awssqs.Queue
	stream awskinesis.Stream
}

// OnDemandHashBuckets are the kinesis sink's hash buckets on the on-demand
// output stream (schema.EnvSinkKinesisHashBuckets): a bucket's records all
// carry one explicit hash key, so they stay on one shard however the
// stream splits, and the stream can spread a fleet's writes over at most
// as many shards as there are buckets. A shard takes at most 1 MiB/s and
// 1,000 records/s of writes (Kinesis API Reference, CreateStream), and an
// on-demand stream adds shards as its traffic grows: 256 buckets let it
// grow to 256 MiB/s. On-demand bills bytes (each record rounded up to 1
// KB), not records, so the thinner packs of many buckets cost only the
// rounding (docs/worker.md, Kinesis hash buckets).
const OnDemandHashBuckets = 256

// newOutputStream creates the kinesis sink's stream: on-demand (no shards
// to size), encrypted with the AWS-managed key, 24 h retention.
func newOutputStream(stack awscdk.Stack, cfg EnvConfig) awskinesis.Stream {
	if cfg.Sink != SinkKinesis {
		return nil
	}
	return awskinesis.NewStream(stack, jsii.String("OutputStream"), &awskinesis.StreamProps{
		StreamMode:      awskinesis.StreamMode_ON_DEMAND,
		Encryption:      awskinesis.StreamEncryption_MANAGED,
		RetentionPeriod: awscdk.Duration_Hours(jsii.Number(24)),
		RemovalPolicy:   awscdk.RemovalPolicy_DESTROY,
	})
}

func newStreamer(stack awscdk.Stack, cfg EnvConfig, opts Options, root string, table awsdynamodb.Table, work awssqs.Queue, out sinkOutput, removal awscdk.RemovalPolicy) (awsecs.Cluster, awsecs.FargateService) {
	// Public subnets only and no NAT gateway: the workers need outbound
	// internet (WebSocket sources, AWS APIs) and accept no inbound traffic.
	vpc := awsec2.NewVpc(stack, jsii.String("Vpc"), &awsec2.VpcProps{
		IpAddresses: awsec2.IpAddresses_Cidr(jsii.String("10.60.0.0/16")),
		MaxAzs:      jsii.Number(2),
		NatGateways: jsii.Number(0),
		SubnetConfiguration: &[]*awsec2.SubnetConfiguration{{
			Name:       jsii.String("public"),
			SubnetType: awsec2.SubnetType_PUBLIC,
			CidrMask:   jsii.Number(24),
		}},
	})
	// Flow logs (all traffic, CloudWatch Logs): the tasks' only network
	// record; with no inbound rules but the admin port between the tasks, a
	// rejected or unexpected flow is what an investigation needs first.
	flowLogs := awslogs.NewLogGroup(stack, jsii.String("VpcFlowLogs"), &awslogs.LogGroupProps{
		Retention:     retention(cfg.LogRetentionDays),
		RemovalPolicy: removal,
	})
	vpc.AddFlowLog(jsii.String("FlowLog"), &awsec2.FlowLogOptions{
		Destination: awsec2.FlowLogDestination_ToCloudWatchLogs(flowLogs, nil),
		TrafficType: awsec2.FlowLogTrafficType_ALL,
	})
	cluster := awsecs.NewCluster(stack, jsii.String("Cluster"), &awsecs.ClusterProps{
		Vpc:                 vpc,
		ContainerInsightsV2: awsecs.ContainerInsights_ENABLED,
	})

	taskRole := awsiam.NewRole(stack, jsii.String("StreamerTaskRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("ecs-tasks.amazonaws.com"), nil),
		Description: jsii.String("wsfleet streamer tasks: worker records, ownership and checkpoints in the sessions table, work queue, output queue"),
	})
	grantStreamerTable(taskRole, table)
	// Sessions' secret references ({{secret:NAME}}) are resolved by the
	// worker at every dial: it may read the secrets under the
	// environment's prefix and no others (the "-??????" suffix Secrets
	// Manager appends to every secret's ARN is why the ARN ends in '*').
	secrets := fmt.Sprintf("arn:%s:secretsmanager:%s:%s:secret:%s*", *stack.Partition(), *stack.Region(), *stack.Account(), cfg.SecretPrefix)
	taskRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("SessionSecrets"),
		Actions:   jsii.Strings(StreamerSecretActions...),
		Resources: jsii.Strings(secrets),
	}))
	// A secret under a customer-managed key (cfg.SecretKMSKeyARN) is
	// decrypted by Secrets Manager with the caller's permission: the task
	// role may kms:Decrypt with exactly that key, only in Secrets Manager's
	// requests in this region (kms:ViaService) and only for the secrets
	// under the prefix (the SecretARN pair of the encryption context Secrets
	// Manager sends; AWS Secrets Manager User Guide, "Secret encryption and
	// decryption in AWS Secrets Manager"). The key policy must allow it too.
	if cfg.SecretKMSKeyARN != "" {
		// Secrets Manager uses a key of the secret's region, and the
		// secrets are the stack's region's (the stack is
		// environment-agnostic, so this is checked at deploy time): a
		// key of another region fails the deployment here rather than
		// every dial with AccessDenied.
		awscdk.NewCfnRule(stack, jsii.String("SecretKeyRegion"), &awscdk.CfnRuleProps{
			Assertions: &[]*awscdk.CfnRuleAssertion{{
				Assert:            awscdk.Fn_ConditionEquals(stack.Region(), jsii.String(strings.Split(cfg.SecretKMSKeyARN, ":")[3])),
				AssertDescription: jsii.String("the session secrets' key (secretKmsKeyArn " + cfg.SecretKMSKeyARN + ") must be in the stack's region: Secrets Manager encrypts a secret with a key of its own region"),
			}},
		})
		taskRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("SessionSecretsKey"),
			Actions:   jsii.Strings(StreamerSecretKeyActions...),
			Resources: jsii.Strings(cfg.SecretKMSKeyARN),
			Conditions: &map[string]any{
				"StringEquals": map[string]any{"kms:ViaService": "secretsmanager." + *stack.Region() + ".amazonaws.com"},
				"StringLike":   map[string]any{"kms:EncryptionContext:SecretARN": secrets},
			},
		}))
	}
	suppress(taskRole, "AwsSolutions-IAM5",
		"The worker reads the secrets the sessions' references name, which operators create under the environment's prefix at any time; the prefix is the boundary (ingest refuses a reference outside it), and the trailing * also covers the random suffix Secrets Manager appends to every secret ARN.",
		SecretPrefixResource(cfg.SecretPrefix))
	taskRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("WorkQueue"),
		Actions:   jsii.Strings(StreamerWorkQueueActions...),
		Resources: &[]*string{work.QueueArn()},
	}))
	if out.queue != nil {
		taskRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("OutputQueue"),
			Actions:   jsii.Strings(StreamerOutputQueueActions...),
			Resources: &[]*string{out.queue.QueueArn()},
		}))
	}
	if out.stream != nil {
		taskRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("OutputStream"),
			Actions:   jsii.Strings(StreamerOutputStreamActions...),
			Resources: &[]*string{out.stream.StreamArn()},
		}))
	}

	taskDef := awsecs.NewFargateTaskDefinition(stack, jsii.String("StreamerTask"), &awsecs.FargateTaskDefinitionProps{
		Cpu:            jsii.Number(float64(cfg.TaskCPU)),
		MemoryLimitMiB: jsii.Number(float64(cfg.TaskMemoryMiB)),
		TaskRole:       taskRole,
		RuntimePlatform: &awsecs.RuntimePlatform{
			CpuArchitecture:       awsecs.CpuArchitecture_ARM64(),
			OperatingSystemFamily: awsecs.OperatingSystemFamily_LINUX(),
		},
	})
	logs := awslogs.NewLogGroup(stack, jsii.String("StreamerLogs"), &awslogs.LogGroupProps{
		Retention:     retention(cfg.LogRetentionDays),
		RemovalPolicy: removal,
	})
	env := map[string]*string{
		schema.EnvTableName:           table.TableName(),
		schema.EnvQueueURL:            work.QueueUrl(),
		schema.EnvLeaseTTL:            jsii.String(cfg.LeaseTTL.String()),
		schema.EnvHeartbeatEvery:      jsii.String(cfg.HeartbeatEvery.String()),
		schema.EnvCheckpointEvery:     jsii.String(cfg.CheckpointEvery.String()),
		schema.EnvMaxConcurrentWrites: jsii.String(strconv.Itoa(cfg.MaxConcurrentWrites)),
		schema.EnvSafetyMargin:        jsii.String(cfg.SafetyMargin.String()),
		schema.EnvMaxSessions:         jsii.String(strconv.Itoa(cfg.MaxSessionsPerTask)),
		schema.EnvShutdownDeadline:    jsii.String(cfg.ShutdownDeadline.String()),
		schema.EnvAdminAddr:           jsii.String(fmt.Sprintf("0.0.0.0:%d", StreamerAdminPort)),
		schema.EnvSink:                jsii.String(cfg.Sink),
		schema.EnvLogLevel:            jsii.String(cfg.LogLevel),
		schema.EnvEnvironment:         jsii.String(cfg.Name),
		schema.EnvMetricsNS:           jsii.String(schema.DefaultMetricsNamespace),
		schema.EnvGoMemLimit:          jsii.String(fmt.Sprintf("%dMiB", cfg.GoMemLimitMiB())),
		// The fleet's claims share a budget sized from the table's write
		// headroom (EnvConfig.FleetClaimsPerSecond).
		schema.EnvFleetClaimsPerSecond: jsii.String(strconv.FormatFloat(cfg.FleetClaimsPerSecond(), 'f', -1, 64)),
	}
	if out.queue != nil {
		env[schema.EnvOutputQueueURL] = out.queue.QueueUrl()
	}
	if out.stream != nil {
		env[schema.EnvOutputStream] = out.stream.StreamArn()
		env[schema.EnvSinkKinesisHashBuckets] = jsii.String(strconv.Itoa(OnDemandHashBuckets))
	}
	if opts.SessionSecrets() {
		// The worker checks every reference's secret against the host it
		// dials and the one the handshake ends on, as ingest checks ws_url.
		env[schema.EnvSecretHosts] = jsii.String(opts.SecretHosts)
	}
	if opts.AllowedHosts != "" {
		// The worker checks every handshake redirect a session may follow
		// against the same allowlist ingest checks ws_url against.
		env[schema.EnvAllowedHosts] = jsii.String(opts.AllowedHosts)
	}
	// The admin server's bearer token (every endpoint but /healthz and
	// /readyz; the tasks send it with their hand-offs): generated by
	// Secrets Manager at deploy, injected by ECS at task start, never in
	// the task definition or a log.
	adminToken := awssecretsmanager.NewSecret(stack, jsii.String("StreamerAdminToken"), &awssecretsmanager.SecretProps{
		Description: jsii.String("wsfleet streamer admin token (WSFLEET_ADMIN_TOKEN): the bearer token of the workers' admin endpoints"),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength:     jsii.Number(48),
			ExcludePunctuation: jsii.Bool(true),
		},
		RemovalPolicy: removal,
	})
	suppress(adminToken, "AwsSolutions-SMG4",
		"The admin token is shared by every task of the service and read once at task start: a rotation takes effect through a rolling deployment (docs/infra.md, \"Rotating the admin token\"), which an automatic rotation Lambda cannot trigger without leaving tasks with different tokens mid-rollout.")
	taskDef.AddContainer(jsii.String(StreamerContainerName), &awsecs.ContainerDefinitionOptions{
		Secrets: &map[string]awsecs.Secret{
			schema.EnvAdminToken: awsecs.Secret_FromSecretsManager(adminToken, nil),
		},
		Image: awsecs.ContainerImage_FromAsset(jsii.String(root), &awsecs.AssetImageProps{
			File:       jsii.String(StreamerDockerfile),
			Platform:   awsecrassets.Platform_LINUX_ARM64(),
			Exclude:    jsii.Strings(StreamerContextExclude...),
			IgnoreMode: awscdk.IgnoreMode_DOCKER,
		}),
		Essential:   jsii.Bool(true),
		Environment: &env,
		// The worker releases its sessions and marks its record LEFT within
		// ShutdownDeadline of SIGTERM;
		// ECS waits StopTimeout before SIGKILL.
		StopTimeout: duration(cfg.StopTimeout),
		// distroless image: no shell or curl; the binary probes its own
		// admin endpoint (/healthz) and exits 0 or 1.
		HealthCheck: &awsecs.HealthCheck{
			Command:     jsii.Strings("CMD", StreamerBinary, "healthcheck"),
			Interval:    awscdk.Duration_Seconds(jsii.Number(15)),
			Timeout:     awscdk.Duration_Seconds(jsii.Number(5)),
			Retries:     jsii.Number(3),
			StartPeriod: awscdk.Duration_Seconds(jsii.Number(30)),
		},
		ReadonlyRootFilesystem: jsii.Bool(true),
		Logging: awsecs.LogDriver_AwsLogs(&awsecs.AwsLogDriverProps{
			StreamPrefix: jsii.String(StreamerContainerName),
			LogGroup:     logs,
			// Never block the worker on log delivery: a stalled write could
			// stall its heartbeats. EMF metrics may be dropped under pressure.
			Mode:          awsecs.AwsLogDriverMode_NON_BLOCKING,
			MaxBufferSize: awscdk.Size_Mebibytes(jsii.Number(25)),
		}),
	})

	suppress(taskDef, "AwsSolutions-ECS2",
		"The container environment holds names, URLs, timings and limits only (schema.WorkerEnv); the one secret, the admin token, is a Secrets Manager reference in the container's secrets, not in its environment.")
	suppress(taskDef.ExecutionRole(), "AwsSolutions-IAM5",
		"ecr:GetAuthorizationToken, which pulling the image needs, has no resource-level permissions: IAM accepts only Resource \"*\" for it. The execution role's other ECR and log grants name the image's repository and the log group.",
		"Resource::*")

	sg := awsec2.NewSecurityGroup(stack, jsii.String("StreamerSecurityGroup"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("wsfleet streamer tasks: outbound, and the admin port between the tasks"),
		AllowAllOutbound: jsii.Bool(true),
	})
	// A rebalancing worker tells the receiver of a move to claim it at once
	// (POST /handoff on the receiver's admin port, at its task address):
	// open between the tasks of this group only.
	sg.AddIngressRule(sg, awsec2.Port_Tcp(jsii.Number(StreamerAdminPort)), jsii.String("rebalancing hand-offs between workers"), jsii.Bool(false))
	svc := awsecs.NewFargateService(stack, jsii.String("StreamerService"), &awsecs.FargateServiceProps{
		Cluster:        cluster,
		TaskDefinition: taskDef,
		AssignPublicIp: jsii.Bool(true),
		VpcSubnets:     &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PUBLIC},
		SecurityGroups: &[]awsec2.ISecurityGroup{sg},
		// No desired count: CloudFormation starts at one task and
		// autoscaling owns the count from then on (a deploy never resets it).
		MinHealthyPercent:    jsii.Number(100),
		MaxHealthyPercent:    jsii.Number(200),
		CircuitBreaker:       &awsecs.DeploymentCircuitBreaker{Enable: jsii.Bool(true), Rollback: jsii.Bool(true)},
		EnableECSManagedTags: jsii.Bool(true),
		PropagateTags:        awsecs.PropagatedTagSource_SERVICE,
	})

	scaling := svc.AutoScaleTaskCount(&awsapplicationautoscaling.EnableScalingProps{
		MinCapacity: jsii.Number(float64(cfg.MinTasks)),
		MaxCapacity: jsii.Number(float64(cfg.MaxTasks)),
	})
	scaling.ScaleToTrackCustomMetric(jsii.String("CapacityTracking"), &awsecs.TrackCustomMetricProps{
		Metric:           streamerMetric(cfg, schema.MetricCapacityUtilization, "Average", time.Minute),
		TargetValue:      jsii.Number(cfg.TargetUtilization),
		ScaleInCooldown:  duration(cfg.ScaleInCooldown),
		ScaleOutCooldown: duration(cfg.ScaleOutCooldown),
	})
	return cluster, svc
}

// streamerMetric is one of the workers' EMF metrics.
func streamerMetric(cfg EnvConfig, name, statistic string, period time.Duration) awscloudwatch.Metric {
	return serviceMetric(cfg, schema.ServiceStreamer, name, statistic, period)
}

func serviceMetric(cfg EnvConfig, service, name, statistic string, period time.Duration) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:  jsii.String(schema.DefaultMetricsNamespace),
		MetricName: jsii.String(name),
		DimensionsMap: &map[string]*string{
			schema.DimEnvironment: jsii.String(cfg.Name),
			schema.DimService:     jsii.String(service),
		},
		Statistic: jsii.String(statistic),
		Period:    duration(period),
	})
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

// SecretPrefixResource is how cdk-nag names the streamer's grant on the
// secrets under prefix (its IAM5 suppression applies to exactly it).
func SecretPrefixResource(prefix string) string {
	return "Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:" + prefix + "*"
}
