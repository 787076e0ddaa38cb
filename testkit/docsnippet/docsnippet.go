// Package docsnippet owns how the tests read the terminal sessions pasted
// in the docs (fenced blocks of "$ command" lines and what each printed),
// so that a test can run the command and compare: a pasted output that no
// test checks drifts. Standard library only. Test infrastructure, in the
// testkit module: no shipped binary imports it.
package docsnippet

import "strings"

// Section is one command of a pasted terminal session in a fenced block:
// the command after "$ " (continuation lines joined) and the lines it
// printed.
type Section struct {
	Cmd string
	Out []string
}

// Sections are the "$ " commands of every fenced block of doc.
func Sections(doc string) []Section {
	var out []Section
	in, cont, open := false, false, false // open: a section of this block takes the lines
	for _, l := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(l, "```"):
			in, cont, open = !in, false, false
		case !in:
		case cont:
			out[len(out)-1].Cmd += " " + strings.TrimSpace(strings.TrimSuffix(l, `\`))
			cont = strings.HasSuffix(l, `\`)
		case strings.HasPrefix(l, "$ "):
			out = append(out, Section{Cmd: strings.TrimSpace(strings.TrimSuffix(l[2:], `\`))})
			cont, open = strings.HasSuffix(l, `\`), true
		case open:
			out[len(out)-1].Out = append(out[len(out)-1].Out, l)
		}
	}
	return out
}
