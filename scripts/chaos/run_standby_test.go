// Tests of the sessions whose source cannot replay: which sessions, and
// their start fields.

package chaos

import (
	"fmt"
	"testing"
)

// With the defaults (planned every 3rd, standby every 4th) a run of 48
// sessions has standby and control sessions, none planned, each group on
// both sources by turns, the same plan at a re-start; the fields drop the
// stack's resume (and, for seq_mode none, its seq field) and ask for the
// standby only while the API takes it.
func TestStandbySessionsPlan(t *testing.T) {
	for _, seed := range []int64{1, 2, 7} {
		cfg := DefaultConfig()
		cfg.Seed = seed
		r := &runner{cfg: cfg, planned: map[string]bool{}, sources: map[string]sourcePlan{}, standbyOn: true}
		count := map[sourcePlan]int{}
		for i := range 48 {
			id := fmt.Sprintf("s-%03d", i)
			p := r.sourceOf(id)
			count[p]++
			if p.Source != "" && r.plannedSession(id) {
				t.Fatalf("seed %d: %s is planned and on a source that cannot replay", seed, id)
			}
			if again := r.sourceOf(id); again != p {
				t.Fatalf("seed %d: %s re-started as %+v, first %+v", seed, id, again, p)
			}
		}
		for _, p := range []sourcePlan{{SourceNoSeq, true}, {SourceLive, true}, {SourceNoSeq, false}, {SourceLive, false}} {
			if count[p] < 2 {
				t.Errorf("seed %d: %d session(s) %+v, want at least 2 (counts %v)", seed, count[p], p, count)
			}
		}
		if n := count[sourcePlan{SourceNoSeq, true}] + count[sourcePlan{SourceLive, true}]; n < 6 || n > 12 {
			t.Errorf("seed %d: %d standby sessions of 48", seed, n)
		}
	}
	r := &runner{cfg: DefaultConfig(), standbyOn: true}
	f := r.sourceFields(sourcePlan{SourceNoSeq, true})
	if f["seq_mode"] != "none" || f["standby"] == nil || f["checkpoint_every"] != "2s" {
		t.Fatalf("noseq standby fields %v", f)
	}
	for _, k := range []string{"seq_field", "resume_query_param"} {
		if v, ok := f[k]; !ok || v != nil {
			t.Fatalf("noseq standby fields %v: want %s dropped (nil)", f, k)
		}
	}
	f = r.sourceFields(sourcePlan{SourceLive, false})
	if v, ok := f["resume_query_param"]; !ok || v != nil || len(f) != 1 {
		t.Fatalf("live control fields %v", f)
	}
	r.standbyOn = false
	if f := r.sourceFields(sourcePlan{SourceLive, true}); f["standby"] != nil || len(f) != 1 {
		t.Fatalf("standby fields after the API refused the field: %v", f)
	}
	if r := (&runner{cfg: Config{}, planned: map[string]bool{}, sources: map[string]sourcePlan{}}); r.sourceOf("x") != (sourcePlan{}) {
		t.Fatal("StandbyEvery 0 made a session that cannot replay")
	}
}
