package schema

import "strconv"

// The fleet summary (issue 37): one worker at a time, chosen by rendezvous
// hashing among the alive workers (lease.SummarizerRank), lists the ALIVE
// workers, reads their records and writes a small head item, SummaryKey,
// and, only when the membership changed, the alive ids in pages,
// MembersKey(0..pages-1). Every other worker reads the head each refresh
// and the pages only when the head's membership version moved. Advisory:
// no ownership decision reads them. Pk values start with FleetKeyPrefix,
// which no connection id or worker key does ('#' is not in a connection
// id).
const (
	FleetKeyPrefix = "fleet#"
	SummaryKey     = FleetKeyPrefix + "summary"

	AttrSumVersion    = "sum_version"     // N: only grows (the head's write condition); a page carries its membership version
	AttrSumWriter     = "sum_writer"      // S: the worker that wrote it
	AttrSumAtMs       = "sum_at_ms"       // N: the writer's wall clock (informational)
	AttrSumAlive      = "alive"           // N: alive workers listed
	AttrSumLoad       = "load"            // N: sessions their records say they hold
	AttrSumCapacity   = "capacity"        // N: capacity of the workers that count for a share
	AttrSumImbalance  = "imbalance"       // N: max load ÷ fair share
	AttrSumMembers    = "members_version" // N: the version of the membership pages
	AttrSumMembersBy  = "members_by"      // S: their writer
	AttrSumPages      = "pages"           // N: how many membership pages
	AttrSumPeers      = "peers"           // L of M: the receivers and the workers the moves name (id, admin address, load, capacity)
	AttrSumMoves      = "moves"           // L of M: the round's moves (from, to, count)
	AttrSumMemberIDs  = "members"         // SS: a page's alive worker ids
	AttrSumPageNumber = "page"            // N: a page's number
)

// MembersKey is the Pk of membership page n.
func MembersKey(n int) string { return FleetKeyPrefix + "members#" + strconv.Itoa(n) }
