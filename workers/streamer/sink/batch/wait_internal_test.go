package batch

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// groupSender is the least Packer: its pack group is group(connection id).
type groupSender struct{ group func(string) string }

func (groupSender) Encode(m sink.Message) (Record, error) {
	return Record{ConnectionID: m.ConnectionID, Seq: m.Seq, Body: m.Data}, nil
}
func (groupSender) Send(context.Context, []Record) ([]error, error) { return nil, nil }
func (groupSender) Limits() Limits {
	return Limits{MaxCount: 10, MaxBytes: 1 << 20, MaxRecordBytes: 1 << 10}
}
func (groupSender) Ordered() bool                      { return false }
func (groupSender) Size(r Record) int                  { return len(r.Body) }
func (groupSender) PackLimit() int                     { return 1 << 10 }
func (groupSender) PackGrow(size int, r Record) int    { return size + len(r.Body) }
func (s groupSender) PackGroup(r Record) string        { return s.group(r.ConnectionID) }
func (groupSender) Pack(recs []Record) (Record, error) { return recs[0], nil }

// A message waits MaxDelay, or, in a pack group other sessions share, a
// quarter of its session's smoothed gap between messages up to PackWait.
func TestPackWaitFollowsTheSessionsGap(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SessionBufferBytes = 1 << 10
	cfg.MaxDelay = 10 * time.Millisecond
	cfg.PackWait = 40 * time.Millisecond
	waits := func(group func(string) string, gaps ...time.Duration) []time.Duration {
		b, err := New(groupSender{group: group}, cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		at := time.Unix(1000, 0)
		var out []time.Duration
		for _, g := range gaps {
			at = at.Add(g)
			e := &entry{rec: Record{ConnectionID: "s"}, group: group("s")}
			out = append(out, b.waitLocked(e, at))
		}
		return out
	}
	shared := func(string) string { return "" }
	own := func(id string) string { return id }
	cases := []struct {
		name  string
		group func(string) string
		gaps  []time.Duration
		want  []time.Duration
	}{
		// The first message has no gap yet; at 1 a second the rest wait PackWait.
		{"1 msg/s, shared", shared, []time.Duration{0, time.Second, time.Second}, []time.Duration{10 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond}},
		// At 50 a second a quarter of the gap is 5 ms: MaxDelay.
		{"50 msg/s, shared", shared, []time.Duration{0, 20 * time.Millisecond, 20 * time.Millisecond}, []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}},
		// At 8 a second: a quarter of 125 ms.
		{"8 msg/s, shared", shared, []time.Duration{0, 125 * time.Millisecond}, []time.Duration{10 * time.Millisecond, 31250 * time.Microsecond}},
		// A session that speeds up moves its average by an eighth of each new gap.
		{"slow then fast, shared", shared, []time.Duration{0, 160 * time.Millisecond, 0}, []time.Duration{10 * time.Millisecond, 40 * time.Millisecond, 35 * time.Millisecond}},
		// A pack of one session's own: nobody else can join it.
		{"1 msg/s, own group", own, []time.Duration{0, time.Second, time.Second}, []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}},
	}
	for _, c := range cases {
		got := waits(c.group, c.gaps...)
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: waits %v, want %v", c.name, got, c.want)
				break
			}
		}
	}
	cfg.PackWait = 0
	if got := waits(shared, 0, time.Second)[1]; got != cfg.MaxDelay {
		t.Errorf("PackWait 0: a slow session waits %s, want MaxDelay %s", got, cfg.MaxDelay)
	}
}
