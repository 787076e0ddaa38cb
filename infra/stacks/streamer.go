package stacks

// The streamer's Fargate service: task, container, scaling, alarms.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapplicationautoscaling"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecrassets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/wsfleet/wsfleet/shared/schema"
)

func newStreamer(stack awscdk.Stack, cfg EnvConfig, opts Options, root string, table awsdynamodb.Table, work awssqs.Queue, out sinkOutput, removal awscdk.RemovalPolicy) (awsecs.Cluster, awsecs.FargateService) {
	// Public subnets only and no NAT gateway: the workers need outbound
	// internet (WebSocket sources, AWS APIs) and accept no inbound traffic.
	// One subnet per AZ (cfg.AZs; an AZ more costs nothing without NAT
	// gateways): ECS spreads the tasks over them (EnvConfig.AZLossShortfall).
	// The stack is environment-agnostic (synthesized offline), and such a
	// stack's own AZ list has two (CDK's Stack.availabilityZones); the
	// VPC names its AZs as deploy-time tokens instead, the Region's first
	// cfg.AZs (Fn::Select over Fn::GetAZs), which CDK accepts unresolved.
	azs := make([]*string, cfg.AZs)
	for i := range azs {
		azs[i] = awscdk.Fn_Select(jsii.Number(i), awscdk.Fn_GetAzs(jsii.String("")))
	}
	vpc := awsec2.NewVpc(stack, jsii.String("Vpc"), &awsec2.VpcProps{
		IpAddresses:       awsec2.IpAddresses_Cidr(jsii.String("10.60.0.0/16")),
		AvailabilityZones: &azs,
		NatGateways:       jsii.Number(0),
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
		// A rolling deploy replaces DeployWaveTasks at a time: each wave's
		// hand-offs fit the table's claim budget (EnvConfig.DeployWaveDrain).
		MinHealthyPercent:    jsii.Number(100),
		MaxHealthyPercent:    jsii.Number(float64(cfg.DeployMaxPercent)),
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

// SecretPrefixResource is how cdk-nag names the streamer's grant on the
// secrets under prefix (its IAM5 suppression applies to exactly it).
func SecretPrefixResource(prefix string) string {
	return "Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:" + prefix + "*"
}
