package vsr

import (
	"fmt"

	"github.com/iggy-shard/iggy-shard/wire"
)

// ClientsTableMaxDefault is the reference server's clients_table_max.
const ClientsTableMaxDefault = 8192

// CachedRepliesMax is how many committed replies a client's entry keeps for retries.
const CachedRepliesMax = 5

// Preflight is the client table's verdict on a metadata request, before it may be
// prepared.
type Preflight uint8

const (
	// PreflightExecute: a new request (above the watermark): prepare it.
	PreflightExecute Preflight = iota + 1
	// PreflightReplay: a retry of a committed request whose reply is cached: send
	// the cached bytes again, apply nothing.
	PreflightReplay
	// PreflightInFlight: the client already has a request in the pipeline; a client
	// has one metadata request outstanding at a time.
	PreflightInFlight
	// PreflightNoSession: the client has no entry (never registered, logged out, or
	// evicted from the table): evict the session with reason NoSession. The replay
	// of the Logout that ended the session is PreflightReplay instead
	// (CommitLogout).
	PreflightNoSession
	// PreflightSessionTooLow: the request carries an older session epoch than the
	// client's latest registration (a zombie connection): evict with SessionTooLow.
	PreflightSessionTooLow
	// PreflightSessionTooHigh: an epoch this table never handed out; dropped.
	PreflightSessionTooHigh
	// PreflightConflict: the request number of the last committed request, reused
	// with a different request_checksum: the arguments changed, so neither replay nor
	// apply is right.
	PreflightConflict
	// PreflightAlreadyApplied: committed long ago, reply no longer cached: answer
	// RequestAlreadyApplied.
	PreflightAlreadyApplied
)

var preflightNames = [...]string{
	PreflightExecute:        "Execute",
	PreflightReplay:         "Replay",
	PreflightInFlight:       "InFlight",
	PreflightNoSession:      "NoSession",
	PreflightSessionTooLow:  "SessionTooLow",
	PreflightSessionTooHigh: "SessionTooHigh",
	PreflightConflict:       "Conflict",
	PreflightAlreadyApplied: "AlreadyApplied",
}

func (p Preflight) String() string {
	if int(p) < len(preflightNames) && preflightNames[p] != "" {
		return preflightNames[p]
	}
	return fmt.Sprintf("Preflight(%d)", uint8(p))
}

type cachedReply struct {
	request uint64
	reply   []byte
}

type clientEntry struct {
	client            wire.Uint128
	epoch             uint64
	userID            uint32
	watermark         uint64
	watermarkChecksum wire.Uint128
	// replies is a ring of the latest committed replies, newest last.
	replies      [CachedRepliesMax]cachedReply
	repliesCount uint8
	// latestCommit is the commit op of the newest cached reply: the eviction order.
	latestCommit uint64
	inFlight     bool
	used         bool
}

// ClientTable deduplicates metadata requests so that they apply exactly once: it
// remembers, per client id, the session epoch of the latest registration, the
// highest committed request number (the watermark) and the last few replies, so a
// retry gets the committed reply instead of a second apply.
//
// It is part of the replicated state: every replica applies the same commits to it,
// in op order, and so holds the same table (ICT2 is its transfer encoding).
type ClientTable struct {
	entries []clientEntry
	index   map[wire.Uint128]int32
	free    []int32
	// loggedOut are the sessions ended by their own Logout, oldest first, at
	// most LoggedOutMax (logouts.go).
	loggedOut []loggedOut
}

// NewClientTable makes a table of at most max clients.
func NewClientTable(max int) *ClientTable {
	if max < 2 || max > 65536 {
		panic(fmt.Sprintf("vsr: clients table size %d outside 2..65536", max))
	}
	t := &ClientTable{
		entries: make([]clientEntry, max),
		index:   make(map[wire.Uint128]int32, max),
		free:    make([]int32, 0, max),
	}
	for i := max - 1; i >= 0; i-- {
		t.free = append(t.free, int32(i))
	}
	return t
}

// Len is the number of registered clients.
func (t *ClientTable) Len() int { return len(t.index) }

// Sessions calls f for every registered client with its session epoch, in no
// particular order.
func (t *ClientTable) Sessions(f func(client wire.Uint128, epoch uint64)) {
	for _, i := range t.index {
		f(t.entries[i].client, t.entries[i].epoch)
	}
}

// Session returns the epoch and user of a registered client.
func (t *ClientTable) Session(client wire.Uint128) (epoch uint64, userID uint32, ok bool) {
	i, ok := t.index[client]
	if !ok {
		return 0, 0, false
	}
	e := &t.entries[i]
	return e.epoch, e.userID, true
}

// Preflight decides what to do with a metadata request of client carrying session
// and request number; on PreflightReplay, reply holds the cached bytes (owned by the
// table: copy before the next commit if they must outlive it).
func (t *ClientTable) Preflight(client wire.Uint128, session, request uint64, checksum wire.Uint128) (verdict Preflight, reply []byte) {
	i, ok := t.index[client]
	if !ok {
		return t.preflightLoggedOut(client, session, request, checksum)
	}
	e := &t.entries[i]
	switch {
	case session < e.epoch:
		return PreflightSessionTooLow, nil
	case session > e.epoch:
		return PreflightSessionTooHigh, nil
	case e.inFlight:
		return PreflightInFlight, nil
	case request > e.watermark:
		return PreflightExecute, nil
	case request == e.watermark && !checksum.IsZero() && !e.watermarkChecksum.IsZero() && checksum != e.watermarkChecksum:
		return PreflightConflict, nil
	}
	for k := 0; k < int(e.repliesCount); k++ {
		if e.replies[k].request == request {
			return PreflightReplay, e.replies[k].reply
		}
	}
	return PreflightAlreadyApplied, nil
}

