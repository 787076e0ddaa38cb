package streamer

import (
	"slices"
	"testing"
	"time"
)

// pickable is a movable session for movePicker's tests: only its id.
type pickable string

func (p pickable) ID() string { return string(p) }

// owedFake answers Owed from a map and counts the questions.
type owedFake struct {
	owed  map[string]time.Duration
	asked []string
}

func (o *owedFake) Owed(id string) time.Duration {
	o.asked = append(o.asked, id)
	return o.owed[id]
}

// A round's picker takes first the sessions whose standby the receiver
// holds, then the longest held; it skips one whose sink has owed it an
// acknowledgement for the store timeout or longer, and asks the sink only
// about the sessions it would take (not about every session held: the
// batcher's lock, once a round per session, for nothing).
func TestMovePickerSkipsSessionsTheSinkOwesAndAsksOnlyAboutThoseItTakes(t *testing.T) {
	movable := []pickable{"a", "b", "c", "d", "e", "f"}
	owing := &owedFake{owed: map[string]time.Duration{"b": 2 * time.Second, "e": time.Second}}
	p := newPicker(movable, map[string][]int{"w2": {4, 5}}, owing, 2*time.Second) // e and f have their standby on w2
	var got []string
	for _, to := range []string{"w2", "w1", "w1", "w2", "w1"} {
		s, ok := p.pick(to)
		if !ok {
			t.Fatalf("no session for %s after %v", to, got)
		}
		got = append(got, to+":"+s.ID())
	}
	// w2: e (its standby's worker; owed 1 s < 2 s); w1: a; w1: c (b owed
	// 2 s); w2: f (its standby's); w1: d.
	want := []string{"w2:e", "w1:a", "w1:c", "w2:f", "w1:d"}
	if !slices.Equal(got, want) {
		t.Fatalf("picked %v, want %v", got, want)
	}
	if s, ok := p.pick("w1"); ok {
		t.Fatalf("picked %s with every session taken or owed", s)
	}
	if want := []string{"e", "a", "b", "c", "f", "d"}; !slices.Equal(owing.asked, want) {
		t.Fatalf("the sink was asked about %v, want %v (each once, in picking order)", owing.asked, want)
	}
}

// A sink that holds nothing after Handle (no Owed) leaves every session
// movable.
func TestMovePickerWithASynchronousSinkTakesEverySession(t *testing.T) {
	movable := []pickable{"a", "b"}
	p := newPicker(movable, map[string][]int{}, nil, time.Second)
	for _, want := range movable {
		if s, ok := p.pick("w1"); !ok || s != want {
			t.Fatalf("picked %q %v, want %q", s, ok, want)
		}
	}
}

// A session with a standby moves only to its standby's worker: a move
// anywhere else is a release and a fresh dial, and what a source that
// cannot replay sends in between is lost. Moves to other workers take the
// sessions without a standby, and none once those are gone.
func TestMovePickerMovesASessionWithAStandbyOnlyToItsStandbysWorker(t *testing.T) {
	movable := []pickable{"a", "b", "c", "d"}
	p := newPicker(movable, map[string][]int{"w3": {0, 2}}, nil, time.Second) // a and c have their standby on w3
	var got []string
	for _, to := range []string{"w1", "w2"} {
		s, ok := p.pick(to)
		if !ok {
			t.Fatalf("no session for %s after %v", to, got)
		}
		got = append(got, to+":"+s.ID())
	}
	if want := []string{"w1:b", "w2:d"}; !slices.Equal(got, want) {
		t.Fatalf("picked %v, want %v (the sessions without a standby)", got, want)
	}
	for _, to := range []string{"w1", "w2"} {
		if s, ok := p.pick(to); ok {
			t.Fatalf("a move to %s took %s, whose standby is on w3", to, s)
		}
	}
	for _, want := range []string{"a", "c"} {
		if s, ok := p.pick("w3"); !ok || s.ID() != want {
			t.Fatalf("a move to w3 took %q %v, want %q (its standby's promotion)", s, ok, want)
		}
	}
	if s, ok := p.pick("w3"); ok {
		t.Fatalf("a move to w3 took %s with every session moved", s)
	}
}
