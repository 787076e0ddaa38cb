package suggest

import (
	"errors"
	"flag"
	"io"
	"slices"
	"testing"
)

func TestUnknownFlag(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("workers", 1, "")
	fs.Bool("fresh", false, "")
	name, known, ok := UnknownFlag(fs, fs.Parse([]string{"--worker=2"}))
	if !ok || name != "worker" || !slices.Equal(known, []string{"fresh", "workers"}) {
		t.Fatalf("UnknownFlag = %q %v %v, want worker [fresh workers] true", name, known, ok)
	}
	if _, _, ok := UnknownFlag(fs, fs.Parse([]string{"--workers=x"})); ok {
		t.Error("a bad value read as an unknown flag")
	}
	if _, _, ok := UnknownFlag(fs, errors.New("other")); ok {
		t.Error("another error read as an unknown flag")
	}
}
