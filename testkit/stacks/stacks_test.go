package stacks

import (
	"sync"
	"testing"
)

func parkedHere(wg *sync.WaitGroup, release chan struct{}) {
	wg.Done()
	<-release
}

func TestWithCountsTheGoroutinesInAFunction(t *testing.T) {
	const n = 3
	release := make(chan struct{})
	var started, done sync.WaitGroup
	started.Add(n)
	for range n {
		done.Go(func() { parkedHere(&started, release) })
	}
	started.Wait()
	if got := With("stacks.parkedHere"); got != n {
		t.Fatalf("%d goroutines in parkedHere, want %d", got, n)
	}
	close(release)
	done.Wait()
	if len(All()) < 1 || With("stacks.parkedHere") != 0 {
		t.Fatalf("after they returned: %d", With("stacks.parkedHere"))
	}
}
