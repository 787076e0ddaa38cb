package schema

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wsfleet/wsfleet/shared/suggest"
)

// EnvPrefix starts every wsfleet environment variable. A deployable refuses
// to start with a variable under this prefix that it does not read
// (UnknownEnv), so that a typo is never silently ignored.
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
		EnvWorkerID, EnvLeaseTTL, EnvHeartbeatEvery, EnvCheckpointEvery, EnvSafetyMargin, EnvReconcileEvery,
		EnvRebalanceEvery, EnvMinHold, EnvRebalanceMoves, EnvAdvertiseAddr,
		EnvMaxSessions, EnvClaimsPerSecond, EnvShutdownDeadline, EnvShutdownInFlight, EnvAdminAddr, EnvSink, EnvLogLevel,
		EnvDialTimeout, EnvPingEvery, EnvPingTimeout, EnvCloseGrace, EnvReconnectMin, EnvReconnectMax,
		EnvReadLimit, EnvMetricsEvery, EnvQueueWait, EnvSinkAttempts, EnvStoreRPCTimeout, EnvAdminPprof,
		EnvMaxConcurrentWrites, EnvAllowedHosts, EnvMaxDialFailures, EnvDialsPerHost,
		EnvOutputStream, EnvSinkBatching, EnvSinkMaxDelay, EnvSinkMaxBatch, EnvSinkMaxBatchBytes, EnvSinkInFlight, EnvSinkBufferBytes,
		EnvSinkBufferBudget, EnvSinkRequestTimeout, EnvSinkPermanentAttempts,
	}
}

// IngestEnv are the variables the ingest function (and its local front,
// ingest-local) reads.
func IngestEnv() []string {
	return []string{
		EnvTableName, EnvQueueURL, EnvMetricsNS, EnvEnvironment,
		EnvAllowedHosts, EnvAllowPrivateIPs, EnvSigningSecretARN, EnvSigningSecret,
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

// UnknownEnv returns one error per variable of environ (KEY=VALUE pairs,
// os.Environ()) that starts with EnvPrefix and is neither in known nor in
// ToolEnv, sorted by name. Each error names the closest known variable (by
// edit distance) when it is close enough to be the one meant, e.g. "unknown
// variable WSFLEET_LEASE_TT (did you mean WSFLEET_LEASE_TTL?)". Values are
// never part of the error.
func UnknownEnv(environ, known []string) []error {
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || slices.Contains(known, name) || slices.Contains(ToolEnv(), name) {
			continue
		}
		if !slices.Contains(unknown, name) {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	var errs []error
	for _, name := range unknown {
		if near := closest(name, known); near != "" {
			errs = append(errs, fmt.Errorf("unknown variable %s (did you mean %s?)", name, near))
		} else {
			errs = append(errs, fmt.Errorf("unknown variable %s", name))
		}
	}
	return errs
}

// closest is the name of known nearest to name (shared/suggest), or ""
// when none is within a third of the name's length after the prefix (at
// least 2 edits): a name that far off is not a typo of a known one.
func closest(name string, known []string) string {
	return suggest.Nearest(name, known, max(2, len(strings.TrimPrefix(name, EnvPrefix))/3))
}
