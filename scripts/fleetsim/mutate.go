//go:build fleetsim

package fleetsim

// AddThief starts a worker whose table access breaks fencing: its acquire
// ignores the current owner and its discovery lists the first n sessions as
// unowned whoever holds them. It exists for the mutation check only (the
// judge must report the double owners it makes); a scenario that claims
// safety never calls it.
func (fl *Fleet) AddThief(n int) (*Member, error) {
	m, err := fl.addWorker(func(ms *memberStore) {
		ms.steal, ms.stealN, ms.ids = true, n, fl.Sessions
	})
	if err != nil {
		return nil, err
	}
	fl.Record.fault(Fault{Kind: "thief", Workers: []string{m.ID}, At: m.Started})
	return m, nil
}
