package secretsmanager

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/smithy-go"

	"github.com/wsfleet/wsfleet/testkit/testwait"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// noRetry makes each SDK call one HTTP request, so a fault answers it.
func noRetry(o *sm.Options) { o.RetryMaxAttempts = 1 }

func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func TestCreatePutGetThroughTheSDK(t *testing.T) {
	s := Start(t)
	c := NewClient(s.Endpoint())
	cr, err := c.CreateSecret(ctx(t), &sm.CreateSecretInput{Name: aws.String("wsfleet/dev/api"), SecretString: aws.String(`{"token":"t1"}`)})
	if err != nil {
		t.Fatalf("CreateSecret: %v", err)
	}
	if !strings.HasPrefix(aws.ToString(cr.ARN), "arn:aws:secretsmanager:us-east-1:000000000000:secret:wsfleet/dev/api-") || aws.ToString(cr.VersionId) == "" {
		t.Fatalf("CreateSecret = ARN %q version %q", aws.ToString(cr.ARN), aws.ToString(cr.VersionId))
	}
	g1, err := c.GetSecretValue(ctx(t), &sm.GetSecretValueInput{SecretId: aws.String("wsfleet/dev/api")})
	if err != nil {
		t.Fatalf("GetSecretValue: %v", err)
	}
	if aws.ToString(g1.SecretString) != `{"token":"t1"}` || aws.ToString(g1.VersionId) != aws.ToString(cr.VersionId) ||
		len(g1.VersionStages) != 1 || g1.VersionStages[0] != StageCurrent || g1.CreatedDate == nil || time.Since(*g1.CreatedDate) > time.Minute {
		t.Fatalf("GetSecretValue = %+v", g1)
	}

	// A rotation: a new AWSCURRENT version, the old one AWSPREVIOUS.
	pr, err := c.PutSecretValue(ctx(t), &sm.PutSecretValueInput{SecretId: cr.ARN, SecretString: aws.String(`{"token":"t2"}`)})
	if err != nil {
		t.Fatalf("PutSecretValue: %v", err)
	}
	if aws.ToString(pr.VersionId) == aws.ToString(cr.VersionId) {
		t.Fatal("PutSecretValue kept the VersionId")
	}
	g2, err := c.GetSecretValue(ctx(t), &sm.GetSecretValueInput{SecretId: aws.String("wsfleet/dev/api")})
	if err != nil || aws.ToString(g2.SecretString) != `{"token":"t2"}` || aws.ToString(g2.VersionId) != aws.ToString(pr.VersionId) {
		t.Fatalf("GetSecretValue after Put = %+v, %v", g2, err)
	}
	prev, err := c.GetSecretValue(ctx(t), &sm.GetSecretValueInput{SecretId: aws.String("wsfleet/dev/api"), VersionStage: aws.String(StagePrevious)})
	if err != nil || aws.ToString(prev.SecretString) != `{"token":"t1"}` {
		t.Fatalf("AWSPREVIOUS = %+v, %v", prev, err)
	}
	byID, err := c.GetSecretValue(ctx(t), &sm.GetSecretValueInput{SecretId: aws.String("wsfleet/dev/api"), VersionId: cr.VersionId})
	if err != nil || aws.ToString(byID.SecretString) != `{"token":"t1"}` {
		t.Fatalf("by VersionId = %+v, %v", byID, err)
	}

	_, err = c.CreateSecret(ctx(t), &sm.CreateSecretInput{Name: aws.String("wsfleet/dev/api"), SecretString: aws.String("x")})
	var re *types.ResourceExistsException
	if !errors.As(err, &re) {
		t.Fatalf("CreateSecret of an existing name = %v, want ResourceExistsException", err)
	}
}

func TestErrorsAreTypedByTheSDK(t *testing.T) {
	s := Start(t)
	c := NewClient(s.Endpoint(), noRetry)
	_, err := c.GetSecretValue(ctx(t), &sm.GetSecretValueInput{SecretId: aws.String("nope")})
	var nf *types.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Fatalf("GetSecretValue of a missing secret = %v, want ResourceNotFoundException", err)
	}
	_, err = c.PutSecretValue(ctx(t), &sm.PutSecretValueInput{SecretId: aws.String("nope"), SecretString: aws.String("v")})
	if !errors.As(err, &nf) {
		t.Fatalf("PutSecretValue of a missing secret = %v, want ResourceNotFoundException", err)
	}

	s.Put("a", "v")
	s.Fail(OpGetSecretValue, "ThrottlingException", 1)
	s.Fail(OpGetSecretValue, "AccessDeniedException", 1)
	s.Fail(OpGetSecretValue, "InternalServiceError", 1)
	for _, want := range []string{"ThrottlingException", "AccessDeniedException", "InternalServiceError"} {
		_, err := c.GetSecretValue(ctx(t), &sm.GetSecretValueInput{SecretId: aws.String("a")})
		if code(err) != want {
			t.Fatalf("GetSecretValue = %v, want the injected %s", err, want)
		}
	}
	var ise *types.InternalServiceError
	s.Fail(OpGetSecretValue, "InternalServiceError", 1)
	if _, err := c.GetSecretValue(ctx(t), &sm.GetSecretValueInput{SecretId: aws.String("a")}); !errors.As(err, &ise) {
		t.Fatalf("GetSecretValue = %v, want a typed InternalServiceError (HTTP 500)", err)
	}
	g, err := c.GetSecretValue(ctx(t), &sm.GetSecretValueInput{SecretId: aws.String("a")})
	if err != nil || aws.ToString(g.SecretString) != "v" {
		t.Fatalf("after the faults: %+v, %v", g, err)
	}
	if n := s.Calls(OpGetSecretValue); n != 6 { // the missing one, 3 faults, 1 more, the answer
		t.Fatalf("Calls = %d, want 6", n)
	}
}

