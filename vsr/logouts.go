package vsr

import "github.com/iggy-shard/iggy-shard/wire"

// Sessions ended by their own Logout. A committed Logout removes its client's
// entry, and with it the cached replies a retry is answered from; yet a Logout is
// retried like any request: its origin may have answered 57 (fate unknown: a
// forward to the primary timed out or was abandoned at a view change) after the
// primary committed it, and the client then replays it, the Go SDK for its 30 s
// request deadline. Without a record the replay would find no session and be
// evicted (NoSession), though the logout it asks for did happen. So the table
// keeps, for the last LoggedOutMax Logouts, the session that Logout ended and its
// committed reply: a replay of that very request in that session is answered with
// the reply (PreflightReplay); a logout of a session that never existed, or that
// ended otherwise (evicted, its connection closed), still finds no session.
//
// The record is replicated state like the rest of the table: made only by applied
// Logouts, in op order, bounded by a constant, and carried in the table's ICT2
// encoding (snapshots, state transfer), so every replica holds the same one.

// LoggedOutMax bounds the Logouts whose reply the table keeps after their session
// ended: the oldest is forgotten first. A record is needed while its client may
// still replay the Logout, its NotCommitted window: at most the SDK's 30 s request
// deadline after the origin's 57. 1024 covers that window at a sustained 34
// logouts a second; a replay of a Logout forgotten sooner gets NoSession, as it
// did before the record existed. Each record holds a header-only reply, about
// 300 bytes: 300 KiB at most, in memory and in each snapshot.
const LoggedOutMax = 1024

// loggedOut is a session ended by its own Logout: the Logout's request and its
// committed reply.
type loggedOut struct {
	client   wire.Uint128
	epoch    uint64
	request  uint64
	checksum wire.Uint128
	reply    []byte
}

// CommitLogout applies a committed Logout of client's request: its entry goes,
// and the session it ended is recorded with the Logout's reply for the Logout's
// replays. It reports whether the client had an entry.
func (t *ClientTable) CommitLogout(client wire.Uint128, request uint64, checksum wire.Uint128, reply []byte) bool {
	i, ok := t.index[client]
	if !ok {
		return false
	}
	epoch := t.entries[i].epoch
	t.Remove(client)
	t.recordLogout(loggedOut{client: client, epoch: epoch, request: request, checksum: checksum, reply: append([]byte(nil), reply...)})
	return true
}

func (t *ClientTable) recordLogout(r loggedOut) {
	t.forgetLogout(r.client)
	if len(t.loggedOut) == LoggedOutMax {
		copy(t.loggedOut, t.loggedOut[1:])
		t.loggedOut[len(t.loggedOut)-1] = loggedOut{}
		t.loggedOut = t.loggedOut[:len(t.loggedOut)-1]
	}
	t.loggedOut = append(t.loggedOut, r)
}

// forgetLogout drops client's record: it registers again, or logs out again.
func (t *ClientTable) forgetLogout(client wire.Uint128) {
	if k := t.logoutOf(client); k >= 0 {
		t.loggedOut = append(t.loggedOut[:k], t.loggedOut[k+1:]...)
	}
}

// logoutOf is the index of client's record, or -1. A scan: records are looked
// for only for a client with no entry, which is rare.
func (t *ClientTable) logoutOf(client wire.Uint128) int {
	for k := range t.loggedOut {
		if t.loggedOut[k].client == client {
			return k
		}
	}
	return -1
}

// preflightLoggedOut is Preflight for a client with no entry: the replay of the
// Logout that ended its session, or no session.
func (t *ClientTable) preflightLoggedOut(client wire.Uint128, session, request uint64, checksum wire.Uint128) (Preflight, []byte) {
	k := t.logoutOf(client)
	if k < 0 {
		return PreflightNoSession, nil
	}
	r := &t.loggedOut[k]
	switch {
	case session != r.epoch || request != r.request:
		return PreflightNoSession, nil
	case !checksum.IsZero() && !r.checksum.IsZero() && checksum != r.checksum:
		return PreflightConflict, nil
	}
	return PreflightReplay, r.reply
}

// LoggedOutReply is the committed reply of the Logout of request that ended
// client's session, if the table keeps it: what a second proposal of that Logout
// (skipped when applied) answers.
func (t *ClientTable) LoggedOutReply(client wire.Uint128, request uint64) ([]byte, bool) {
	if k := t.logoutOf(client); k >= 0 && t.loggedOut[k].request == request {
		return t.loggedOut[k].reply, true
	}
	return nil, false
}

// LoggedOutLen is the number of sessions whose Logout reply the table keeps.
func (t *ClientTable) LoggedOutLen() int { return len(t.loggedOut) }
