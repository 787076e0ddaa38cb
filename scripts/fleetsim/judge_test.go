//go:build fleetsim

package fleetsim

import (
	"testing"
	"time"
)

// The judge's definitions on a hand-made record: tenure (w1, 1) delivers
// seqs 1–5, (w2, 2) takes over from seq 4 before w1's last delivery: one
// double owner (two deliveries while both were active), w1's
// delivery after w2's first is fenced, seq 4 and 5 replayed, seq 7 lost.
func TestJudgeDefinitions(t *testing.T) {
	t0 := time.Unix(0, 0)
	var ds []Delivery
	add := func(seq int64, w string, ep int64) {
		ds = append(ds, Delivery{N: int64(len(ds) + 1), Session: "s", Seq: seq, Worker: w, Epoch: ep, At: t0.Add(time.Duration(len(ds)) * time.Second)})
	}
	for s := int64(1); s <= 4; s++ {
		add(s, "w1", 1)
	}
	add(4, "w2", 2)
	add(5, "w1", 1) // w1 still delivering: inside w2's span, fenced
	add(5, "w2", 2)
	add(6, "w2", 2)
	add(8, "w2", 2)
	var f Figures
	judgeSession(ds, ds[len(ds)-1].At, &f)
	if f.DoubleOwners != 1 || f.DoublePairs != 1 || f.Overlapping != 2 || f.Fenced != 1 || f.Replays != 2 || f.Gaps != 1 || f.Tenures != 2 {
		t.Fatalf("figures %+v", f)
	}

	// A clean hand-off: w1's last delivery before w2's first.
	ds = nil
	add(1, "w1", 1)
	add(2, "w1", 1)
	add(2, "w2", 2)
	add(3, "w2", 2)
	f = Figures{}
	judgeSession(ds, ds[len(ds)-1].At, &f)
	if f.DoubleOwners != 0 || f.Fenced != 0 || f.Replays != 1 || f.Gaps != 0 || f.LongestSilence != 1 {
		t.Fatalf("clean hand-off: figures %+v", f)
	}
}
