// The worker's availability zone, from the ECS task metadata endpoint.

package envconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// EnvECSMetadata is the variable ECS sets in every container of a task
// (Fargate platform 1.4.0 and later): the base URI of the task metadata
// endpoint version 4 (AWS docs, "Amazon ECS task metadata endpoint version
// 4"). GET <it>/task answers the task's metadata, AvailabilityZone among it.
const EnvECSMetadata = "ECS_CONTAINER_METADATA_URI_V4"

// ErrNoTaskMetadata: not running as an ECS task (EnvECSMetadata unset).
var ErrNoTaskMetadata = errors.New(EnvECSMetadata + " is not set")

// zoneTimeout bounds the metadata request: the endpoint is local to the
// task, and a worker that cannot tell its zone runs without one.
const zoneTimeout = 2 * time.Second

// ZoneFromECS returns the task's availability zone from the ECS task
// metadata endpoint named by lookup's EnvECSMetadata (ErrNoTaskMetadata when
// it is not set). client nil: http.DefaultClient.
func ZoneFromECS(ctx context.Context, lookup func(string) (string, bool), client *http.Client) (string, error) {
	base, ok := lookup(EnvECSMetadata)
	if !ok || strings.TrimSpace(base) == "" {
		return "", ErrNoTaskMetadata
	}
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, zoneTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/task", nil)
	if err != nil {
		return "", fmt.Errorf("task metadata: %w", err)
	}
	res, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("task metadata: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("task metadata: %s", res.Status)
	}
	var task struct {
		AvailabilityZone string `json:"AvailabilityZone"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&task); err != nil {
		return "", fmt.Errorf("task metadata: %w", err)
	}
	if task.AvailabilityZone == "" {
		return "", errors.New("task metadata: no AvailabilityZone")
	}
	return task.AvailabilityZone, nil
}
