package main

// The workers command.

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/wsfleet/wsfleet/cmd/wsfleet/apiclient"
	"github.com/wsfleet/wsfleet/shared/schema"
)

func runWorkers(ctx context.Context, e *env, _ []string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	ws, err := c.Workers(ctx)
	if err != nil {
		return fmt.Errorf("workers: %w", err)
	}
	return writeWorkers(e.stdout, ws, time.Now())
}

// writeWorkers writes the workers table in the API's order (alive first),
// times relative to now, and a summary line.
func writeWorkers(w io.Writer, ws apiclient.Workers, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tEPOCH\tLOAD/CAP\tSHARE\tMOVES/MIN\tHEARTBEAT\tADMIN\tHOST\tPID\tUP SINCE\tENDED\tDECLARED DEAD BY")
	count := map[string]int{}
	load, capacity := 0, 0
	for _, x := range ws.Workers {
		count[x.State]++
		if x.State == schema.WorkerAlive {
			load += x.Load
			capacity += x.Capacity
		}
		// Only an alive worker's load, share and draining flag mean anything:
		// a dead or left record keeps the last ones it wrote.
		state, loadCap, share := x.State, "-", "-"
		if x.State == schema.WorkerAlive {
			loadCap = fmt.Sprintf("%d/%d", x.Load, x.Capacity)
			if x.Draining {
				state += " (draining)"
			} else {
				share = fmt.Sprintf("%.1f", x.FairShare)
			}
		}
		pid := "-"
		if x.PID > 0 {
			pid = strconv.Itoa(x.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.ID, state, x.Epoch, loadCap, share, x.MovesPerMin,
			ago(x.HeartbeatAtMs, now), dash(x.AdminAddr), dash(x.Host), pid, ago(x.StartedAtMs, now), ago(x.EndedAtMs, now), dash(x.DeclaredDeadBy))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	_, err := fmt.Fprintf(w, "%d worker(s): %d alive (load %d/%d, imbalance %.2f = max load ÷ fair share), %d dead, %d left\n", len(ws.Workers),
		count[schema.WorkerAlive], load, capacity, ws.Imbalance, count[schema.WorkerDead], count[schema.WorkerLeft])
	if err == nil && ws.Truncated {
		_, err = fmt.Fprintf(w, "(only the first %d records: there are more)\n", ws.Limit)
	}
	return err
}

// ago renders a wall-clock time in Unix ms relative to now: "1.2s ago",
// "3m4s ago", "-" for none. Clocks differ, so a time slightly in the
// future reads "0s ago".
func ago(ms int64, now time.Time) string {
	if ms == 0 {
		return "-"
	}
	d := now.Sub(time.UnixMilli(ms))
	switch {
	case d < 0:
		d = 0
	case d < time.Minute:
		d = d.Round(100 * time.Millisecond)
	default:
		d = d.Round(time.Second)
	}
	return d.String() + " ago"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
