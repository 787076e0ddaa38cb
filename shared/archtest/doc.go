// Package archtest holds the tests of the repository's dependency rules
// (docs/architecture.md): the ownership core imports no AWS SDK and nothing
// that knows URLs or headers, the deployables import shared and never each
// other, and neither a shipped binary nor shared (its tests aside) imports
// the test harness (the testkit module, scripts/); and the worker's control
// plane reads time only from its injected clock (shared/clock), never the
// system clock, outside a commented allow-list (clock_test.go); and the
// worker draws its randomness only from its injected source (shared/draw),
// never math/rand itself (rand_test.go). It has no
// code of its own; go.work lets a forbidden import build, so these tests
// look.
package archtest
