package devstack

// Where a running stack's parts are: its resolved configuration, folders,
// URLs and endpoints, and the environment that points a process at its
// engines.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Config is the stack's resolved configuration (ports filled in).
func (s *Stack) Config() Config { return s.cfg }

// RunID is the run id in this stack's worker ids ("" in memory, unless
// Config.RunID).
func (s *Stack) RunID() string { return s.cfg.RunID }

// AdminTokenPath is the file holding the workers' admin token (mode 0600):
// curl -H "Authorization: Bearer $(cat <it>)" http://<worker>/status.
func (s *Stack) AdminTokenPath() string { return filepath.Join(s.cfg.Dir, "admin-token") }

// LogDir is where every process's log goes.
func (s *Stack) LogDir() string { return filepath.Join(s.cfg.Dir, "logs") }

// DataDir is dynalite's data folder ("" when in memory).
func (s *Stack) DataDir() string {
	if s.cfg.InMemory {
		return ""
	}
	return filepath.Join(s.cfg.Dir, "data")
}

// APIURL is the ingest front's base URL.
func (s *Stack) APIURL() string { return "http://127.0.0.1:" + strconv.Itoa(s.cfg.Ports.API) }

// FeedURL is the feed's HTTP base URL (feed.URL(FeedURL(), session) is a
// session's WebSocket URL).
func (s *Stack) FeedURL() string {
	scheme := "https"
	if s.cfg.PlainWS {
		scheme = "http"
	}
	return scheme + "://127.0.0.1:" + strconv.Itoa(s.cfg.Ports.Feed)
}

// TLSDir is where the feed's CA lives (Dir/tls; its ca.pem is what the
// workers trust).
func (s *Stack) TLSDir() string { return filepath.Join(s.cfg.Dir, "tls") }

// CAFile is the feed's CA certificate ("" with PlainWS).
func (s *Stack) CAFile() string {
	if s.CA == nil {
		return ""
	}
	return s.CA.CertFile
}

// Sinks are the workers' sink records.
func (s *Stack) Sinks() *Sinks { return s.sinks }

// DynamoEndpoint is where the stack's clients reach DynamoDB: the model
// when there is one, else dynalite.
func (s *Stack) DynamoEndpoint() string {
	if s.Model != nil {
		return s.Model.Endpoint()
	}
	return s.Dynamo.Endpoint()
}

// EngineEnv is the environment that points the AWS SDK (and the aws CLI) at
// the stack's engines.
func (s *Stack) EngineEnv() []string {
	env := []string{
		"AWS_ENDPOINT_URL_DYNAMODB=" + s.DynamoEndpoint(),
		"AWS_ENDPOINT_URL_SQS=" + s.SQS.Endpoint(),
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local",
		"AWS_EC2_METADATA_DISABLED=true",
	}
	if e := s.SecretsManagerEndpoint(); e != "" {
		env = append(env, "AWS_ENDPOINT_URL_SECRETS_MANAGER="+e)
	}
	return env
}

func (s *Stack) awsEnv() []string { return append(baseEnv(), s.EngineEnv()...) }

// baseEnv is this process's environment without any AWS_ or WSFLEET_
// variable (a developer's profile must never reach the local stack).
func baseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "WSFLEET_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
