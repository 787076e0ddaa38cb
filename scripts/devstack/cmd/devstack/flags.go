package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/wsfleet/wsfleet/shared/suggest"
)

// parseFlags parses args; a bad flag is one error (said once, by main) with
// the nearest known flag and a hint, never the whole usage: that is -h's.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(new(strings.Builder))
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stderr)
		fs.Usage()
		return err
	}
	if err == nil {
		return nil
	}
	if name, known, ok := suggest.UnknownFlag(fs, err); ok {
		if near := suggest.Nearest(name, known, 0); near != "" {
			return fmt.Errorf("unknown flag --%s: did you mean --%s? (bin/devstack -h lists the flags)", name, near)
		}
		return fmt.Errorf("unknown flag --%s (bin/devstack -h lists the flags)", name)
	}
	return fmt.Errorf("%w (bin/devstack -h lists the flags)", err)
}
