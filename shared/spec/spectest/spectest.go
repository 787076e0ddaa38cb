// Package spectest builds stored session specs for tests: a spec written
// in code, checked and encoded as ingest would store it. Only tests import
// it.
package spectest

import (
	"testing"

	"github.com/wsfleet/wsfleet/shared/spec"
)

// NewerField is a key no build's spec will ever have: the field "a newer
// ingest wrote" of the rollout tests (spec.ErrUnknownField). Never name a
// field so; a test that took a plausible name (connect_timeout_ms) broke
// the day that field was added.
const NewerField = "from_a_newer_ingest"

// Stored is s checked (its set fields count as given) and encoded; it
// fails the test when s is not a spec ingest would accept.
func Stored(t testing.TB, s spec.Spec) string {
	t.Helper()
	enc, err := s.Stored()
	if err != nil {
		t.Fatalf("spec %+v: %v", s, err)
	}
	return enc
}

// URL is the stored spec of a session that dials url with the defaults.
func URL(t testing.TB, url string) string { return Stored(t, spec.Spec{WSURL: url}) }

// Edit changes the stored spec *stored with f (decoded, changed, checked
// and encoded again).
func Edit(t testing.TB, stored *string, f func(*spec.Spec)) {
	t.Helper()
	s, err := spec.Decode(*stored)
	if err != nil {
		t.Fatalf("stored spec: %v", err)
	}
	f(&s)
	*stored = Stored(t, s)
}
