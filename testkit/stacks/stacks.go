// Package stacks owns how tests read the process's goroutines: every
// goroutine's stack as text (runtime.Stack of all), one per element, for a
// test that counts or names what is running. No shipped binary imports it.
package stacks

import (
	"runtime"
	"strings"
)

// All is the stack of every goroutine, one per element.
func All() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return strings.Split(string(buf), "\n\n")
}

// With counts the goroutines whose stack names fn.
func With(fn string) int {
	c := 0
	for _, st := range All() {
		if strings.Contains(st, fn) {
			c++
		}
	}
	return c
}
