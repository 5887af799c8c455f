package metahost

import (
	"github.com/iggy-shard/iggy-shard/metaview"
	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// What the router does in a cluster beyond a single node's work.

// sendReplica sends one of the metadata core's messages. A frame the runtime
// drops (no connection, a full queue) is retransmitted by the core; any other
// refusal is a frame the core should not have made.
func (r *Router) sendReplica(msg *vsr.Message) {
	err := r.shard.SendMetaReplica(msg.To, msg.Header.Bytes()[:], msg.Body)
	switch err {
	case nil, shard.ErrReplicaPeerDown, shard.ErrReplicaQueueFull, shard.ErrReplicaBuffersExhausted:
	default:
		r.log.Error("metadata replica frame not sent", "to", msg.To, "command", msg.Header.Command.String(), "err", err)
	}
}

// publishLeader tells every shard who leads the metadata group now.
func (r *Router) publishLeader() { r.shard.PublishRole(r.plane.Core()) }

// mayLag reports whether a login refused here may be refused only because this
// backup has not applied yet what the primary acknowledged (a user or a token just
// created, a password just changed): it is then decided again once the backup
// heard from its primary (awaitPrimary), once.
func (r *Router) mayLag(j *request.Job, reason wire.EvictionReason) bool {
	p := r.plane
	return p.Clustered && !j.Login.HeardPrimary && (reason == wire.EvictionInvalidCredentials || reason == wire.EvictionInvalidToken) &&
		p.Core().Status() == vsr.StatusNormal && !p.Core().IsPrimary()
}

// awaitPrimary holds a refused login (and the connection's later work) until
// this backup applied what its primary had committed when a read barrier reached
// it (metaplane's ReadBarrier), then decides it again: a user the cluster
// acknowledged before the login came is never refused for a lag. A login refused
// again is refused; a wrong password at a backup costs that wait (a round trip,
// two commit broadcast intervals at most) and one more password check. A backup
// that did not catch up within the wait (further behind than it repairs in two
// commit broadcast intervals, or its primary gone) cannot decide: it answers 58,
// which the SDKs retry, following the leader. Deciding again there refused a token
// the cluster had acknowledged (53, an eviction the SDKs give up on), as
// TestClusterLaggingFollowerDoesNotRefuseAnAcknowledgedToken showed.
func (r *Router) awaitPrimary(j *request.Job) {
	j.Login.HeardPrimary = true
	decide := func(caughtUp bool) {
		if !caughtUp {
			j.Out.Status = wire.ErrTransientNotAccepted
			r.shard.Reply(j)
			return
		}
		r.login(j)
	}
	if j.Call != nil {
		r.plane.ReadBarrier(decide)
		return
	}
	rec := r.record(j.Conn)
	rec.busy = true
	r.plane.ReadBarrier(func(caughtUp bool) {
		rec.busy = false
		decide(caughtUp)
		if !rec.busy {
			r.turnDone(rec)
		}
	})
}

// publishInstalled replaces every shard's view with the state a transfer
// installed: its metadata and the sessions of its client table.
func (r *Router) publishInstalled() {
	p := r.plane
	sessions := make(map[wire.Uint128]uint64, p.Table().Len())
	p.Table().Sessions(func(client wire.Uint128, epoch uint64) { sessions[client] = epoch })
	var ended []wire.Uint128
	for client := range r.sessions {
		if _, ok := sessions[client]; !ok {
			ended = append(ended, client)
		}
	}
	r.publish(&metaview.Entry{Replace: &metaview.Replace{Snapshot: p.State().AppendSnapshot(nil, p.Applied().Op), Sessions: sessions}, Ended: ended})
	r.callersNotIn(p.Table())
}
