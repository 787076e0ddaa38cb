package feed

// SetBeforeAccept makes s run f after registering a connection and before
// answering its handshake. Call it before Start.
func SetBeforeAccept(s *Server, f func(session string)) { s.beforeAccept = f }
