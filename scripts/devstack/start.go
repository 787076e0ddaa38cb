package devstack

// Starting sessions on the stack's feed through the ingest API, and the
// API's refusal of a start.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/wsfleet/wsfleet/cmd/wsfleet/apiclient"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

// StartSession starts session id on the stack's feed through the API, with
// resume by the feed's "from" parameter.
func (s *Stack) StartSession(ctx context.Context, id string) (apiclient.Change, error) {
	return s.API.Start(ctx, apiclient.StartRequest{
		ConnectionID: id, Spec: spec.Spec{WSURL: feed.URL(s.FeedURL(), id), Resume: &spec.Resume{QueryParam: feed.DefaultResumeParam}},
	})
}

// StartSessionWith starts session id on the stack's feed like StartSession,
// with extra fields added to the start request's JSON body (e.g.
// "on_sink_refusal": "skip"); a nil value removes the default field of
// that name (e.g. "resume_query_param": nil, a source without resume). It
// returns the API's status and body on a refusal, so a caller can tell a
// field the API does not know.
func (s *Stack) StartSessionWith(ctx context.Context, id string, extra map[string]any) error {
	body := map[string]any{"connection_id": id, "ws_url": feed.URL(s.FeedURL(), id), "seq_field": "seq", "resume_query_param": feed.DefaultResumeParam}
	for k, v := range extra {
		if v == nil {
			delete(body, k)
		} else {
			body[k] = v
		}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("start %s: encode: %w", id, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.APIURL()+"/sessions", bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return &StartError{Status: resp.StatusCode, Body: string(bytes.TrimSpace(rb))}
	}
	return nil
}

// StartError is an API refusal of a start.
type StartError struct {
	Status int
	Body   string
}

func (e *StartError) Error() string { return fmt.Sprintf("start: HTTP %d: %s", e.Status, e.Body) }
