package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/cmd/wsfleet/apiclient"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// The local stack's Secrets Manager: ingest takes references under
// SecretPrefix only, a worker resolves the seeded demo secret against the
// stand-in and streams, a missing secret fails its session at once naming
// it, the stand-in takes the PutSecretValue the banner prints, and no value
// reaches a worker's log or sink file.
func TestSecretReferencesOnTheLocalStack(t *testing.T) {
	cfg := testConfig(t, 1)
	fastTimings(&cfg)
	cfg.SecretsManager = true
	cfg.Worker.SecretCacheTTL = 2 * time.Second // devstack --secret-cache-ttl 2s, as docs/local-stack.md shows
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := startStack(ctx, t, cfg)
	if e := st.SecretsManagerEndpoint(); !slices.Contains(st.EngineEnv(), "AWS_ENDPOINT_URL_SECRETS_MANAGER="+e) {
		t.Fatalf("engine env %q lacks the stand-in %s", st.EngineEnv(), e)
	}
	start := func(id, header string) error {
		_, err := st.API.Start(ctx, apiclient.StartRequest{ConnectionID: id, Spec: spec.Spec{
			WSURL: feed.URL(st.FeedURL(), id), Resume: &spec.Resume{QueryParam: feed.DefaultResumeParam},
			Headers: map[string]string{"Authorization": header}}})
		return err
	}
	if err := start("demo", "Bearer {{secret:"+DemoSecret+"#token}}"); err != nil {
		t.Fatal(err)
	}
	if err := start("missing", "Bearer {{secret:"+SecretPrefix+"missing}}"); err != nil {
		t.Fatal(err)
	}
	if err := start("outside", "Bearer {{secret:elsewhere/demo}}"); err == nil || !strings.Contains(err.Error(), SecretPrefix) {
		t.Fatalf("a reference outside %s: %v, want refused naming the prefix", SecretPrefix, err)
	}
	testwait.Eventually(t, 30*time.Second, "the demo session streaming", func() bool { return st.Sinks().Last()["demo"].Seq >= 5 })
	w := st.Workers()[0]
	digestA := sinkAuthDigests(t, w.SinkPath(), "demo")
	if len(digestA) != 1 || digestA[0] != feed.AuthDigest("Bearer demo-token") {
		t.Fatalf("the demo session's sink lines carry the digests %q, want only %s (the seeded token's)", digestA, feed.AuthDigest("Bearer demo-token"))
	}
	got, err := st.API.Get(ctx, "demo")
	if err != nil || len(got.SecretRefs) != 1 || !strings.Contains(got.SecretRefs[0], DemoSecret) {
		t.Fatalf("GET demo: secret_refs %q (%v), want the reference", got.SecretRefs, err)
	}
	testwait.Eventually(t, 30*time.Second, "the missing secret's session FAILED naming it", func() bool {
		s, err := st.API.Get(ctx, "missing")
		return err == nil && s.Failed && strings.Contains(s.LastError, fmt.Sprintf("%q", SecretPrefix+"missing")) &&
			strings.Contains(s.LastError, "ResourceNotFoundException")
	})

	// The rotation the banner prints without the aws CLI.
	body := fmt.Sprintf(`{"SecretId":%q,"SecretString":"{\"token\":\"rotated-token\"}"}`, DemoSecret)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, st.SecretsManagerEndpoint()+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "secretsmanager.PutSecretValue")
	req.Header.Set("Authorization", "local")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PutSecretValue: HTTP %d", resp.StatusCode)
	}
	// The next connection (the feed drops the demo session's, as the
	// doc's POST /control/drop does) carries the rotated token's digest
	// once the workers' 2 s cache let it through.
	digestB := feed.AuthDigest("Bearer rotated-token")
	next := time.Now()
	testwait.Eventually(t, 30*time.Second, "the demo session's sink lines carrying the rotated token's digest", func() bool {
		if slices.Contains(sinkAuthDigests(t, w.SinkPath(), "demo"), digestB) {
			return true
		}
		if time.Now().After(next) {
			next = time.Now().Add(time.Second)
			if _, err := st.FeedClient.Drop(ctx, "demo", false); err != nil {
				t.Logf("drop: %v", err)
			}
		}
		return false
	})
	if doc, err := os.ReadFile("../../docs/local-stack.md"); err != nil || !strings.Contains(string(doc), digestA[0]) || !strings.Contains(string(doc), digestB) {
		t.Errorf("docs/local-stack.md's rotation should show digest A %s and digest B %s (%v)", digestA[0], digestB, err)
	}
	for _, path := range []string{w.LogPath(), w.SinkPath()} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "demo-token") {
			t.Errorf("%s holds the secret's value", path)
		}
	}
}

// sinkAuthDigests are the distinct "auth" values (feed.AuthDigest) of the
// data of session's lines in a worker's sink file, in order of appearance.
func sinkAuthDigests(t *testing.T, path, session string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		var r struct {
			ConnectionID string `json:"connection_id"`
			Data         struct {
				Auth string `json:"auth"`
			} `json:"data"`
		}
		if json.Unmarshal([]byte(l), &r) != nil || r.ConnectionID != session || slices.Contains(out, r.Data.Auth) {
			continue
		}
		out = append(out, r.Data.Auth)
	}
	return out
}
