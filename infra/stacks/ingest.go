package stacks

// The ingest Lambda and the HTTP API in front of it.

import (
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/wsfleet/wsfleet/shared/schema"
)

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
