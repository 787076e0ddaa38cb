package integration

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/app"
	"github.com/wsfleet/wsfleet/functions/ingest/internal/testenv"
)

// BenchmarkHandler measures one invocation of the real handler on dynalite +
// fauxqs (in memory, loopback), as Lambda runs it (an API Gateway event
// through httpadapter), without a network hop:
//
//	go test -run '^$' -bench . -benchtime 300x ./internal/integration
func BenchmarkHandler(b *testing.B) {
	e := testenv.New(b)
	h, err := app.Build(testConfig(e), e.AWS, zerolog.Nop(), io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	ctx, lambda := context.Background(), h.Lambda()
	req := func(method, path, body string) events.APIGatewayV2HTTPRequest {
		return events.APIGatewayV2HTTPRequest{RawPath: path, Body: body, Headers: map[string]string{"content-type": "application/json"},
			RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method}}}
	}
	run := func(b *testing.B, status int, mk func(i int) events.APIGatewayV2HTTPRequest) {
		for i := 0; i < b.N; i++ {
			resp, _ := lambda(ctx, mk(i))
			if resp.StatusCode != status {
				b.Fatalf("%d: %s", resp.StatusCode, resp.Body)
			}
		}
	}
	b.Run("start-new", func(b *testing.B) {
		run(b, 202, func(i int) events.APIGatewayV2HTTPRequest {
			return req("POST", "/sessions", fmt.Sprintf(`{"connection_id":"bn-%d-%d","ws_url":"wss://a.example.com/?t=1"}`, b.N, i))
		})
	})
	b.Run("start-unchanged", func(b *testing.B) {
		run(b, 202, func(int) events.APIGatewayV2HTTPRequest {
			return req("POST", "/sessions", `{"connection_id":"bn-same","ws_url":"wss://a.example.com/?t=1"}`)
		})
	})
	b.Run("start-url-change", func(b *testing.B) {
		run(b, 202, func(i int) events.APIGatewayV2HTTPRequest {
			return req("POST", "/sessions", fmt.Sprintf(`{"connection_id":"bn-same","ws_url":"wss://a.example.com/?t=%d"}`, i+2))
		})
	})
	b.Run("status", func(b *testing.B) {
		run(b, 200, func(int) events.APIGatewayV2HTTPRequest { return req("GET", "/sessions/bn-same", "") })
	})
	b.Run("stop-unchanged", func(b *testing.B) {
		run(b, 202, func(int) events.APIGatewayV2HTTPRequest { return req("POST", "/sessions/bn-same/stop", "") })
	})
	b.Run("rejected", func(b *testing.B) {
		run(b, 400, func(int) events.APIGatewayV2HTTPRequest {
			return req("POST", "/sessions", `{"ws_url":"ws://169.254.169.254/"}`)
		})
	})
}
