// Package request holds the typed requests of a node: what each command carries
// on its way between shards (a Job, its envelope and its kind's part), and the
// Call of a transport other than the binary connections (server/caller.go). The
// connection's shard fills a job from a decoded request, the owner shard or
// shard 0 works on it and fills its outcome, and the job comes back to its
// home with the answer: its buffers are reused from request to request, so that
// nothing is allocated per request once a shard's free list is warm.
package request

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Kind says what a job asks for.
type Kind uint8

const (
	KindLogin Kind = iota + 1
	KindRead
	KindWrite
	KindSend
	KindPoll
	KindGetOffset
	KindStoreOffset
	KindDeleteOffset
	// KindOpen is an anonymous connection's first request, its outcome decided on
	// its shard already: the detour through shard 0 only orders it after the
	// connection's registration.
	KindOpen
)

// Home is the shard a job belongs to: it takes jobs from its free list and
// recycles them once answered.
type Home interface {
	Recycle(j *Job)
}

// Job is one request on its way between shards. It belongs to the connection's
// shard (Home), which takes it from its free list, and returns there with the
// outcome.
//
// Its envelope is what every request has: the connection, the request frame, the
// logged-in user, its arrival, and its outcome (Out). What a request carries
// beyond that is in the part its kind names (Login, Send, Poll, Offset); the
// other parts stay zero. The parts hold decoded requests and results, never the
// framing: another transport's requests fill them as well (Call).
type Job struct {
	Home Home
	// Call is the transport call this job runs, nil for a connection's request;
	// Conn is then an id minted for it (server/caller.go).
	Call    *Call
	Conn    shard.ConnID
	Kind    Kind
	Frame   shard.Frame
	UserID  uint32
	StartNs int64 // when its request arrived (shard clock), for its latency
	Out     Outcome
	// Binding: a call's partition write on its way through shard 0, which
	// registers its credential's session first (metahost/callers.go); back home
	// without an outcome, it goes on to the partition's owner.
	Binding bool

	Login  Login  // KindLogin
	Send   Send   // KindSend
	Poll   Poll   // KindPoll
	Offset Offset // KindGetOffset, KindStoreOffset, KindDeleteOffset
}

// Outcome is a job's answer: an eviction, a status denial, or a reply body
// (Reply; with RawFrame, a whole frame built by the metadata plane).
type Outcome struct {
	Evict    wire.EvictionReason
	Status   wire.ErrorCode
	RawFrame bool
	Reply    []byte
}

// Login is a Register's session, once the metadata plane committed it.
type Login struct {
	LoggedIn bool
	Epoch    uint64
	Seen     *atomic.Int64       // when the session last sent a request (shard clock)
	Token    *metadata.TokenHash // a token login's
	// HeardPrimary: a login refused at a backup was decided again after the
	// backup applied its primary's commit point; it is not again.
	HeardPrimary bool
}

// Send is a SendMessages: its decoded batch, and the partition it resolved to.
type Send struct {
	Key   partition.Key
	Batch wire.SendMessages
}

// Poll is a PollMessages: the partition and the request it resolved to, and its
// result, whose read buffer it holds until the reply is sent.
type Poll struct {
	Key partition.Key
	Req partition.PollRequest
	Res partition.PollResult
	// Read is set once the partition's read is over (the reply then carries its
	// messages, if any); Parts is the reply's scratch of vectored parts.
	Read  bool
	Parts [][]byte
	// MayPlan: the connection's shard can splice the reply (a plaintext
	// connection with a pipe free, shard.Conn.CanSplice), so the owner shard
	// may answer with a plan of file runs instead of reading the batches
	// (partition.Store.PlanPoll). Plan is that answer when it holds
	// descriptors, released when the job is recycled, after its reply was
	// sent; it is kept from poll to poll, as Res is.
	MayPlan bool
	Plan    partition.PollPlan
}

// Offset is a Get, Store or DeleteConsumerOffset: the partition and consumer it
// resolved to, and the value and acknowledgement a store asks for.
type Offset struct {
	Key      partition.Key
	Consumer partition.Consumer
	Value    uint64
	Ack      wire.AckLevel
}

