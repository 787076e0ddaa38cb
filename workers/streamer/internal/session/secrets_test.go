package session

// Secret references in the headers and open messages: resolved at every
// dial through the real Secrets Manager SDK client (against the stand-in,
// testkit/secretsmanager), a rotation reaching the first dial after the
// cache's TTL, a permanent failure failing the session at once, a
// transient one counted and retried, and no value anywhere but on the
// wire.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/secretref"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/secretsmanager"
	"github.com/wsfleet/wsfleet/testkit/syncbuf"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/secrets"
)

const (
	apiSecret = "wsfleet/test/api" // {"token":…}
	keySecret = "wsfleet/test/key" // a plain string
	authRef   = "Bearer {{secret:" + apiSecret + "#token}}"
	openRef   = `{"op":"auth","key":"{{secret:` + keySecret + `}}","from":"{{resume_from}}"}`
)

// bound binds the test secrets (wsfleet/test/) to the local sources'
// host, as WSFLEET_SECRET_HOSTS would.
func bound(t *testing.T, c *Config) *Config {
	t.Helper()
	b, err := secretref.ParseBindings("wsfleet/test/=127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	c.SecretHosts = b
	return c
}

// lockedBuffer is a bytes.Buffer safe for the session's logger and the test.
type lockedBuffer = syncbuf.Buffer

// withRefs makes s1's spec carry the Authorization header authRef and the
// open message openRef.
func withRefs(t *testing.T) func(*lease.Item) {
	cfg := sourceJSON(t, source.Config{OpenMessages: []source.OpenMessage{{Text: text(openRef)}}})
	return func(it *lease.Item) {
		spectest.Edit(t, &it.Spec, func(s *spec.Spec) {
			s.Headers = map[string]string{"Authorization": authRef}
			s.Config = cfg
		})
	}
}

// logged makes h's sessions log at debug level into the returned buffer.
func logged(h *harness) *lockedBuffer {
	b := &lockedBuffer{}
	h.env.Log = zerolog.New(b).Level(zerolog.DebugLevel)
	return b
}

// authSource reads each connection's open message, then sends 3 messages
// (connection n: seqs 3n-2..3n) and keeps the connection until next gets
// a value (nil: until the session closes it).
func authSource(t *testing.T, next <-chan struct{}) (*scripted, string) {
	return newScripted(t, func(l *link) {
		if _, err := l.read(); err != nil {
			return
		}
		for i := 3*l.n - 2; i <= 3*l.n; i++ {
			if l.send(websocket.MessageText, fmt.Sprintf(`{"seq":%d}`, i)) != nil {
				return
			}
		}
		// The request's context does not end with a hijacked connection:
		// a read does.
		ended := make(chan struct{})
		go func() { l.drain(); close(ended) }()
		select {
		case <-next:
		case <-ended:
		}
	})
}

// noValue fails the test when any of texts holds one of values.
func noValue(t *testing.T, values []string, texts map[string]string) {
	t.Helper()
	for where, text := range texts {
		for _, v := range values {
			if strings.Contains(text, v) {
				t.Errorf("%s holds the secret value %q", where, v)
			}
		}
	}
}

// A header reference and an open-message reference are resolved at every
// dial through the SDK client; a rotation reaches the first dial after the
// cache's TTL (not before); the stored spec keeps the references; and no
// value is in the logs, the status, the error texts or the sink records.
func TestSecretReferencesAreResolvedAtEveryDial(t *testing.T) {
	sms := secretsmanager.Start(t)
	sms.Put(apiSecret, `{"token":"tok-v1"}`)
	sms.Put(keySecret, "key-v1")
	clk := clock.NewFake(time.Now())
	const ttl = time.Minute
	next := make(chan struct{})
	src, url := authSource(t, next) // before the harness: its cleanup, ending the session, runs first
	h := newHarness(t, bound(t, testConfig()))
	h.env.Secrets = secrets.NewResolver(secretsmanager.NewClient(sms.Endpoint()), secrets.Config{TTL: ttl, Clock: clk})
	logs := logged(h)
	h.put("s1", url, withRefs(t))
	s, done := h.start("s1")

	sent := func(conn int, token, key, from string) {
		t.Helper()
		if got := src.header(conn).Get("Authorization"); got != "Bearer "+token {
			t.Errorf("connection %d: Authorization %q, want the resolved %q", conn+1, got, "Bearer "+token)
		}
		want := `{"op":"auth","key":"` + key + `","from":"` + from + `"}`
		if got := src.got(conn); len(got) < 1 || got[0] != want {
			t.Errorf("connection %d: open messages %q, want %q first", conn+1, got, want)
		}
	}
	testwait.Eventually(t, 5*time.Second, "3 messages on the first connection", func() bool { return h.rec.count() >= 3 })
	sent(0, "tok-v1", "key-v1", "")

	// Rotated, but the cached values are younger than the TTL: the
	// reconnect sends the previous ones (the rotation's AWSPREVIOUS).
	sms.Put(apiSecret, `{"token":"tok-v2"}`)
	sms.Put(keySecret, "key-v2")
	next <- struct{}{}
	testwait.Eventually(t, 5*time.Second, "3 more messages on the second connection", func() bool { return h.rec.count() >= 6 })
	sent(1, "tok-v1", "key-v1", "4")

	clk.Advance(ttl + time.Second)
	next <- struct{}{}
	testwait.Eventually(t, 5*time.Second, "3 more messages on the third connection", func() bool { return h.rec.count() >= 9 })
	sent(2, "tok-v2", "key-v2", "7")
	if n := sms.Calls(secretsmanager.OpGetSecretValue); n != 4 {
		t.Errorf("%d GetSecretValue calls, want 4 (two names, fetched at the first dial and after the TTL)", n)
	}

	st, _ := json.Marshal(s.Status())
	s.Interrupt(ErrStopRequested)
	if err := wait(t, done, 5*time.Second); !errors.Is(err, ErrStopRequested) {
		t.Fatalf("Run = %v", err)
	}
	stored, err := h.store.Get(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	for where, sp := range map[string]string{"the table's item": stored.Spec, "the held item": s.Held().Item().Spec} {
		d, err := spec.Decode(sp)
		if err != nil || d.Headers["Authorization"] != authRef || *d.Config.OpenMessages[0].Text != openRef {
			t.Errorf("%s: spec %+v (%v), want the references as written", where, d, err)
		}
	}
	var records strings.Builder
	for _, m := range h.rec.msgs {
		fmt.Fprintf(&records, "%s %s\n", m.ConnectionID, m.Data)
	}
	if !strings.Contains(logs.String(), "reconnected") {
		t.Fatalf("no reconnect logged (is the log at debug level?):\n%s", logs)
	}
	noValue(t, []string{"tok-v", "key-v"}, map[string]string{
		"the log": logs.String(), "the status": string(st), "the sink records": records.String(),
	})
}

// A secret that cannot be had for good (missing, access denied, no
// provider) fails the session at its first dial, the source never
// reached, with a last_error naming the secret and not a value.
func TestUnresolvableSecretFailsTheSessionAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*secretsmanager.Server)
		nilP  bool
		cause string
	}{
		{"not found", func(*secretsmanager.Server) {}, false, "ResourceNotFoundException (permanent)"},
		{"access denied", func(s *secretsmanager.Server) {
			s.Put(apiSecret, `{"token":"tok-v1"}`)
			s.Fail(secretsmanager.OpGetSecretValue, "AccessDeniedException", 1)
		}, false, "AccessDeniedException (permanent)"},
		{"no provider", func(*secretsmanager.Server) {}, true, "no secret provider configured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sms := secretsmanager.Start(t)
			tc.setup(sms)
			src, url := authSource(t, nil)
			h := newHarness(t, bound(t, connectConfig(5)))
			if !tc.nilP {
				h.env.Secrets = secrets.NewResolver(secretsmanager.NewClient(sms.Endpoint()), secrets.Config{})
			}
			logs := logged(h)
			h.put("s1", url, withRefs(t))
			s, done := h.start("s1")
			err := wait(t, done, 10*time.Second)
			if !errors.Is(err, ErrSourceFailed) || strings.Contains(err.Error(), "in a row") {
				t.Fatalf("Run = %v, want ErrSourceFailed at the first dial", err)
			}
			st := s.Status()
			t.Logf("last_error: %s", st.LastError)
			want := `header Authorization: secret reference 1 (at byte 7): secret "` + apiSecret + `"`
			for where, text := range map[string]string{"Run's error": err.Error(), "last_error": st.LastError} {
				if !strings.Contains(text, want) || !strings.Contains(text, tc.cause) {
					t.Errorf("%s %q, want %q and %q", where, text, want, tc.cause)
				}
			}
			if n := src.conns(); n != 0 {
				t.Errorf("the source got %d connections, want none", n)
			}
			if n := sms.Calls(secretsmanager.OpGetSecretValue); !tc.nilP && n != 1 {
				t.Errorf("%d GetSecretValue calls, want 1", n)
			}
			noValue(t, []string{"tok-v"}, map[string]string{"the log": logs.String(), "last_error": st.LastError})
		})
	}
}