// With the SDK's default retryer, a throttled call is retried and
// succeeds: the stand-in's faults are per request, as AWS's are.
func TestSDKRetriesAThrottle(t *testing.T) {
	s := Start(t)
	s.Put("a", "v")
	s.Fail(OpGetSecretValue, "ThrottlingException", 1)
	g, err := NewClient(s.Endpoint()).GetSecretValue(ctx(t), &sm.GetSecretValueInput{SecretId: aws.String("a")})
	if err != nil || aws.ToString(g.SecretString) != "v" || s.Calls(OpGetSecretValue) != 2 {
		t.Fatalf("GetSecretValue = %+v, %v after %d calls", g, err, s.Calls(OpGetSecretValue))
	}
}

func TestBinarySecret(t *testing.T) {
	s := Start(t)
	c := NewClient(s.Endpoint())
	if _, err := c.CreateSecret(ctx(t), &sm.CreateSecretInput{Name: aws.String("b"), SecretBinary: []byte{0, 1, 2}}); err != nil {
		t.Fatal(err)
	}
	g, err := c.GetSecretValue(ctx(t), &sm.GetSecretValueInput{SecretId: aws.String("b")})
	if err != nil || g.SecretString != nil || string(g.SecretBinary) != "\x00\x01\x02" {
		t.Fatalf("GetSecretValue = %+v, %v", g, err)
	}
}

// An SDK retry of a write (same ClientRequestToken) makes no new version.
func TestClientRequestTokenIsIdempotent(t *testing.T) {
	s := Start(t)
	c := NewClient(s.Endpoint())
	s.Put("a", "v1")
	in := &sm.PutSecretValueInput{SecretId: aws.String("a"), SecretString: aws.String("v2"), ClientRequestToken: aws.String("00000000-0000-0000-0000-000000000001")}
	p1, err := c.PutSecretValue(ctx(t), in)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c.PutSecretValue(ctx(t), in)
	if err != nil || aws.ToString(p2.VersionId) != aws.ToString(p1.VersionId) || aws.ToString(p1.VersionId) != "00000000-0000-0000-0000-000000000001" {
		t.Fatalf("replayed Put = %+v, %v; first %+v", p2, err, p1)
	}
	prev, err := c.GetSecretValue(ctx(t), &sm.GetSecretValueInput{SecretId: aws.String("a"), VersionStage: aws.String(StagePrevious)})
	if err != nil || aws.ToString(prev.SecretString) != "v1" {
		t.Fatalf("the replay rotated again: AWSPREVIOUS = %+v, %v", prev, err)
	}
}

func TestHoldUntilReleased(t *testing.T) {
	s := Start(t)
	s.Put("a", "v")
	release := s.Hold(OpGetSecretValue)
	done := make(chan error, 1)
	go func() {
		_, err := NewClient(s.Endpoint()).GetSecretValue(ctx(t), &sm.GetSecretValueInput{SecretId: aws.String("a")})
		done <- err
	}()
	testwait.Eventually(t, 10*time.Second, "the call reaches the server", func() bool { return s.Calls(OpGetSecretValue) == 1 })
	select {
	case err := <-done:
		t.Fatalf("a held call was answered: %v", err)
	default:
	}
	release()
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The framing is checked: the target header is required, and so is a
// signature (though not checked).
func TestRequestFraming(t *testing.T) {
	s := Start(t)
	post := func(target, ctype, auth string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, s.Endpoint()+"/", strings.NewReader(`{"SecretId":"a"}`))
		if target != "" {
			req.Header.Set("X-Amz-Target", target)
		}
		req.Header.Set("Content-Type", ctype)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		return res.StatusCode, res.Header.Get("X-Amzn-Errortype")
	}
	const sig = "AWS4-HMAC-SHA256 Credential=anything"
	for _, c := range []struct {
		target, ctype, auth string
		status              int
		code                string
	}{
		{"", contentType, sig, 400, "UnknownOperationException"},
		{"secretsmanager.DeleteSecret", contentType, sig, 400, "UnknownOperationException"},
		{"secretsmanager.GetSecretValue", "application/json", sig, 400, "SerializationException"},
		{"secretsmanager.GetSecretValue", contentType, "", 400, "MissingAuthenticationTokenException"},
		{"secretsmanager.GetSecretValue", contentType, sig, 400, "ResourceNotFoundException"},
	} {
		if st, code := post(c.target, c.ctype, c.auth); st != c.status || code != c.code {
			t.Errorf("target %q type %q auth %q: %d %s, want %d %s", c.target, c.ctype, c.auth, st, code, c.status, c.code)
		}
	}
}
