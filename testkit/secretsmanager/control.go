package secretsmanager

// Put writes value as the new AWSCURRENT version of the secret name
// (creating it), as CreateSecret or PutSecretValue would, and returns the
// version's id: tests seed and rotate secrets with it without a client.
func (s *Server) Put(name, value string) string {
	return s.write(name, &value, nil)
}

// PutBinary writes a SecretBinary-only version.
func (s *Server) PutBinary(name string, value []byte) string {
	return s.write(name, nil, append([]byte{}, value...))
}

func (s *Server) write(name string, str *string, bin []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec := s.secrets[name]
	if sec == nil {
		sec = s.newSecretLocked(name)
	}
	return sec.addLocked("", str, bin).id
}

// Fail answers the next n calls of op (OpGetSecretValue, …) with the error
// code (ThrottlingException, AccessDeniedException, InternalServiceError,
// …), after any faults already queued.
func (s *Server) Fail(op, code string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[op] = append(s.faults[op], code)
	}
}

// Hold makes every call of op wait (counted, but not answered) until the
// returned release is called, or the request is cancelled. Release is
// idempotent.
func (s *Server) Hold(op string) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.holds[op] = ch
	s.mu.Unlock()
	var done bool
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if done {
			return
		}
		done = true
		close(ch)
		if s.holds[op] == ch {
			delete(s.holds, op)
		}
	}
}

// Calls is how many well-framed calls of op the server received (faults
// and held calls included).
func (s *Server) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}
