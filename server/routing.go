package server

import (
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Partition operations are resolved on the connection's shard, from its view of the
// committed metadata (package metaview): names, permissions and the partition, then straight
// to the partition's owner shard (no hop when that is this shard).
//
// Balanced sends go round-robin over a topic's partitions per shard: each shard
// keeps a cursor of its own per topic (a shared one would put a cache line written
// by every shard on every send). With one shard, or the producers of a topic on one
// shard, that is the reference's round-robin exactly; with producers spread over
// shards each shard cycles through the partitions on its own, so every partition
// still gets an equal share, interleaved differently.

// routeSend resolves a SendMessages batch's partition and hands it to the owner.
func (h *handler) routeSend(j *job) {
	if err := j.Send.Batch.Decode(j.Frame.Body); err != nil {
		// A namespace that does not decode is 20, as the reference answers it (dispatch_partition_request in
		// apache/iggy core/server/src/dispatch.rs); a batch the decoder
		// refuses keeps the decoder's code (checksums, lengths).
		j.Out.Status = errorCode(err, wire.ErrResourceNotFound)
		if j.Out.Status == wire.ErrInvalidCommand || j.Out.Status == wire.ErrInvalidFormat {
			j.Out.Status = wire.ErrResourceNotFound
		}
		h.reply(j)
		return
	}
	state := h.view.State
	s, t, count, err := state.ResolveTopic(j.Send.Batch.StreamID, j.Send.Batch.TopicID)
	if err != nil {
		h.refuse(j, wire.ErrResourceNotFound)
		return
	}
	if !state.CanSend(j.UserID, s, t) {
		h.refuse(j, wire.ErrUnauthorized)
		return
	}
	cursor := h.balanced[[2]uint32{s, t}]
	if cursor == nil && j.Send.Batch.Partitioning.Kind == wire.PartitioningBalanced {
		cursor = new(partition.RoundRobin)
		h.balanced[[2]uint32{s, t}] = cursor
	}
	p, err := partition.ResolvePartition(j.Send.Batch.Partitioning, count, cursor)
	if err != nil {
		h.refuse(j, errorCode(err, wire.ErrResourceNotFound))
		return
	}
	j.Send.Key = partition.Key{StreamID: s, TopicID: t, PartitionID: p}
	h.toOwner(j)
}

// toOwner hands a resolved partition operation to the partition's owner: served
// here when this shard owns it, posted there otherwise.
func (h *handler) toOwner(j *job) {
	owner := h.srv.ownerOf(j.Partition())
	if owner == h.index {
		h.owned.Serve(j)
		return
	}
	h.post(owner, shard.Message{Conn: j.Conn, Kind: msgToOwner, Payload: j})
}

// routePoll resolves a poll (handle_poll_messages in apache/iggy
// core/server/src/dispatch.rs): typed statuses for
// what does not resolve, the empty 16-byte reply for the rest.
func (h *handler) routePoll(j *job) {
	var req wire.PollMessages
	if err := req.Decode(j.Frame.Body); err != nil {
		j.Out.Reply = partition.AppendEmptyPollReply(j.Out.Reply[:0], 0, 0)
		h.reply(j)
		return
	}
	state := h.view.State
	consumer := partition.Consumer{Kind: req.Consumer.Kind}
	var partitionID uint32
	if req.Consumer.Kind == wire.ConsumerGroup {
		if !req.Partition.Set {
			j.Out.Reply = partition.AppendEmptyPollReply(j.Out.Reply[:0], 0, 0)
			h.reply(j)
			return
		}
		// The ownership fence runs before resolution (the reference's order).
		target := wire.GroupTarget{StreamID: req.StreamID, TopicID: req.TopicID, GroupID: req.Consumer.ID}
		_, owned, ok := state.Assignment(j.Frame.Header.Client, &target)
		groupID, found := h.groupID(req.StreamID, req.TopicID, req.Consumer.ID)
		if !ok || !found || !containsU32(owned, req.Partition.ID) {
			j.Out.Reply = partition.AppendEmptyPollReply(j.Out.Reply[:0], wire.PollPartitionResync, 0)
			h.reply(j)
			return
		}
		consumer.ID = groupID
		partitionID = req.Partition.ID
	} else {
		consumer.ID = plainConsumerID(req.Consumer.ID)
		if req.Partition.Set {
			partitionID = req.Partition.ID
		}
	}
	s, t, count, err := state.ResolveTopic(req.StreamID, req.TopicID)
	if err != nil {
		h.refuse(j, errorCode(err, wire.ErrTopicIdNotFound))
		return
	}
	if partitionID >= count {
		h.refuse(j, wire.ErrPartitionNotFound)
		return
	}
	if !state.CanPoll(j.UserID, s, t) {
		h.refuse(j, wire.ErrUnauthorized)
		return
	}
	j.Poll.Key = partition.Key{StreamID: s, TopicID: t, PartitionID: partitionID}
	j.Poll.Req = partition.PollRequest{Consumer: consumer, Strategy: req.Strategy, Count: req.Count, AutoCommit: req.AutoCommit,
		MaxBytes: pollReadBytesMax}
	h.toOwner(j)
}

// pollReadBytesMax bounds the stored bytes one poll reads (at least one batch is
// read whatever its size), so a reply stays well inside the 64 MiB frame every SDK
// accepts.
const pollReadBytesMax = 32 << 20

// routeOffset resolves GetConsumerOffset (empty body for what does not resolve)
// and Store/DeleteConsumerOffset (20 for what does not resolve).
func (h *handler) routeOffset(j *job) {
	var consumer wire.Consumer
	var streamID, topicID wire.Identifier
	var part wire.OptionalPartition
	var decodeErr error
	switch j.Kind {
	case request.KindGetOffset:
		var req wire.GetConsumerOffset
		decodeErr = req.Decode(j.Frame.Body)
		consumer, streamID, topicID, part = req.Consumer, req.StreamID, req.TopicID, req.Partition
	case request.KindStoreOffset:
		var req wire.StoreConsumerOffset
		decodeErr = req.Decode(j.Frame.Body)
		consumer, streamID, topicID, part = req.Consumer, req.StreamID, req.TopicID, req.Partition
		j.Offset.Value, j.Offset.Ack = req.Offset, req.Ack
	default:
		var req wire.DeleteConsumerOffset
		decodeErr = req.Decode(j.Frame.Body)
		consumer, streamID, topicID, part = req.Consumer, req.StreamID, req.TopicID, req.Partition
		j.Offset.Ack = req.Ack
	}
	unresolved := func() {
		if j.Kind == request.KindGetOffset {
			j.Out.Reply = j.Out.Reply[:0]
		} else {
			j.Out.Status = wire.ErrResourceNotFound
		}
		h.reply(j)
	}
	if decodeErr != nil {
		unresolved()
		return
	}
	state := h.view.State
	s, t, count, err := state.ResolveTopic(streamID, topicID)
	if err != nil {
		unresolved()
		return
	}
	c := partition.Consumer{Kind: consumer.Kind}
	partitionID := uint32(0)
	if part.Set {
		partitionID = part.ID
	}
	if consumer.Kind == wire.ConsumerGroup {
		groupID, found := h.groupID(streamID, topicID, consumer.ID)
		if !found {
			unresolved()
			return
		}
		c.ID = groupID
		target := wire.GroupTarget{StreamID: streamID, TopicID: topicID, GroupID: consumer.ID}
		_, owned, member := state.Assignment(j.Frame.Header.Client, &target)
		if !part.Set {
			if !member || len(owned) == 0 {
				unresolved()
				return
			}
			partitionID = owned[0]
		} else if j.Kind != request.KindGetOffset && (!member || !containsU32(owned, partitionID)) {
			unresolved()
			return
		}
	} else {
		c.ID = plainConsumerID(consumer.ID)
	}
	if partitionID >= count {
		if j.Kind == request.KindGetOffset {
			h.refuse(j, wire.ErrPartitionNotFound)
			return
		}
		unresolved()
		return
	}
	if !state.CanPoll(j.UserID, s, t) {
		h.refuse(j, wire.ErrUnauthorized)
		return
	}
	j.Offset.Key = partition.Key{StreamID: s, TopicID: t, PartitionID: partitionID}
	j.Offset.Consumer = c
	h.toOwner(j)
}

// plainConsumerID is the id a plain consumer's offsets are kept under: its
// number, or for a named one the XXH32 (seed 0) of its name, as the reference
// resolves it (apache/iggy core/server/src/dispatch.rs, polling_consumer_from_wire,
// with calculate_32 of core/common/src/utils/hash.rs), so that a named consumer
// finds again by name the offsets it stored, at offsets/consumers/{id} as the
// reference keeps them. Two names, or a name and a number, that hash alike share
// their offsets there too.
func plainConsumerID(id wire.Identifier) uint32 {
	if id.Kind == wire.IdentifierString {
		return wire.XXH32(id.String, 0)
	}
	return id.Numeric
}

// groupID resolves a consumer group identifier within a topic.
func (h *handler) groupID(streamID, topicID, groupID wire.Identifier) (uint32, bool) {
	s, t, _, err := h.view.State.ResolveTopic(streamID, topicID)
	if err != nil {
		return 0, false
	}
	topic := h.view.State.Stream(s).Topic(t)
	if groupID.Kind == wire.IdentifierNumeric {
		return groupID.Numeric, topic.Group(groupID.Numeric) != nil
	}
	found := 0
	// Group ids only grow within a topic; stop once every group was seen.
	for id := uint32(0); found < topic.GroupsCount() && id < 1<<24; id++ {
		g := topic.Group(id)
		if g == nil {
			continue
		}
		found++
		if g.Name == string(groupID.String) {
			return id, true
		}
	}
	return 0, false
}

func containsU32(v []uint32, x uint32) bool {
	for _, e := range v {
		if e == x {
			return true
		}
	}
	return false
}

// refuse answers a partition operation with a status, before it reaches its owner.
func (h *handler) refuse(j *job, code wire.ErrorCode) {
	j.Out.Status = code
	h.reply(j)
}