// Throttling is transient: the dial fails, counts toward MaxDialFailures
// and is retried; the session streams once Secrets Manager answers, and
// fails after MaxDialFailures throttled dials in a row.
func TestThrottledSecretIsRetriedAndCounted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int
	}{{"answers in time", 3}, {"throttled to the limit", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			sms := secretsmanager.Start(t)
			sms.Put(apiSecret, `{"token":"tok-v1"}`)
			sms.Put(keySecret, "key-v1")
			sms.Fail(secretsmanager.OpGetSecretValue, "ThrottlingException", 2)
			// One attempt per GetSecretValue: each throttle is one failed dial.
			client := secretsmanager.NewClient(sms.Endpoint(), func(o *sm.Options) { o.RetryMaxAttempts = 1 })
			src, url := authSource(t, nil)
			h := newHarness(t, bound(t, connectConfig(tc.limit)))
			h.env.Secrets = secrets.NewResolver(client, secrets.Config{})
			noted := notes(h)
			h.put("s1", url, withRefs(t))
			s, done := h.start("s1")
			if tc.limit == 2 {
				err := wait(t, done, 10*time.Second)
				if !errors.Is(err, ErrSourceFailed) || !strings.Contains(err.Error(), "2 connects failed in a row") ||
					!strings.Contains(err.Error(), "ThrottlingException (transient)") || src.conns() != 0 {
					t.Fatalf("Run = %v after %d connections, want ErrSourceFailed after 2 throttled dials", err, src.conns())
				}
				return
			}
			testwait.Eventually(t, 5*time.Second, "3 messages after two throttled dials", func() bool { return h.rec.count() >= 3 })
			if got := src.header(0).Get("Authorization"); got != "Bearer tok-v1" {
				t.Errorf("Authorization %q", got)
			}
			if n := sms.Calls(secretsmanager.OpGetSecretValue); n != 4 {
				t.Errorf("%d GetSecretValue calls, want 4 (2 throttled, then both names)", n)
			}
			if st := s.Status(); !strings.Contains(st.LastError, `secret "`+apiSecret+`": GetSecretValue: ThrottlingException (transient)`) {
				t.Errorf("last_error %q, want the throttled secret", st.LastError)
			}
			if n := noted(); len(n) != 1 {
				t.Errorf("NoteError calls %q, want one", n)
			}
			s.Interrupt(ErrStopRequested)
			_ = wait(t, done, 5*time.Second)
		})
	}
}

