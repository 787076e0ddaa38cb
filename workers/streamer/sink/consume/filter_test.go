package consume

import (
	"fmt"
	"slices"
	"testing"
)

func env(id string, seq, sub, epoch int64) Envelope {
	return Envelope{ConnectionID: id, Seq: seq, Sub: sub, LeaseEpoch: epoch, WorkerID: "w"}
}

func taken(f *Filter, envs ...Envelope) []string {
	var out []string
	for _, e := range envs {
		if f.Keep(e) {
			out = append(out, fmt.Sprintf("%s:%d.%d@%d", e.ConnectionID, e.Seq, e.Sub, e.LeaseEpoch))
		}
	}
	return out
}

// The consumer rule on an ordered destination: a late write of an older
// tenure is dropped, a replay by the next tenure is dropped, a tenure's own
// repeat is dropped, and the messages without a seq of the next tenure
// are other messages.
func TestFilterOrdered(t *testing.T) {
	var f Filter
	got := taken(&f,
		env("a", 8, 0, 1), env("a", 9, 0, 1), env("a", 9, 1, 1),
		env("b", 1, 0, 1),  // another session, its own epochs
		env("a", 9, 0, 2),  // epoch 2 replays 9 from checkpoint 8
		env("a", 9, 1, 2),  // epoch 2's first message without a seq: another message
		env("a", 10, 0, 1), // epoch 1's request applied late: fenced
		env("a", 10, 0, 2),
		env("a", 10, 0, 2), // a repeat
		env("a", 9, 1, 2),  // a repeat
		env("b", 2, 0, 1),
	)
	want := []string{"a:8.0@1", "a:9.0@1", "a:9.1@1", "b:1.0@1", "a:9.1@2", "a:10.0@2", "b:2.0@1"}
	if !slices.Equal(got, want) {
		t.Fatalf("took %v, want %v", got, want)
	}
	f.Forget("a")
	if !f.Keep(env("a", 8, 0, 1)) {
		t.Fatal("a forgotten session is still remembered")
	}
}

// Wanted and Took: an envelope the consumer failed to store is wanted
// again; one it stored is not; an epoch seen fences the older ones even
// when its envelope was not stored.
func TestFilterWantedThenTook(t *testing.T) {
	var f Filter
	e := env("a", 5, 0, 2)
	first := f.Wanted(e)
	if again := f.Wanted(e); !first || !again {
		t.Fatal("an envelope not stored is not wanted again")
	}
	if f.Wanted(env("a", 6, 0, 1)) {
		t.Fatal("an older tenure's envelope wanted after epoch 2 was seen")
	}
	f.Took(e)
	if f.Wanted(e) || f.Keep(e) {
		t.Fatal("a stored envelope wanted again")
	}
}

// On a standard queue a lower epoch may be an acknowledged message arriving
// late: it is taken unless its seq was.
func TestFilterUnordered(t *testing.T) {
	f := Filter{Unordered: true}
	got := taken(&f, env("a", 10, 0, 2), env("a", 9, 0, 1), env("a", 10, 0, 1), env("a", 9, 1, 1), env("a", 9, 1, 1))
	want := []string{"a:10.0@2", "a:9.0@1", "a:9.1@1"}
	if !slices.Equal(got, want) {
		t.Fatalf("took %v, want %v", got, want)
	}
}
