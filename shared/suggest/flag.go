package suggest

import (
	"flag"
	"strings"
)

// UnknownFlag reads an error of fs.Parse: for "flag provided but not
// defined", the flag named (without dashes) and the names fs defines, to
// suggest from; ok is false for any other error.
func UnknownFlag(fs *flag.FlagSet, err error) (name string, known []string, ok bool) {
	if err == nil {
		return "", nil, false
	}
	name, ok = strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return "", nil, false
	}
	fs.VisitAll(func(f *flag.Flag) { known = append(known, f.Name) })
	return name, known, true
}
