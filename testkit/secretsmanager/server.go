// Package secretsmanager is a stand-in for AWS Secrets Manager in tests and
// the local stack: no Secrets Manager engine is served by the package
// registries this project can reach, so this package carries a minimal
// server of its own. It speaks Secrets Manager's JSON 1.1 protocol (POST /,
// X-Amz-Target: secretsmanager.OP, Content-Type application/x-amz-json-1.1,
// errors as HTTP 400 {"__type":CODE,"message":…}) well enough for the real
// SDK client (github.com/aws/aws-sdk-go-v2/service/secretsmanager) to talk
// to it, and implements only three calls: CreateSecret, PutSecretValue and
// GetSecretValue, with versions (each write is a new AWSCURRENT version
// with its own VersionId; the one before becomes AWSPREVIOUS) and injected
// faults (the next N calls of an operation answered with an error code, or
// held until released). It checks that a request is signed (an
// Authorization header is present) but not the signature, and it keeps
// everything in memory. Everything else Secrets Manager does — rotation
// Lambdas, resource policies, KMS, replication, deletion — is absent.
package secretsmanager

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Operations, as named in X-Amz-Target after "secretsmanager.".
const (
	OpCreateSecret   = "CreateSecret"
	OpPutSecretValue = "PutSecretValue"
	OpGetSecretValue = "GetSecretValue"
)

// Version stages.
const (
	StageCurrent  = "AWSCURRENT"
	StagePrevious = "AWSPREVIOUS"
)

// Region and Account are what ARNs carry.
const (
	Region  = "us-east-1"
	Account = "000000000000"
)

const (
	contentType = "application/x-amz-json-1.1"
	targetPre   = "secretsmanager."
	maxBody     = 1 << 20 // Secrets Manager's own limit on a secret is 64 KiB
)

// Server is the stand-in's state and its http.Handler. The zero value is
// not usable: use New (or Start in a test).
type Server struct {
	mu       sync.Mutex
	secrets  map[string]*secret // by name
	byARN    map[string]*secret
	faults   map[string][]string      // op → codes to answer, one per call
	holds    map[string]chan struct{} // op → closed when released
	calls    map[string]int
	endpoint string
}

type secret struct {
	name, arn string
	created   time.Time
	versions  []*version // newest last; only versions with a stage are kept
	tokens    map[string]*version
}

type version struct {
	id      string
	str     *string
	bin     []byte
	stages  []string
	created time.Time
}

// New is an empty stand-in.
func New() *Server {
	return &Server{
		secrets: map[string]*secret{},
		byARN:   map[string]*secret{},
		faults:  map[string][]string{},
		holds:   map[string]chan struct{}{},
		calls:   map[string]int{},
	}
}

// Endpoint is the URL the server listens at (set by Start, or by the
// command with SetEndpoint).
func (s *Server) Endpoint() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endpoint
}

// SetEndpoint records the URL the server listens at.
func (s *Server) SetEndpoint(u string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoint = u
}

// apiError is an error answer: HTTP 400 (500 for InternalServiceError).
type apiError struct {
	code, msg string
}

func errf(code, format string, args ...any) *apiError {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	out, aerr := s.serve(r)
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Amzn-Requestid", newID())
	if aerr != nil {
		status := http.StatusBadRequest
		if aerr.code == "InternalServiceError" || aerr.code == "ServiceUnavailable" {
			status = http.StatusInternalServerError
		}
		w.Header().Set("X-Amzn-Errortype", aerr.code)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": aerr.code, "message": aerr.msg})
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

// serve checks the request's framing, applies the faults and dispatches.
func (s *Server) serve(r *http.Request) (any, *apiError) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		return nil, errf("UnknownOperationException", "only POST / is served")
	}
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, targetPre)
	if !ok || op == "" {
		return nil, errf("UnknownOperationException", "X-Amz-Target must be secretsmanager.OPERATION")
	}
	if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) != contentType {
		return nil, errf("SerializationException", "Content-Type must be %s", contentType)
	}
	// Signed, but the signature is not checked: any credentials will do.
	if r.Header.Get("Authorization") == "" {
		return nil, errf("MissingAuthenticationTokenException", "Request is missing Authentication Token")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		return nil, errf("SerializationException", "request body unreadable or over %d bytes", maxBody)
	}
	s.mu.Lock()
	s.calls[op]++
	hold := s.holds[op]
	var fault string
	if q := s.faults[op]; len(q) > 0 {
		fault, s.faults[op] = q[0], q[1:]
	}
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return nil, errf("RequestCanceled", "request cancelled while held")
		}
	}
	if fault != "" {
		return nil, errf(fault, "injected %s", fault)
	}
	switch op {
	case OpCreateSecret:
		var in createIn
		if err := decode(body, &in); err != nil {
			return nil, err
		}
		return s.create(in)
	case OpPutSecretValue:
		var in putIn
		if err := decode(body, &in); err != nil {
			return nil, err
		}
		return s.put(in)
	case OpGetSecretValue:
		var in getIn
		if err := decode(body, &in); err != nil {
			return nil, err
		}
		return s.get(in)
	default:
		return nil, errf("UnknownOperationException", "the stand-in implements CreateSecret, PutSecretValue and GetSecretValue only, not %s", op)
	}
}

func decode(body []byte, into any) *apiError {
	if err := json.Unmarshal(body, into); err != nil {
		return errf("SerializationException", "request body is not the operation's JSON input")
	}
	return nil
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func arnSuffix() string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	var b [6]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return string(b[:])
}

// epoch is a timestamp as the JSON 1.1 protocol writes it: seconds since
// the epoch, a JSON number.
func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

// blob decodes SecretBinary (a base64 JSON string, as the protocol sends
// blobs).
func blob(b64 *string) ([]byte, *apiError) {
	if b64 == nil {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(*b64)
	if err != nil {
		return nil, errf("InvalidParameterException", "SecretBinary is not base64")
	}
	return b, nil
}
