package stacks

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/jsii-runtime-go"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// Alarm name suffixes (the full name is "wsfleet-<env>-<suffix>").
const (
	AlarmDLQNotEmpty = "dlq-not-empty"
	// AlarmOutputDLQ exists only with the sqs sink's output queue.
	AlarmOutputDLQ = "output-dlq-not-empty"
	AlarmOrphans   = "orphans-seen"
	AlarmLeaseLost = "lease-lost-rate"
	AlarmIngest5xx = "ingest-5xx"
	AlarmFailed    = "sessions-failed"
	AlarmAliveLow  = "alive-workers-low"
)

// DashboardName is the CloudWatch dashboard of env.
func DashboardName(env string) string { return StackID(env) }

// AlarmName is the full name of one of env's alarms.
func AlarmName(env, suffix string) string { return StackID(env) + "-" + suffix }

func newObservability(stack awscdk.Stack, cfg EnvConfig, opts Options, w *Wsfleet, cluster awsecs.Cluster) {
	topic := awssns.NewTopic(stack, jsii.String("AlarmTopic"), &awssns.TopicProps{
		DisplayName: jsii.String(fmt.Sprintf("wsfleet %s alarms", cfg.Name)),
		EnforceSSL:  jsii.Bool(true),
	})
	if opts.AlarmEmail != "" {
		topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(opts.AlarmEmail), nil))
	}
	awscdk.NewCfnOutput(stack, jsii.String("AlarmTopicArn"), &awscdk.CfnOutputProps{
		Value:       topic.TopicArn(),
		Description: jsii.String("SNS topic the alarms notify (subscribe to it, or pass -c " + CtxAlarmEmail + "=...)"),
	})
	action := awscloudwatchactions.NewSnsAction(topic)

	minute := time.Minute
	five := 5 * time.Minute
	alarmMissing := func(suffix string, metric awscloudwatch.IMetric, op awscloudwatch.ComparisonOperator, threshold float64, periods int, missing awscloudwatch.TreatMissingData, desc string) awscloudwatch.Alarm {
		a := awscloudwatch.NewAlarm(stack, jsii.String("Alarm-"+suffix), &awscloudwatch.AlarmProps{
			AlarmName:          jsii.String(AlarmName(cfg.Name, suffix)),
			AlarmDescription:   jsii.String(desc),
			Metric:             metric,
			ComparisonOperator: op,
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(float64(periods)),
			DatapointsToAlarm:  jsii.Number(float64(periods)),
			TreatMissingData:   missing,
		})
		a.AddAlarmAction(action)
		a.AddOkAction(action)
		return a
	}
	alarm := func(suffix string, metric awscloudwatch.IMetric, op awscloudwatch.ComparisonOperator, threshold float64, periods int, desc string) awscloudwatch.Alarm {
		return alarmMissing(suffix, metric, op, threshold, periods, awscloudwatch.TreatMissingData_NOT_BREACHING, desc)
	}
	lt := awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD
	gt := awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD
	gte := awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD

	dlqDepth := w.DLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
		Period: duration(minute), Statistic: jsii.String("Maximum"),
	})
	alarms := []awscloudwatch.Alarm{
		alarm(AlarmDLQNotEmpty, dlqDepth, gt, 0, 1,
			"Work-queue notifications were dead-lettered: ingest notified, no worker could handle them. The table is still the truth; inspect and redrive."),
		alarm(AlarmOrphans, streamerMetric(cfg, schema.MetricOrphansSeen, "Sum", minute), gt, 0, cfg.OrphanAlarmMinutes,
			fmt.Sprintf("STARTED sessions without an owner for %d consecutive minutes: the fleet is out of capacity or not claiming.", cfg.OrphanAlarmMinutes)),
		alarm(AlarmLeaseLost, streamerMetric(cfg, schema.MetricLeaseLost, "Sum", five), gte, cfg.LeaseLostPer5Min, 1,
			fmt.Sprintf("At least %v sessions lost by their owner in 5 minutes: heartbeats are failing or slow (throttling, overloaded tasks), so workers fence themselves or are declared dead.", cfg.LeaseLostPer5Min)),
		// Every worker reports how many it last saw ALIVE; the maximum
		// over the workers is the fleet's best view. No data at all means
		// no worker is reporting: breaching.
		alarmMissing(AlarmAliveLow, streamerMetric(cfg, schema.MetricAliveWorkers, "Maximum", minute), lt, float64(cfg.MinTasks), cfg.AliveAlarmMinutes,
			awscloudwatch.TreatMissingData_BREACHING,
			fmt.Sprintf("Fewer than %d workers (the service's minimum task count) ALIVE in the table for %d consecutive minutes: tasks are crashing, cannot heartbeat (DynamoDB throttling or unreachable), or were declared dead. `wsfleet workers` lists them.", cfg.MinTasks, cfg.AliveAlarmMinutes)),
		alarm(AlarmFailed, streamerMetric(cfg, schema.MetricSessionsFailed, "Sum", five), gte, cfg.FailedPer5Min, 1,
			fmt.Sprintf("At least %v sessions failed in 5 minutes: their sources can never be connected (address refused by policy, handshake 401/403/404/410, a redirect, or too many failed connects: dials, refused open messages, closes before the first message). GET /sessions/{id} shows each one's last_error; a new start retries it.", cfg.FailedPer5Min)),
		alarm(AlarmIngest5xx, w.Api.MetricServerError(&awscloudwatch.MetricOptions{Period: duration(five), Statistic: jsii.String("Sum")}), gte, cfg.Ingest5xxPer5Min, 1,
			fmt.Sprintf("The ingest API answered at least %v 5xx in 5 minutes.", cfg.Ingest5xxPer5Min)),
	}
	if w.OutputDLQ != nil {
		depth := w.OutputDLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Period: duration(minute), Statistic: jsii.String("Maximum"),
		})
		alarms = append(alarms, alarm(AlarmOutputDLQ, depth, gt, 0, 1,
			fmt.Sprintf("Output messages were dead-lettered: the output queue's consumers received them %d times without deleting them. Inspect and redrive.", OutputMaxReceiveCount)))
	}

	// Total owned sessions: the per-task gauge's average times running tasks.
	runningTasks := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:  jsii.String("ECS/ContainerInsights"),
		MetricName: jsii.String("RunningTaskCount"),
		DimensionsMap: &map[string]*string{
			"ClusterName": cluster.ClusterName(),
			"ServiceName": w.Service.ServiceName(),
		},
		Statistic: jsii.String("Average"),
		Period:    duration(minute),
		Label:     jsii.String("running tasks"),
	})
	ownedAvg := streamerMetric(cfg, schema.MetricOwnedSessions, "Average", minute).With(&awscloudwatch.MetricOptions{Label: jsii.String("owned per task (avg)")})
	ownedTotal := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression:   jsii.String("owned * tasks"),
		UsingMetrics: &map[string]awscloudwatch.IMetric{"owned": ownedAvg, "tasks": runningTasks},
		Label:        jsii.String("owned sessions (total ≈ avg × tasks)"),
		Period:       duration(minute),
	})
	graph := func(title string, left, right []awscloudwatch.IMetric, annotations ...*awscloudwatch.HorizontalAnnotation) awscloudwatch.IWidget {
		p := &awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &left, Width: jsii.Number(8), Height: jsii.Number(6)}
		if len(right) > 0 {
			p.Right = &right
		}
		if len(annotations) > 0 {
			p.LeftAnnotations = &annotations
		}
		return awscloudwatch.NewGraphWidget(p)
	}
	sm := func(name, stat string, label string) awscloudwatch.IMetric {
		return streamerMetric(cfg, name, stat, minute).With(&awscloudwatch.MetricOptions{Label: jsii.String(label)})
	}
	alarmRefs := make([]interfacesawscloudwatch.IAlarmRef, len(alarms))
	for i, a := range alarms {
		alarmRefs[i] = a
	}

	awscloudwatch.NewDashboard(stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName:   jsii.String(DashboardName(cfg.Name)),
		DefaultInterval: awscdk.Duration_Hours(jsii.Number(3)),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{
				awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
					Title: jsii.String("Alarms"), Alarms: &alarmRefs, Width: jsii.Number(24), Height: jsii.Number(3),
				}),
			},
			{
				graph("Owned sessions", []awscloudwatch.IMetric{ownedTotal}, []awscloudwatch.IMetric{ownedAvg, runningTasks}),
				graph("Capacity utilization (autoscaling target)",
					[]awscloudwatch.IMetric{sm(schema.MetricCapacityUtilization, "Average", "utilization % (avg)"), sm(schema.MetricCapacityUtilization, "Maximum", "utilization % (max task)")},
					nil,
					&awscloudwatch.HorizontalAnnotation{Value: jsii.Number(cfg.TargetUtilization), Label: jsii.String("target")}),
				graph("Orphans seen / lease lost / failed",
					[]awscloudwatch.IMetric{sm(schema.MetricOrphansSeen, "Sum", "orphans seen"), sm(schema.MetricLeaseLost, "Sum", "lease lost"),
						sm(schema.MetricSessionsFailed, "Sum", "sessions failed")},
					[]awscloudwatch.IMetric{sm(schema.MetricAcquired, "Sum", "acquired"), sm(schema.MetricReleased, "Sum", "released")}),
			},
			{
				graph("Claim latency (ms)",
					[]awscloudwatch.IMetric{sm(schema.MetricClaimLatencyMs, "p50", "claim p50"), sm(schema.MetricClaimLatencyMs, "p99", "claim p99")},
					[]awscloudwatch.IMetric{sm(schema.MetricHeartbeatLatencyMs, "p99", "heartbeat p99")}),
				graph("Work queue",
					[]awscloudwatch.IMetric{dlqDepth.With(&awscloudwatch.MetricOptions{Label: jsii.String("DLQ visible")}), w.WorkQueue.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: duration(minute), Statistic: jsii.String("Maximum"), Label: jsii.String("work queue visible")})},
					[]awscloudwatch.IMetric{w.WorkQueue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: duration(minute), Statistic: jsii.String("Maximum"), Label: jsii.String("oldest message age (s)")})}),
				graph("Ingest API",
					[]awscloudwatch.IMetric{
						w.Api.MetricClientError(&awscloudwatch.MetricOptions{Period: duration(minute), Statistic: jsii.String("Sum"), Label: jsii.String("4xx")}),
						w.Api.MetricServerError(&awscloudwatch.MetricOptions{Period: duration(minute), Statistic: jsii.String("Sum"), Label: jsii.String("5xx")}),
					},
					[]awscloudwatch.IMetric{w.Api.MetricCount(&awscloudwatch.MetricOptions{Period: duration(minute), Statistic: jsii.String("Sum"), Label: jsii.String("requests")})}),
			},
			{
				graph("Stream traffic",
					[]awscloudwatch.IMetric{sm(schema.MetricMessagesIn, "Sum", "messages in"), sm(schema.MetricDuplicatesDropped, "Sum", "duplicates dropped")},
					[]awscloudwatch.IMetric{sm(schema.MetricReconnects, "Sum", "reconnects"), sm(schema.MetricSinkErrors, "Sum", "sink errors")}),
				graph("Ingest outcomes",
					[]awscloudwatch.IMetric{
						serviceMetric(cfg, schema.ServiceIngest, schema.MetricStarts, "Sum", minute),
						serviceMetric(cfg, schema.ServiceIngest, schema.MetricStops, "Sum", minute),
						serviceMetric(cfg, schema.ServiceIngest, schema.MetricRejects, "Sum", minute),
					},
					[]awscloudwatch.IMetric{serviceMetric(cfg, schema.ServiceIngest, schema.MetricNotifyFailures, "Sum", minute)}),
				graph("Streamer CPU / memory (%)",
					[]awscloudwatch.IMetric{w.Service.MetricCpuUtilization(nil), w.Service.MetricMemoryUtilization(nil)}, nil),
			},
			{
				graph("Workers alive (worker records) vs running tasks",
					[]awscloudwatch.IMetric{sm(schema.MetricAliveWorkers, "Maximum", "alive workers (max view)"), sm(schema.MetricAliveWorkers, "Minimum", "alive workers (min view)"), runningTasks},
					[]awscloudwatch.IMetric{sm(schema.MetricWorkersDeclaredDead, "Sum", "declared dead")},
					&awscloudwatch.HorizontalAnnotation{Value: jsii.Number(float64(cfg.MinTasks)), Label: jsii.String("min tasks")}),
				graph("Heartbeat latency (ms)",
					[]awscloudwatch.IMetric{sm(schema.MetricHeartbeatLatencyMs, "p50", "heartbeat p50"), sm(schema.MetricHeartbeatLatencyMs, "p99", "heartbeat p99"), sm(schema.MetricHeartbeatLatencyMs, "Maximum", "heartbeat max")},
					nil,
					&awscloudwatch.HorizontalAnnotation{Value: jsii.Number(float64((cfg.LeaseTTL - cfg.SafetyMargin).Milliseconds())), Label: jsii.String("self-fencing deadline")}),
			},
		},
	})
}
