package cmdmain

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"
)

func TestExitCode(t *testing.T) {
	var stderr bytes.Buffer
	if code := exitCode("cmd", func(context.Context) error { return nil }, &stderr); code != 0 || stderr.Len() != 0 {
		t.Fatalf("success: code %d, stderr %q", code, stderr.String())
	}
	if code := exitCode("cmd", func(context.Context) error { return errors.New("boom") }, &stderr); code != 1 || stderr.String() != "cmd: boom\n" {
		t.Fatalf("failure: code %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	boom := errors.New("boom")
	err := fmt.Errorf("wrapped: %w", Reported(boom))
	if code := exitCode("cmd", func(context.Context) error { return err }, &stderr); code != 1 || stderr.Len() != 0 {
		t.Fatalf("reported: code %d, stderr %q", code, stderr.String())
	}
	if !errors.Is(err, boom) || err.Error() != "wrapped: boom" || Reported(nil) != nil {
		t.Fatalf("Reported changes the error: %v", err)
	}
	// -h: the flag set printed its usage; the command exits 0, silently.
	stderr.Reset()
	help := func(context.Context) error {
		fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return fs.Parse([]string{"-h"})
	}
	if code := exitCode("cmd", help, &stderr); code != 0 || stderr.Len() != 0 {
		t.Fatalf("-h: code %d, stderr %q", code, stderr.String())
	}
}

// TestSIGTERMCancelsTheContext: the run function sees its context end when
// the process gets SIGTERM, and returns normally.
func TestSIGTERMCancelsTheContext(t *testing.T) {
	var stderr bytes.Buffer
	code := exitCode("cmd", func(ctx context.Context) error {
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("SIGTERM did not cancel the context")
		}
	}, &stderr)
	if code != 0 {
		t.Fatalf("code %d: %s", code, stderr.String())
	}
}
