// The one shape of a judge pass (a walk over the indexed evidence that files
// violations under the checks it declares) and the registry of them, in the
// order Analyze runs them.

package chaos

// pass is one of the judge's passes. Its file (doc.go lists them) holds
// the function named here and its helpers.
type pass struct {
	name string
	// checks are the checks (Check* names) the pass may file violations
	// under; a check several passes judge is in sharedChecks.
	checks []string
	// after names the passes whose results this one reads: each runs
	// before it in passes.
	after []string
	// run judges, filing violations (judge.violate) and the pass's figures
	// in j.res.
	run func(j *judge)
}

// passes are the judge's passes in run order. The order is the report's:
// violations at one instant are listed in the order their passes filed
// them.
var passes = []pass{
	{name: "deliveries", checks: []string{CheckFencing, CheckOrder, CheckNoLoss},
		run: (*judge).checkDeliveries},
	{name: "connections", checks: []string{CheckOneConn},
		after: []string{"deliveries"}, // the tenures: a planned overlap's owner of record
		run:   (*judge).checkConnections},
	{name: "transitions", checks: []string{CheckRepeats, CheckRebalance},
		after: []string{"deliveries"}, // the tenures and their repeats
		run:   (*judge).checkTransitions},
	{name: "standby", checks: []string{CheckStandbyNoLoss, CheckStandbyRepeats},
		after: []string{"deliveries"}, // the tenures either side of a takeover
		run:   (*judge).checkStandby},
	{name: "one-deliverer", checks: []string{CheckOneDeliverer},
		after: []string{"deliveries"}, // the tenures
		run:   (*judge).checkOneDeliverer},
	{name: "faults", checks: []string{CheckCrash, CheckHandoff, CheckRebalance, CheckOutage, CheckSource, CheckFencing, CheckSinkRecovery},
		after: []string{"deliveries", "transitions"}, // the tenures; the raw repeats per fault (FaultResult.Repeats)
		run:   (*judge).checkFaults},
	{name: "poison", checks: []string{CheckSink, CheckSinkRecovery, CheckRepeats},
		after: []string{"deliveries", "faults"}, // a session stuck behind a poisoned seq is named once: the source-poison faults' unrecovered are not named again
		run:   (*judge).checkPoison},
	{name: "starts", checks: []string{CheckClaim},
		after: []string{"faults"}, // the SQS-down and churn faults' results count the claims made during them
		run:   (*judge).checkStarts},
	{name: "stops", checks: []string{CheckStop},
		run: (*judge).checkStops},
	{name: "table", checks: []string{CheckEndOwners, CheckRelease, CheckNoLoss},
		after: []string{"deliveries"}, // the highest seq delivered, against the checkpoints
		run:   (*judge).checkTable},
	{name: "sinks", checks: []string{CheckSink, CheckNoLoss},
		run: (*judge).checkSinks},
	{name: "trust", checks: []string{CheckTrust},
		run: (*judge).checkTrust},
	{name: "prefix", checks: []string{CheckPrefix},
		after: []string{"deliveries"}, // the seqs delivered, against the checkpoints
		run:   (*judge).checkPrefix},
}

// sharedChecks are the checks more than one pass judges, with those passes
// (each judges the rule where its walk sees the evidence).
var sharedChecks = map[string][]string{
	// stale epochs in the deliveries; a worker's deliveries after its
	// trust deadline around a fault
	CheckFencing: {"deliveries", "faults"},
	// loss and gaps against the feed; a checkpoint ahead of the sink (the
	// table); a skip the sink never refused (the destination)
	CheckNoLoss: {"deliveries", "table", "sinks"},
	// repeats across an ownership change; a poisoned record stored too
	// often
	CheckRepeats: {"transitions", "poison"},
	// a rebalancing move's hand-off; scale-out and scale-in
	CheckRebalance: {"transitions", "faults"},
	// the poisoned messages' bytes at the destination; the envelopes and
	// lines
	CheckSink: {"poison", "sinks"},
	// after a sink fault; a session stuck behind a poisoned seq
	CheckSinkRecovery: {"faults", "poison"},
}

// declaredOnly makes judge.violate panic when a pass files a violation
// under a check it does not declare (the tests set it).
var declaredOnly bool
