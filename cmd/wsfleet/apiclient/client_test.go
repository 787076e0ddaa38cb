package apiclient_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/cmd/wsfleet/apiclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestIsLocalAndURLs(t *testing.T) {
	for api, want := range map[string]bool{
		"http://127.0.0.1:8787": true, "http://localhost:1": true, "http://[::1]:2": true,
		"https://abc.execute-api.us-east-1.amazonaws.com": false, "http://10.0.0.1": false,
	} {
		if apiclient.IsLocal(api) != want {
			t.Errorf("IsLocal(%s) != %v", api, want)
		}
	}
	if _, err := apiclient.NewClient("ftp://x", nil); err == nil {
		t.Error("ftp API accepted")
	}
	c, err := apiclient.NewClient(apiclient.DefaultAPI, nil)
	if err != nil || c.Base() != apiclient.DefaultAPI {
		t.Fatalf("default API: %v, base %q", err, c.Base())
	}
}
