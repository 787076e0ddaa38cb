// A worker's admin endpoints (/stats, profiles) and its environment.

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer"
)

// workerStats is a worker's GET /stats document.
type workerStats = streamer.Stats

var adminClient = &http.Client{Timeout: 30 * time.Second}

// getStats reads a worker's /stats.
func getStats(ctx context.Context, admin string) (workerStats, error) {
	return getJSON[workerStats](ctx, "http://"+admin+"/stats", 1<<20)
}

// getJSON reads the JSON document at url (at most limit bytes).
func getJSON[T any](ctx context.Context, url string, limit int64) (T, error) {
	var v T
	b, err := httpGet(ctx, url, limit)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("get %s: %w", url, err)
	}
	return v, nil
}

// freshDir makes dir empty.
func freshDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o755)
}

func httpGet(ctx context.Context, url string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", url, err)
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", url, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("get %s: HTTP %d", url, resp.StatusCode)
	}
	return b, nil
}

// fetchToFile saves url's body to path.
func fetchToFile(ctx context.Context, url, path string) error {
	b, err := httpGet(ctx, url, 256<<20)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// cleanEnv is this process's environment without AWS_ and WSFLEET_
// variables (a developer's profile or settings must not reach the stack).
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "WSFLEET_") || strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMEMLIMIT=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// workerEnv is the environment of a benchmark worker: no AWS or WSFLEET
// variable of the driver's own, the given settings, pprof on, JSON logs.
func workerEnv(id, admin string, settings map[string]string) []string {
	env := append(cleanEnv(),
		schema.EnvWorkerID+"="+id,
		schema.EnvAdminAddr+"="+admin,
		schema.EnvEnvironment+"=bench",
		schema.EnvAllowPrivateIPs+"=loopback", // the bench feed listens on 127.0.0.x
		schema.EnvDialsPerHost+"=0",           // a few hosts for thousands of sessions: no per-host dial admission
		"WSFLEET_ADMIN_PPROF=true",
	)
	for k, v := range settings {
		env = append(env, k+"="+v)
	}
	return env
}

func itoa(n int) string { return strconv.Itoa(n) }
