package partition

import (
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// On the primary a prepare's body is its client's request buffer, stamped in place
// (propose.go): the journal keeps no copy of it. An Outbox copies every frame it is
// given (m is valid only during SendReplica), so each prepare went through a copy
// per backup it was sent to, on the core its client and its backups share
// (BenchmarkPinnedProduce). A PrepareOutbox is told whose request buffer the body
// lies in, and may send it from there: the buffer is the caller's of Store.Send,
// which keeps it until every send of it is done, past SendDone if need be.

// PrepareOutbox is an Outbox that can send a prepare from the request buffer its
// body lies in.
type PrepareOutbox interface {
	Outbox
	// SendPrepareOf sends m, a Prepare whose body is the batch of the send that
	// Store.Send admitted with done and token (its req.Batch, in the caller's
	// buffer), as SendReplica does. The Outbox may send the body from that
	// buffer without a copy if the buffer's owner (the caller of Store.Send)
	// keeps it unchanged until the send is done, which may be after SendDone;
	// m's header is valid only during the call.
	SendPrepareOf(k Key, m *vsr.Message, done SendCompletion, token uint64)
}

// sendOf names the send whose request buffer m's body is: a Prepare of a batch
// this replica proposed, still in its journal, not acknowledged.
func (p *Partition) sendOf(m *vsr.Message) (SendCompletion, uint64, bool) {
	if m.Header.Command != wire.CommandPrepare || len(m.Body) == 0 {
		return nil, 0, false
	}
	ph := m.Header.Prepare()
	e := p.journal.at(ph.Op)
	if e == nil || !e.present || e.done == nil || e.copied || e.header.Checksum != ph.Checksum ||
		len(e.body) != len(m.Body) || &e.body[0] != &m.Body[0] {
		return nil, 0, false
	}
	return e.done, e.token, true
}
