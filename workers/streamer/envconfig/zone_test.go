package envconfig

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestZoneFromECSReadsTheTaskMetadata(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v4/abc/task" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"Cluster":"c","TaskARN":"arn","AvailabilityZone":"eu-west-1b","LaunchType":"FARGATE"}`))
	}))
	defer srv.Close()
	env := map[string]string{EnvECSMetadata: srv.URL + "/v4/abc"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	z, err := ZoneFromECS(context.Background(), lookup, srv.Client())
	if err != nil || z != "eu-west-1b" {
		t.Fatalf("zone %q, %v; want eu-west-1b", z, err)
	}

	env[EnvECSMetadata] = srv.URL + "/elsewhere"
	if z, err := ZoneFromECS(context.Background(), lookup, srv.Client()); err == nil {
		t.Fatalf("a 404 gave zone %q", z)
	}
	delete(env, EnvECSMetadata)
	if _, err := ZoneFromECS(context.Background(), lookup, srv.Client()); !errors.Is(err, ErrNoTaskMetadata) {
		t.Fatalf("outside ECS: %v, want ErrNoTaskMetadata", err)
	}
}