// A secret whose value lacks the #key is transient (fixing the secret
// fixes the session): counted toward MaxDialFailures, never quoting the
// value.
func TestSecretWithoutTheKeyIsTransient(t *testing.T) {
	sms := secretsmanager.Start(t)
	sms.Put(apiSecret, `{"other":"tok-v1"}`)
	sms.Put(keySecret, "key-v1")
	src, url := authSource(t, nil)
	h := newHarness(t, bound(t, connectConfig(2)))
	h.env.Secrets = secrets.NewResolver(secretsmanager.NewClient(sms.Endpoint()), secrets.Config{})
	h.put("s1", url, withRefs(t))
	s, done := h.start("s1")
	err := wait(t, done, 10*time.Second)
	want := `secret "` + apiSecret + `" has no JSON key "token"`
	if !errors.Is(err, ErrSourceFailed) || !strings.Contains(err.Error(), "2 connects failed in a row") || !strings.Contains(err.Error(), want) || src.conns() != 0 {
		t.Fatalf("Run = %v after %d connections, want ErrSourceFailed after 2 failed dials naming %q", err, src.conns(), want)
	}
	noValue(t, []string{"tok-v", "key-v"}, map[string]string{"Run's error": err.Error(), "last_error": s.Status().LastError})
}

// A secret whose value makes a header value or an open message larger
// than the stored form allows (spec.MaxHeaderValueLen; source's
// MaxOpenMessageBytes) fails the session at its first dial, sized before
// anything is built: the source is never reached, and the reason names the
// field and the bound, never the value. (Sixteen references to a 64 KiB
// secret once expanded to a 1 MiB message at every dial; hundreds, before
// secretref.MaxRefs, to hundreds of MiB.)
func TestOversizedSecretExpansionFailsTheSession(t *testing.T) {
	big := strings.Repeat("v", 64<<10) // Secrets Manager's largest SecretString
	for _, tc := range []struct {
		name   string
		edit   func(*spec.Spec)
		reason string
	}{
		{"a header value", func(s *spec.Spec) {
			s.Headers = map[string]string{"Authorization": "Bearer {{secret:" + keySecret + "}}"}
		}, fmt.Sprintf("header Authorization: secret reference 1 (at byte 7): the text expands to more than %d bytes", spec.MaxHeaderValueLen)},
		{"an open message", func(s *spec.Spec) {
			s.Config.OpenMessages = []source.OpenMessage{{Text: text(strings.Repeat("{{secret:"+keySecret+"}}", 16))}}
		}, fmt.Sprintf("open_messages[0]: secret reference 1 (at byte 0): the text expands to more than %d bytes", source.MaxOpenMessageBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sms := secretsmanager.Start(t)
			sms.Put(keySecret, big)
			src, url := authSource(t, nil)
			h := newHarness(t, bound(t, connectConfig(5)))
			h.env.Secrets = secrets.NewResolver(secretsmanager.NewClient(sms.Endpoint()), secrets.Config{})
			h.put("s1", url, func(it *lease.Item) { spectest.Edit(t, &it.Spec, tc.edit) })
			s, done := h.start("s1")
			err := wait(t, done, 10*time.Second)
			if !errors.Is(err, ErrSourceFailed) || strings.Contains(err.Error(), "in a row") {
				t.Fatalf("Run = %v, want ErrSourceFailed at the first dial", err)
			}
			st := s.Status()
			if !strings.Contains(st.LastError, tc.reason) {
				t.Errorf("last_error %q, want %q", st.LastError, tc.reason)
			}
			if n := src.conns(); n != 0 {
				t.Errorf("the source got %d connections, want none", n)
			}
			noValue(t, []string{"vvvvvvvv"}, map[string]string{"Run's error": err.Error(), "last_error": st.LastError})
		})
	}
}

