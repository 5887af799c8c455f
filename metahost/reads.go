package metahost

import (
	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The non-replicated reads shard 0 serves from the metadata state and its session
// registry; the node's own (stats, snapshot) through the Shard0 seam.

func (r *Router) read(j *request.Job) {
	hdr := j.Frame.Header
	state := r.plane.State()
	var err error
	switch hdr.NonReplicatedCode {
	case wire.CodeGetStats:
		if !state.CanReadServers(j.UserID) {
			err = wire.ErrUnauthorized
			break
		}
		j.Out.Reply = r.shard.AppendNodeStats(j.Out.Reply[:0], state.Counts(), len(r.conns))
	case wire.CodeGetSnapshot:
		if !state.CanReadServers(j.UserID) {
			err = wire.ErrUnauthorized
			break
		}
		j.Out.Reply, err = r.shard.AppendSnapshotArchive(j.Out.Reply[:0], j.Frame.Body)
	case wire.CodeGetMe:
		rec := r.conns[j.Conn]
		j.Out.Reply = state.AppendClientDetails(j.Out.Reply[:0], r.clientHeader(rec, j.UserID), hdr.Client)
	case wire.CodeGetClient:
		if !state.CanReadServers(j.UserID) {
			err = wire.ErrUnauthorized
			break
		}
		j.Out.Reply = j.Out.Reply[:0]
		var req wire.GetClient
		if req.Decode(j.Frame.Body) != nil {
			// An undecodable body answers like an unknown client (as GET_CLIENT is
			// answered in apache/iggy core/server/src/dispatch.rs).
			break
		}
		for _, rec := range r.conns {
			if rec.id == req.ClientID {
				j.Out.Reply = state.AppendClientDetails(j.Out.Reply, r.clientHeader(rec, rec.userID), rec.client)
				break
			}
		}
	case wire.CodeGetClients:
		if !state.CanReadServers(j.UserID) {
			err = wire.ErrUnauthorized
			break
		}
		j.Out.Reply = j.Out.Reply[:0]
		for _, rec := range r.conns {
			h := r.clientHeader(rec, rec.userID)
			if rec.userID != wire.ClientUserIDNone {
				h.ConsumerGroupsCount = state.ClientGroupsCount(rec.client)
			}
			j.Out.Reply = h.Append(j.Out.Reply)
		}
	default:
		var handled bool
		j.Out.Reply, handled, err = state.Read(j.Out.Reply[:0], hdr.NonReplicatedCode, j.UserID, hdr.Client, j.Frame.Body, r.stats)
		if !handled {
			err = wire.ErrInvalidCommand
		}
	}
	if err != nil {
		j.Out.Status = errorCode(err, wire.ErrInvalidCommand)
	}
	r.shard.Reply(j)
}

// clientHeader describes a connection (ClientResponse, apache/iggy
// core/binary_protocol/src/responses/clients/client_response.rs): the client id shard
// 0 gave it when its shard adopted it, and its peer address.
func (r *Router) clientHeader(rec *sessionRecord, userID uint32) wire.ClientHeader {
	h := wire.ClientHeader{UserID: userID, Transport: wire.ClientTransportTCP}
	if rec != nil {
		h.ClientID = rec.id
		h.Address = rec.address
	}
	return h
}
