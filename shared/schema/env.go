package schema

import (
	"strings"
)

// EnvPrefix starts every wsfleet environment variable. A deployable refuses
// to start with a variable under this prefix that it does not read
// (shared/suggest.UnknownEnv), so that a typo is never silently ignored.
const EnvPrefix = "WSFLEET_"

// Variables of the repository's tools, not of the deployables. A
// deployable accepts and ignores them: the Makefile exports EnvRepoRoot to
// every command it runs, and a shell that drives the CLI or the tests may
// export the other two.
const (
	EnvRepoRoot = "WSFLEET_ROOT"    // the repository root (tests, the infra app)
	EnvAPI      = "WSFLEET_API"     // the CLI's default ingest API URL
	EnvEngines  = "WSFLEET_ENGINES" // "external": tests use the engines the AWS SDK reaches
)

// ToolEnv are the tool variables every deployable ignores.
func ToolEnv() []string { return []string{EnvRepoRoot, EnvAPI, EnvEngines} }

// WorkerEnv are the variables the worker (workers/streamer) reads.
func WorkerEnv() []string {
	return []string{
		EnvTableName, EnvQueueURL, EnvOutputQueueURL, EnvMetricsNS, EnvEnvironment, EnvAllowPrivateIPs,
		EnvWorkerID, EnvLeaseTTL, EnvHeartbeatEvery, EnvCheckpointEvery, EnvSafetyMargin, EnvReconcileEvery, EnvAuditEvery,
		EnvRebalanceEvery, EnvMinHold, EnvRebalanceMoves, EnvAdvertiseAddr,
		EnvMaxSessions, EnvClaimsPerSecond, EnvShutdownDeadline, EnvShutdownInFlight, EnvAdminAddr, EnvSink, EnvLogLevel,
		EnvDialTimeout, EnvPingEvery, EnvPingTimeout, EnvCloseGrace, EnvReconnectMin, EnvReconnectMax,
		EnvReadLimit, EnvMetricsEvery, EnvQueueWait, EnvSinkAttempts, EnvStoreRPCTimeout, EnvAdminPprof, EnvAdminToken,
		EnvMaxConcurrentWrites, EnvAllowedHosts, EnvMaxDialFailures, EnvTenureHeader, EnvZone, EnvStandbyCheckEvery, EnvExtraCAFile, EnvTLSResumption, EnvDialsPerHost, EnvDialLimits, EnvFleetClaimsPerSecond, EnvHandshakesInFlight, EnvHandshakesPerHost, EnvSwitchBufferBudget, EnvLargeFrameBudget, EnvSecretCacheTTL, EnvSecretHosts,
		EnvOutputStream, EnvSinkBatching, EnvSinkMaxDelay, EnvSinkPackWait, EnvSinkMaxBatch, EnvSinkMaxBatchBytes, EnvSinkInFlight, EnvSinkBufferBytes,
		EnvSinkBufferBudget, EnvSinkRequestTimeout, EnvSinkPermanentAttempts, EnvSinkRepeatFailures,
		EnvSinkKinesisAggregateBytes, EnvSinkKinesisHashBuckets,
		EnvSinkSQSPackBytes,
	}
}

// IngestEnv are the variables the ingest function (and its local front,
// ingest-local) reads.
func IngestEnv() []string {
	return []string{
		EnvTableName, EnvQueueURL, EnvMetricsNS, EnvEnvironment,
		EnvAllowedHosts, EnvAllowPrivateIPs, EnvSigningSecretARN, EnvSigningSecret, EnvSecretPrefix, EnvSecretHosts,
	}
}

// LookupIn is os.LookupEnv over environ (KEY=VALUE pairs; the last value
// of a repeated key wins, as exec passes it on).
func LookupIn(environ []string) func(string) (string, bool) {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}
