// Package metahost is the metadata plane's host on shard 0: the plane (package
// metaplane) over this node's files (package metafiles), the host that carries
// out what it asks (host.go: the journal's writes on the writer goroutine,
// checkpoints, installs, replica messages, argon2id work on the password
// workers), its ticks in a cluster (ticks.go), and the router of the requests
// that need shard 0 (router.go): logins, metadata writes, the reads of the whole
// node, the sessions of the node's connections and of its transport callers
// (callers.go), and the commit log every shard's view follows (package
// metaview).
//
// The transports' handler (package server) drives it on shard 0 and hands it
// jobs (package request); the host answers through Shard0, the seam between
// the two: a finished job goes back to its home shard, a commit is announced to
// every shard, a frame leaves on the replica plane.
package metahost

import (
	"log/slog"
	"net/netip"
	"sync/atomic"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metafiles"
	"github.com/iggy-shard/iggy-shard/passwords"
	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// ServerVersion is the version the server reports (logins, stats).
const ServerVersion = "0.11.0"

// Shard0 is what the host needs of shard 0's handler and of its node.
type Shard0 interface {
	// Reply sends a finished job back to its home shard, which answers it.
	Reply(j *request.Job)
	// AnnounceCommit tells every shard that the commit log grew.
	AnnounceCommit()
	// SendMetaReplica sends one of the metadata core's frames to a peer.
	SendMetaReplica(to uint8, header, body []byte) error
	// PublishRole publishes the metadata group's view, status and primary as
	// the core has them, for every goroutine (a transport, GetClusterMetadata).
	PublishRole(core *vsr.Core)
	// AppendNodeStats and AppendSnapshotArchive answer GetStats (of a state
	// that counts counts, with clients connections) and GetSnapshot.
	AppendNodeStats(dst []byte, counts metadata.Counts, clients int) []byte
	AppendSnapshotArchive(dst, body []byte) ([]byte, error)
	// NowNs is shard 0's clock, NowMicros the wall clock.
	NowNs() int64
	NowMicros() uint64
	// Wake has shard 0 take a turn; safe from any goroutine.
	Wake()
}

// ClientOpened registers an accepted connection with shard 0, which lists it
// (GetClients) from then on, under the client id its shard gave it.
type ClientOpened struct {
	Conn shard.ConnID
	ID   uint32
	Peer netip.AddrPort
}

// ClientGone is a connection that closed: logged in with the session of Epoch
// as Client, or not.
type ClientGone struct {
	Client   wire.Uint128
	Conn     shard.ConnID
	LoggedIn bool
	Epoch    uint64
}

// Plane is the router's metadata plane.
func (r *Router) Plane() *Plane { return r.plane }

// Commits counts the metadata operations committed since the start (metrics).
func (r *Router) Commits() uint64 { return r.commits }

// EachSession calls f for every logged-in connection: its client, connection and
// the time of its last request (shard clock), for the heartbeats of consumer
// group members.
func (r *Router) EachSession(f func(client wire.Uint128, conn shard.ConnID, seen *atomic.Int64)) {
	for client, rec := range r.sessions {
		f(client, rec.conn, rec.seen)
	}
}

// Close stops the password workers and the journal writer, once shard 0 has
// stopped.
func (r *Router) Close() {
	r.pw.workers.Close()
	r.journal.Close()
}

// Passwords, Journal and AbandonedChecks are for tests: the password workers,
// the journal writer, and how many logins and new passwords shard 0 answered
// unfinished as it stopped.
func (r *Router) Passwords() *passwords.Workers { return r.pw.workers }
func (r *Router) Journal() *metafiles.Writer    { return r.journal }
func (r *Router) AbandonedChecks() int          { return r.pw.abandoned }

// Log is the router's logger.
func (r *Router) Log() *slog.Logger { return r.log }

// errorCode turns an error from a package below into the code to answer with.
func errorCode(err error, fallback wire.ErrorCode) wire.ErrorCode {
	if code, ok := err.(wire.ErrorCode); ok && code != 0 {
		return code
	}
	return fallback
}

// CallerSession is the session the callers of credential write under, if this
// node registered one (tests).
func (r *Router) CallerSession(credential string) (client wire.Uint128, epoch uint64, ok bool) {
	cs := r.callers[credential]
	if cs == nil || cs.epoch == 0 || cs.ended {
		return wire.Uint128{}, 0, false
	}
	return cs.client, cs.epoch, true
}

// CallerSessions is the number of credentials holding (or registering) a session
// (tests).
func (r *Router) CallerSessions() int { return len(r.callers) }

// RevokeTokens has the plane revoke access tokens on every replica
// (metaplane.Plane.RevokeTokens), then runs then on shard 0 with its answer.
func (r *Router) RevokeTokens(tokens []metadata.Revocation, then func(err error)) {
	r.plane.RevokeTokens(tokens, r.shard.NowMicros(), then)
}