// Partition is the partition a partition operation goes to.
func (j *Job) Partition() partition.Key {
	switch j.Kind {
	case KindSend:
		return j.Send.Key
	case KindPoll:
		return j.Poll.Key
	case KindGetOffset, KindStoreOffset, KindDeleteOffset:
		return j.Offset.Key
	}
	panic(fmt.Sprintf("request: a job of kind %d has no partition", j.Kind))
}

// Refused reports whether a finished job's answer is a refusal: an eviction, a
// status, or a committed rejection (a result section with an error code).
func (j *Job) Refused() (evicted, refused bool) {
	switch {
	case j.Out.Evict != 0:
		return true, false
	case j.Out.Status != 0:
		return false, true
	}
	switch j.Kind {
	case KindWrite, KindLogin, KindStoreOffset, KindDeleteOffset: // result-framed replies
		body := j.Out.Reply
		if j.Out.RawFrame && len(body) >= wire.HeaderSize {
			body = body[wire.HeaderSize:]
		}
		if _, code, err := wire.SplitResult(body); err == nil && code != 0 {
			return false, true
		}
	}
	return false, false
}

// Release implements shard.Releaser: the vectored poll reply has been sent.
func (j *Job) Release() { j.Home.Recycle(j) }

// Caller is who runs a command that came over a transport other than the ring's
// binary connections (HTTP): already authenticated by that transport.
type Caller struct {
	// UserID is the user the transport authenticated, when LoggedIn. (The root
	// user's id is 0, so "not logged in" is LoggedIn false, not a zero id.)
	UserID uint32
	// LoggedIn false: only the login commands (and PING) are allowed.
	LoggedIn bool
	// Addr is the client's address: password-check fairness (the per-source
	// budget and turns of the password workers), GET_ME, logs.
	Addr netip.AddrPort
	// Credential names what the transport authenticated the caller by (over
	// HTTP "jwt:<jti>" or "pat:<hash>"): its metadata writes go under a session
	// of that credential (metahost/callers.go). Empty: a session per user.
	Credential string
	// ExpiryMicros is when the credential expires (unix microseconds, 0 when it
	// does not or is not known): past it its session may be ended to make room
	// for another.
	ExpiryMicros uint64
}

// Call is one command of a Caller on its way (server.Server.Do). The shard that
// takes it fills Reply and Err and closes its done channel, once (Finish); Do
// may have returned already (its context ended), and then nobody reads them.
type Call struct {
	Caller Caller
	Code   wire.CommandCode
	Header wire.RequestHeader
	Body   []byte
	Reply  []byte
	Err    error
	done   chan struct{}
}

// NewCall is a call of code with body as caller.
func NewCall(caller Caller, code wire.CommandCode, body []byte) *Call {
	return &Call{Caller: caller, Code: code, Body: body, done: make(chan struct{})}
}

// Finish answers the call; it runs once per call.
func (c *Call) Finish(reply []byte, err error) {
	c.Reply, c.Err = reply, err
	close(c.done)
}

// ErrStopped is a call's error once the server is stopping or stopped: a call
// that had not reached a shard was not run; one that had may have been.
var ErrStopped = errors.New("server: stopped")

// Wait waits for the answer, for ctx to end (its error), or for stopped to close
// (ErrStopped, unless the answer came meanwhile).
func (c *Call) Wait(ctx context.Context, stopped <-chan struct{}) ([]byte, error) {
	select {
	case <-c.done:
		return c.Reply, c.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-stopped:
		// The shards are gone: the call was answered as they stopped, or was
		// never taken (its shard had exited).
		select {
		case <-c.done:
			return c.Reply, c.Err
		default:
			return nil, ErrStopped
		}
	}
}

// callConnFlag marks the ConnIDs minted for calls (CallConnID): the top bit of a
// ConnID's slot field, which no connection's slot reaches (a shard holds at most
// 65536 connections), so a call never shares a key with a connection in shard
// 0's tables of logins and password work.
const callConnFlag = shard.ConnID(1) << 47

// CallConnID is the id a call of shard index goes under: its home shard for the
// reply (ConnID.Shard) and a number of its own.
func CallConnID(index int, n uint64) shard.ConnID {
	return shard.ConnID(uint64(index)<<48) | callConnFlag | shard.ConnID(n&(uint64(callConnFlag)-1))
}

// IsCallConn reports whether conn was minted for a call.
func IsCallConn(conn shard.ConnID) bool { return conn&callConnFlag != 0 }
