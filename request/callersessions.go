package request

import "sync"

// CallerSessions is the set of credentials (Caller.Credential) that hold a
// session at shard 0 (metahost/callers.go): written by shard 0 as it registers
// and ends them, read by every shard as it takes a call's partition write. A
// credential in it goes straight to the partition's owner; one not in it goes
// through shard 0 first, to be registered (or refused) as a metadata write's
// session is. A credential whose session shard 0 is ending may still be read
// as present for a moment: its write then runs under the session that was.
//
// A read-locked map, not a sync.Map: a lookup by string key then boxes nothing,
// so a produce allocates nothing for it, and writes are rare (a credential's
// first write, its logout).
type CallerSessions struct {
	mu          sync.RWMutex
	credentials map[string]struct{}
}

// NewCallerSessions is an empty set.
func NewCallerSessions() *CallerSessions {
	return &CallerSessions{credentials: make(map[string]struct{})}
}

// Has reports whether credential holds a session. Safe from any goroutine.
func (s *CallerSessions) Has(credential string) bool {
	s.mu.RLock()
	_, ok := s.credentials[credential]
	s.mu.RUnlock()
	return ok
}

// Add records that credential holds a session (shard 0).
func (s *CallerSessions) Add(credential string) {
	s.mu.Lock()
	s.credentials[credential] = struct{}{}
	s.mu.Unlock()
}

// Remove records that credential's session ended (shard 0).
func (s *CallerSessions) Remove(credential string) {
	s.mu.Lock()
	delete(s.credentials, credential)
	s.mu.Unlock()
}
