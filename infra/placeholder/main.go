// Command placeholder stands in for the ingest Lambda's bootstrap while
// functions/ingest has no main package, so the infra app can be synthesized
// (and even deployed) before ingest exists. It speaks the Lambda runtime API
// with the standard library only and answers every invocation with a 503
// API Gateway response.
package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
)

const response = `{"statusCode":503,"headers":{"content-type":"application/json"},` +
	`"body":"{\"error\":\"wsfleet ingest is not built yet (placeholder bootstrap)\"}"}`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "placeholder:", err)
		os.Exit(1)
	}
}

func run() error {
	api := os.Getenv("AWS_LAMBDA_RUNTIME_API")
	if api == "" {
		return fmt.Errorf("AWS_LAMBDA_RUNTIME_API is not set: this binary only runs inside Lambda")
	}
	base := "http://" + api + "/2018-06-01/runtime/invocation/"
	for {
		resp, err := http.Get(base + "next")
		if err != nil {
			return fmt.Errorf("next invocation: %w", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		id := resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
		post, err := http.Post(base+id+"/response", "application/json", bytes.NewBufferString(response))
		if err != nil {
			return fmt.Errorf("invocation %s response: %w", id, err)
		}
		post.Body.Close()
	}
}