// Admit marks the client's request as prepared: until it commits (CommitRequest) or
// is abandoned (Abandon), further requests of the client are PreflightInFlight.
func (t *ClientTable) Admit(client wire.Uint128) {
	if i, ok := t.index[client]; ok {
		t.entries[i].inFlight = true
	}
}

// Abandon clears the in-flight mark of a request that will not commit (a failed
// journal append).
func (t *ClientTable) Abandon(client wire.Uint128) {
	if i, ok := t.index[client]; ok {
		t.entries[i].inFlight = false
	}
}

// CommitRegister applies a committed Register at commitOp: the client's session
// epoch becomes commitOp. A new client gets an entry (evicting the least recently
// committed one when the table is full) with watermark 0; a known client is rebound
// to the new user and epoch and keeps its watermark, so its old requests still
// deduplicate. It returns the new epoch.
//
// reply is the register's committed reply (the login reply), cached as request 0 in
// place of an older registration's.
func (t *ClientTable) CommitRegister(client wire.Uint128, userID uint32, commitOp uint64, reply []byte) (epoch uint64) {
	epoch, _ = t.CommitRegisterEvicting(client, userID, commitOp, reply)
	return epoch
}

// CommitRegisterEvicting is CommitRegister, and names the client whose entry the
// registration evicted from a full table (zero when none was).
func (t *ClientTable) CommitRegisterEvicting(client wire.Uint128, userID uint32, commitOp uint64, reply []byte) (epoch uint64, evicted wire.Uint128) {
	i, ok := t.index[client]
	if !ok {
		t.forgetLogout(client)
		i, evicted = t.allocate()
		t.entries[i] = clientEntry{client: client, used: true}
		t.index[client] = i
	}
	e := &t.entries[i]
	if commitOp > e.epoch {
		e.epoch = commitOp
	}
	e.userID = userID
	e.inFlight = false
	e.latestCommit = commitOp
	kept := 0
	for k := 0; k < int(e.repliesCount); k++ {
		if e.replies[k].request != 0 {
			e.replies[kept] = e.replies[k]
			kept++
		}
	}
	for k := kept; k < int(e.repliesCount); k++ {
		e.replies[k] = cachedReply{}
	}
	e.repliesCount = uint8(kept)
	e.push(0, reply)
	return e.epoch, evicted
}

// push appends a reply to the ring, dropping the oldest when full.
func (e *clientEntry) push(request uint64, reply []byte) {
	stored := append([]byte(nil), reply...)
	if int(e.repliesCount) < CachedRepliesMax {
		e.replies[e.repliesCount] = cachedReply{request: request, reply: stored}
		e.repliesCount++
		return
	}
	copy(e.replies[:], e.replies[1:])
	e.replies[CachedRepliesMax-1] = cachedReply{request: request, reply: stored}
}

// CommitRequest records the committed reply of a client's metadata request. A
// client unknown here (evicted or logged out meanwhile) is skipped: its reply went
// out once and cannot be deduplicated any more.
func (t *ClientTable) CommitRequest(client wire.Uint128, request uint64, checksum wire.Uint128, commitOp uint64, reply []byte) {
	i, ok := t.index[client]
	if !ok {
		return
	}
	e := &t.entries[i]
	e.inFlight = false
	if request < e.watermark || commitOp < e.latestCommit {
		return
	}
	if request == e.watermark && e.repliesCount > 0 && e.replies[e.repliesCount-1].request == request {
		e.replies[e.repliesCount-1].reply = append([]byte(nil), reply...)
	} else {
		e.push(request, reply)
	}
	e.watermark = request
	e.watermarkChecksum = checksum
	e.latestCommit = commitOp
}

// Remove drops a client whose session ended otherwise than by its own Logout
// (CommitLogout): a closed connection's, a test's.
func (t *ClientTable) Remove(client wire.Uint128) bool {
	i, ok := t.index[client]
	if !ok {
		return false
	}
	delete(t.index, client)
	t.entries[i] = clientEntry{}
	t.free = append(t.free, i)
	return true
}

func (t *ClientTable) allocate() (int32, wire.Uint128) {
	if n := len(t.free); n > 0 {
		i := t.free[n-1]
		t.free = t.free[:n-1]
		return i, wire.Uint128{}
	}
	// Full: evict the entry whose latest reply is oldest, never one with a request
	// in the pipeline; ties go to the lowest slot so every replica evicts the same.
	victim := int32(-1)
	for i := range t.entries {
		e := &t.entries[i]
		if !e.used || e.inFlight {
			continue
		}
		if victim < 0 || e.latestCommit < t.entries[victim].latestCommit {
			victim = int32(i)
		}
	}
	if victim < 0 {
		panic("vsr: client table full of in-flight clients: pipeline larger than the table")
	}
	evicted := t.entries[victim].client
	delete(t.index, evicted)
	t.entries[victim] = clientEntry{}
	return victim, evicted
}

// Watermark is a registered client's highest committed request number (zero for an
// unknown client), as a forwarded login's answer carries it.
func (t *ClientTable) Watermark(client wire.Uint128) uint64 {
	if i, ok := t.index[client]; ok {
		return t.entries[i].watermark
	}
	return 0
}

// RegisterAllowed reports whether client may (re)register as userID: a client id
// bound to another user is not taken over.
func (t *ClientTable) RegisterAllowed(client wire.Uint128, userID uint32) bool {
	i, ok := t.index[client]
	return !ok || t.entries[i].userID == userID
}
