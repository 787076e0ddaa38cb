package streamer

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// MemorySeed describes sessions to create in an in-memory store: the
// worker's no-I/O mode (`streamer --store=memory`), used by the capacity
// benchmark to measure the WebSocket + parse + dedupe + sink path without
// DynamoDB, and by demos.
type MemorySeed struct {
	// Sessions is how many sessions to create, with ids Prefix + "%06d".
	Sessions int
	Prefix   string // default "mem-"
	// URLs are ws URL patterns; session n uses URLs[n % len(URLs)] with
	// "{id}" replaced by its connection id and "{n}" by n. Several patterns
	// on several loopback addresses (127.0.0.1, 127.0.0.2, …) keep a large
	// run under the ephemeral-port limit of one address pair.
	URLs        []string
	ResumeParam string // e.g. "from"; "" = no resume
	SeqField    string // default "seq"
}

// Seed writes the sessions (STARTED, never leased) into store and returns
// their ids.
func (m MemorySeed) Seed(store *memstore.Store) ([]string, error) {
	if m.Sessions < 0 {
		return nil, fmt.Errorf("memory seed: negative session count %d", m.Sessions)
	}
	if m.Sessions > 0 && len(m.URLs) == 0 {
		return nil, fmt.Errorf("memory seed: %d sessions need at least one URL pattern", m.Sessions)
	}
	prefix := m.Prefix
	if prefix == "" {
		prefix = "mem-"
	}
	ids := make([]string, 0, m.Sessions)
	for n := 0; n < m.Sessions; n++ {
		id := fmt.Sprintf("%s%06d", prefix, n)
		u := strings.NewReplacer("{id}", id, "{n}", strconv.Itoa(n)).Replace(m.URLs[n%len(m.URLs)])
		store.Put(lease.Item{
			ConnectionID: id, DesiredState: schema.StateStarted, WSURL: u, SeqField: m.SeqField,
			ResumeParam: m.ResumeParam, Generation: 1, LastSeq: lease.NoSeq,
		})
		ids = append(ids, id)
	}
	return ids, nil
}
