// Package cmdmain owns how a wsfleet command starts and ends: a context
// that SIGTERM or SIGINT cancels, the command's run function, and the exit
// status (0, or 1 with "name: error" on stderr). A command's main is one
// call to Run, and Run is the one place such a command exits.
package cmdmain

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Run runs run with a context cancelled by SIGTERM or SIGINT and exits 1
// when it fails. After the first signal the default action is restored, so
// a second one ends the process at once.
func Run(name string, run func(ctx context.Context) error) {
	if code := exitCode(name, run, os.Stderr); code != 0 {
		os.Exit(code)
	}
}

func exitCode(name string, run func(ctx context.Context) error, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := run(ctx); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0 // -h: the flag set printed the usage; asking for it is no failure
		}
		if !errors.As(err, new(reported)) {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
		}
		return 1
	}
	return 0
}

// Reported is err marked as reported already by the command itself (the
// worker's last JSON log line says why it exits): Run exits 1 without
// printing it again. Reported(nil) is nil.
func Reported(err error) error {
	if err == nil {
		return nil
	}
	return reported{err}
}

type reported struct{ error }

func (r reported) Unwrap() error { return r.error }
