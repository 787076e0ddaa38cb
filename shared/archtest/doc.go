// Package archtest holds the tests of the repository's dependency rules
// (docs/architecture.md): the ownership core imports no AWS SDK and nothing
// that knows URLs or headers, the deployables import shared and never each
// other, and no shipped binary imports the test harness. It has no code of
// its own; go.work lets a forbidden import build, so these tests look.
package archtest