// A secret's value goes only to a host the deployment binds it to
// (Config.SecretHosts, WSFLEET_SECRET_HOSTS): a ws_url on another host
// fails the session at its first dial before the value is even asked for;
// and a handshake redirected to another origin (here: another port of a
// bound host) gets no open message holding a reference, failing the
// session instead. Neither ever puts a value on the wire or in an error.
func TestSecretsGoOnlyToTheirBoundHosts(t *testing.T) {
	t.Run("ws_url on an unbound host", func(t *testing.T) {
		sms := secretsmanager.Start(t)
		sms.Put(apiSecret, `{"token":"tok-v1"}`)
		sms.Put(keySecret, "key-v1")
		src, url := authSource(t, nil)
		cfg := connectConfig(5)
		b, err := secretref.ParseBindings("wsfleet/test/=stream.example.com;wsfleet/test/key=localhost")
		if err != nil {
			t.Fatal(err)
		}
		cfg.SecretHosts = b
		h := newHarness(t, cfg)
		h.env.Secrets = secrets.NewResolver(secretsmanager.NewClient(sms.Endpoint()), secrets.Config{})
		h.put("s1", url, withRefs(t))
		s, done := h.start("s1")
		err = wait(t, done, 10*time.Second)
		if !errors.Is(err, ErrSourceFailed) || strings.Contains(err.Error(), "in a row") {
			t.Fatalf("Run = %v, want ErrSourceFailed at the first dial", err)
		}
		want := `header Authorization: secret reference 1 (at byte 7): secret "` + apiSecret + `": may not be sent to this host`
		if st := s.Status(); !strings.Contains(st.LastError, want) {
			t.Errorf("last_error %q, want %q", st.LastError, want)
		}
		if n := src.conns(); n != 0 {
			t.Errorf("the source got %d connections, want none", n)
		}
		if n := sms.Calls(secretsmanager.OpGetSecretValue); n != 0 {
			t.Errorf("%d GetSecretValue calls, want none: the binding is checked first", n)
		}
	})
	t.Run("redirected to another origin", func(t *testing.T) {
		sms := secretsmanager.Start(t)
		sms.Put(keySecret, "key-v1")
		src, url := authSource(t, nil)
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http"+strings.TrimPrefix(url, "ws")+r.URL.RequestURI(), http.StatusFound)
		}))
		t.Cleanup(redirector.Close)
		h := newHarness(t, bound(t, connectConfig(5))) // 127.0.0.1, any port: both are bound
		h.env.Secrets = secrets.NewResolver(secretsmanager.NewClient(sms.Endpoint()), secrets.Config{})
		cfg := sourceJSON(t, source.Config{OpenMessages: []source.OpenMessage{{Text: text(openRef)}}})
		h.put("s1", "ws"+strings.TrimPrefix(redirector.URL, "http"), func(it *lease.Item) {
			spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.Config, s.FollowRedirects = cfg, 1 })
		})
		s, done := h.start("s1")
		err := wait(t, done, 10*time.Second)
		if !errors.Is(err, ErrSourceFailed) || !strings.Contains(err.Error(), ErrSecretRedirected.Error()) {
			t.Fatalf("Run = %v, want ErrSourceFailed naming ErrSecretRedirected", err)
		}
		// The target counts a connection after its Accept has answered 101,
		// which the client may see (and refuse) first: wait for the count.
		testwait.Eventually(t, 5*time.Second, "the redirect's target got its handshake", func() bool { return src.conns() >= 1 })
		if n := src.conns(); n != 1 {
			t.Errorf("the redirect's target got %d connections, want the one handshake", n)
		}
		if got := src.got(0); len(got) != 0 {
			t.Errorf("the redirect's target got the open messages %q, want none", got)
		}
		noValue(t, []string{"key-v"}, map[string]string{"Run's error": err.Error(), "last_error": s.Status().LastError})
	})
}

