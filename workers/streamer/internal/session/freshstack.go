// Deep calls on a fresh stack: the one "run on a goroutine and wait"
// helper of a session (the spec's decoding, the dial once its host admitted
// it: the secrets' expansion and the handshake; the anchor's store write).
// Waits that may be long and are shallow (the host's admission) stay on
// the session's goroutine: every goroutine ever started at once leaves its
// descriptor in the runtime for the process's life.

package session

// onFreshStack runs f in a short-lived goroutine and returns what f
// returned, once it returned. A session's goroutine lives as long as the
// session and only reads; a deep call chain (JSON decoding, net/http's
// handshake, a secret Provider) run on it would grow its stack (measured:
// the spec's decode alone grows a goroutine's stack from 2 to about 4 KiB;
// about 4 KiB per session saved), while a goroutine of its own ends with
// the call, and its stack with it.
//
// The caller waits for f unconditionally, so f must end by itself (bound it
// by its context): the goroutine never outlives its caller, which is why it
// is not one of the worker's tracked goroutines (workers/streamer's
// routines.go): it belongs to the session goroutine that waits for it.
func onFreshStack[T any](f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	r := <-ch
	return r.v, r.err
}
