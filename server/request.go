package server

import (
	"fmt"
	"sync/atomic"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The typed requests: what each command carries on its way between shards.

// jobKind says what a job asks for.
type jobKind uint8

const (
	jobLogin jobKind = iota + 1
	jobRead
	jobWrite
	jobSend
	jobPoll
	jobGetOffset
	jobStoreOffset
	jobDeleteOffset
	// jobOpen is an anonymous connection's first request, its outcome decided on its
	// shard already: the detour through shard 0 only orders it after the connection's
	// registration (clientOpened).
	jobOpen
)

// job is one request on its way between shards. It belongs to the connection's
// shard (home), which takes it from its free list, and returns there with the
// outcome; its buffers are reused from request to request.
//
// Its envelope is what every request has: the connection, the request frame, the
// logged-in user, its arrival, and its outcome (out). What a request carries
// beyond that is in the part its kind names (login, send, poll, offset); the
// other parts stay zero. The parts hold decoded requests and results, never the
// framing: another transport's requests can fill them as well.
type job struct {
	home *handler
	// call is the Do this job runs (caller.go), nil for a connection's request;
	// conn is then an id minted for it (callConnID).
	call    *call
	conn    shard.ConnID
	kind    jobKind
	frame   shard.Frame
	userID  uint32
	startNs int64 // when its request arrived (shard clock), for its latency
	out     jobOutcome

	login  loginRequest  // jobLogin
	send   sendRequest   // jobSend
	poll   pollRequest   // jobPoll
	offset offsetRequest // jobGetOffset, jobStoreOffset, jobDeleteOffset
}

// jobOutcome is a job's answer: an eviction, a status denial, or a reply body
// (reply; with rawFrame, a whole frame built by the metadata plane).
type jobOutcome struct {
	evict    wire.EvictionReason
	status   wire.ErrorCode
	rawFrame bool
	reply    []byte
}

// loginRequest is a Register's session, once the metadata plane committed it.
type loginRequest struct {
	loggedIn bool
	epoch    uint64
	seen     *atomic.Int64       // when the session last sent a request (shard clock)
	token    *metadata.TokenHash // a token login's
	// heardPrimary: a login refused at a backup was decided again after the
	// backup applied its primary's commit point (metaRouter.awaitPrimary); it is
	// not again.
	heardPrimary bool
}

// sendRequest is a SendMessages: its decoded batch, and the partition it
// resolved to.
type sendRequest struct {
	key   partition.Key
	batch wire.SendMessages
}

// pollRequest is a PollMessages: the partition and the request it resolved to,
// and its result, whose read buffer it holds until the reply is sent.
type pollRequest struct {
	key partition.Key
	req partition.PollRequest
	res partition.PollResult
	// read is set once the partition's read is over (the reply then carries its
	// messages, if any); parts is the reply's scratch of vectored parts.
	read  bool
	parts [][]byte
}

// offsetRequest is a Get, Store or DeleteConsumerOffset: the partition and
// consumer it resolved to, and the value and acknowledgement a store asks for.
type offsetRequest struct {
	key      partition.Key
	consumer partition.Consumer
	value    uint64
	ack      wire.AckLevel
}

// partition is the partition a partition operation goes to.
func (j *job) partition() partition.Key {
	switch j.kind {
	case jobSend:
		return j.send.key
	case jobPoll:
		return j.poll.key
	case jobGetOffset, jobStoreOffset, jobDeleteOffset:
		return j.offset.key
	}
	panic(fmt.Sprintf("server: a job of kind %d has no partition", j.kind))
}

// outcome classes a finished job's answer for the metrics: a committed rejection
// (a result section with an error code) counts as refused, as a status does.
func (j *job) outcome() outcome {
	switch {
	case j.out.evict != 0:
		return outcomeEvicted
	case j.out.status != 0:
		return outcomeRefused
	}
	switch j.kind {
	case jobWrite, jobLogin, jobStoreOffset, jobDeleteOffset: // result-framed replies
		body := j.out.reply
		if j.out.rawFrame && len(body) >= wire.HeaderSize {
			body = body[wire.HeaderSize:]
		}
		if _, code, err := wire.SplitResult(body); err == nil && code != 0 {
			return outcomeRefused
		}
	}
	return outcomeOK
}

// Release implements shard.Releaser: the vectored poll reply has been sent.
func (j *job) Release() { j.home.recycle(j) }