// A stored spec with more than secretref.MaxRefs references (written
// before ingest bounded them, or by hand) fails its session when the
// worker reads it, before any secret is asked for, naming the field.
func TestTooManyStoredSecretReferencesFailTheSession(t *testing.T) {
	sms := secretsmanager.Start(t)
	sms.Put(keySecret, "key-v1")
	src, url := authSource(t, nil)
	h := newHarness(t, bound(t, connectConfig(5)))
	h.env.Secrets = secrets.NewResolver(secretsmanager.NewClient(sms.Endpoint()), secrets.Config{})
	wsURL, _ := json.Marshal(url)
	text, _ := json.Marshal(strings.Repeat("{{secret:"+keySecret+"}}", secretref.MaxRefs+1))
	h.put("s1", url, func(it *lease.Item) {
		it.Spec = `{"ws_url":` + string(wsURL) + `,"open_messages":[{"text":` + string(text) + `}]}`
	})
	_, done := h.start("s1")
	err := wait(t, done, 10*time.Second)
	if !errors.Is(err, ErrSourceFailed) || !strings.Contains(err.Error(), "stored session spec is invalid (open_messages)") {
		t.Fatalf("Run = %v, want ErrSourceFailed naming the invalid open_messages", err)
	}
	if n := src.conns(); n != 0 {
		t.Errorf("the source got %d connections, want none", n)
	}
	if n := sms.Calls(secretsmanager.OpGetSecretValue); n != 0 {
		t.Errorf("%d GetSecretValue calls, want none", n)
	}
}
