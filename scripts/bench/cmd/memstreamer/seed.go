package main

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/spec"
)

// Seed describes the sessions to create in the in-memory store.
type Seed struct {
	// Sessions is how many sessions to create, with ids Prefix + "%06d".
	Sessions int
	Prefix   string // default "mem-"
	// URLs are ws URL patterns; session n uses URLs[n % len(URLs)] with
	// "{id}" replaced by its connection id and "{n}" by n. Several patterns
	// on several loopback addresses (127.0.0.1, 127.0.0.2, …) keep a large
	// run under the ephemeral-port limit of one address pair.
	URLs        []string
	ResumeParam string // e.g. "from"; "" = no resume
	SeqField    string // "" = the worker's default
}

// Put writes the sessions (STARTED, never leased) into store and returns
// their ids.
func (s Seed) Put(store *memstore.Store) ([]string, error) {
	if s.Sessions < 0 {
		return nil, fmt.Errorf("memory seed: negative session count %d", s.Sessions)
	}
	if s.Sessions > 0 && len(s.URLs) == 0 {
		return nil, fmt.Errorf("memory seed: %d sessions need at least one URL pattern", s.Sessions)
	}
	prefix := s.Prefix
	if prefix == "" {
		prefix = "mem-"
	}
	ids := make([]string, 0, s.Sessions)
	for n := range s.Sessions {
		id := fmt.Sprintf("%s%06d", prefix, n)
		u := strings.NewReplacer("{id}", id, "{n}", strconv.Itoa(n)).Replace(s.URLs[n%len(s.URLs)])
		sp := spec.Spec{WSURL: u, SeqPath: s.SeqField}
		if s.ResumeParam != "" {
			sp.Resume = &spec.Resume{QueryParam: s.ResumeParam}
		}
		stored, err := sp.Stored()
		if err != nil {
			return nil, fmt.Errorf("memory seed %s: %w", id, err)
		}
		store.Put(lease.Item{
			ConnectionID: id, DesiredState: schema.StateStarted, Spec: stored, Generation: 1, LastSeq: lease.NoSeq,
		})
		ids = append(ids, id)
	}
	return ids, nil
}

// measuredPut is Put, and the live heap the seeded table took: HeapAlloc
// after a collection, after the seeding less before it. The table is the
// stand-in for DynamoDB's (the shipped worker keeps none of it in its
// process), so the bench takes it out of the worker's memory per session;
// the acquires later write an owner and an epoch on each item, which this
// does not count (the figure is a lower bound of the table).
func (s Seed) measuredPut(store *memstore.Store) (int64, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := s.Put(store); err != nil {
		return 0, err
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc), nil
}
