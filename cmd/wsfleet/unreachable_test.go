package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
)

// A CLI command against a port nothing listens on says the API cannot be
// reached, names the URL it tried and how to start the stack, instead of a
// raw dial error.
func TestCLISaysStackNotRunningOnClosedPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := "http://" + ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{{"status"}, {"workers"}} {
		var out, errOut bytes.Buffer
		err := cli(context.Background(), append([]string{"--api", api}, args...), &out, &errOut)
		if err == nil {
			t.Fatalf("%v against a closed port: no error", args)
		}
		msg := err.Error()
		for _, want := range []string{"cannot reach the API at " + api, "is the stack running?", "make dev", "--api"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%v: error %q lacks %q", args, msg, want)
			}
		}
	}
}
