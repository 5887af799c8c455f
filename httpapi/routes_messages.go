package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The messages and consumer offsets routes (apache/iggy
// core/server/src/http/messages.rs, consumer_offsets.rs).

// consumerFromText is a consumer id from the query or a path: u32 text is a
// numeric id, other text a name. Over HTTP the consumer is always a single one.
func consumerFromText(s string) (wire.Consumer, error) {
	id, err := parseIdentifier(s)
	return wire.Consumer{Kind: wire.ConsumerSingle, ID: id}, err
}

// defaultConsumer is numeric consumer 1, the reference's default.
var defaultConsumer = wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericIdentifier(1)}

var pollingKinds = map[string]wire.PollingKind{
	"offset": wire.PollingOffset, "o": wire.PollingOffset, "timestamp": wire.PollingTimestamp, "t": wire.PollingTimestamp,
	"first": wire.PollingFirst, "f": wire.PollingFirst, "last": wire.PollingLast, "l": wire.PollingLast,
	"next": wire.PollingNext, "n": wire.PollingNext,
}

// pollQuery reads a poll's query (messages.rs); unknown parameters are ignored.
func (rc *reqCtx) pollQuery() (wire.PollMessages, error) {
	q := rc.r.URL.Query()
	req := wire.PollMessages{Consumer: defaultConsumer, Partition: wire.SomePartition(0),
		Strategy: wire.PollingStrategy{Kind: wire.PollingOffset}, Count: 10}
	var err error
	if q.Has("consumer_id") {
		if req.Consumer, err = consumerFromText(q.Get("consumer_id")); err != nil {
			return req, err
		}
	}
	u := func(name string, bitSize int) (uint64, bool, error) {
		if !q.Has(name) {
			return 0, false, nil
		}
		n, err := strconv.ParseUint(q.Get(name), 10, bitSize)
		if err != nil {
			return 0, false, rejectQuery(name + ": invalid digit found in string")
		}
		return n, true, nil
	}
	if n, ok, err := u("partition_id", 32); err != nil {
		return req, err
	} else if ok {
		req.Partition = wire.SomePartition(uint32(n))
	}
	if n, ok, err := u("value", 64); err != nil {
		return req, err
	} else if ok {
		req.Strategy.Value = n
	}
	if n, ok, err := u("count", 32); err != nil {
		return req, err
	} else if ok {
		req.Count = uint32(n)
	}
	if q.Has("kind") {
		k, ok := pollingKinds[q.Get("kind")]
		if !ok {
			return req, rejectQuery("kind: unknown variant `" + q.Get("kind") + "`")
		}
		req.Strategy.Kind = k
	}
	if q.Has("auto_commit") {
		if req.AutoCommit, err = strconv.ParseBool(q.Get("auto_commit")); err != nil {
			return req, rejectQuery("auto_commit: provided string was not `true` or `false`")
		}
	}
	return req, nil
}

func (a *API) pollMessages(rc *reqCtx) error {
	stream, topic, err := rc.streamTopic()
	if err != nil {
		return err
	}
	req, err := rc.pollQuery()
	if err != nil {
		return err
	}
	req.StreamID, req.TopicID = stream, topic
	reply, err := rc.partitionRead(wire.CodePollMessages, &req)
	if errors.Is(err, wire.ErrStreamIdNotFound) || errors.Is(err, wire.ErrTopicIdNotFound) {
		return errNotFound
	}
	if err != nil {
		return err
	}
	var p wire.PolledMessages
	if err := p.Decode(reply); err != nil {
		return err
	}
	writePolled(rc.w, &p, a.opts.PollBudgetBytes, !req.AutoCommit)
	// The reply is written out and p no longer read: a backend that lends its
	// replies (the server's bounded free list) takes the buffer back.
	if g, ok := a.opts.Backend.(interface{ GiveBack([]byte) }); ok {
		g.GiveBack(reply)
	}
	return nil
}

// noAckTimeout bounds a send answered before it commits (?ack=none).
const noAckTimeout = 10 * time.Second

func sendMessages(rc *reqCtx) error {
	stream, topic, err := rc.streamTopic()
	if err != nil {
		return err
	}
	noAck := false
	if q := rc.r.URL.Query(); q.Has("ack") {
		switch q.Get("ack") {
		case "replicated":
		case "none":
			noAck = true
		default:
			return rejectQuery("ack: unknown variant `" + q.Get("ack") + "`, expected `replicated` or `none`")
		}
	}
	if !isJSONContentType(rc.r.Header.Get("Content-Type")) {
		return errUnsupportedMediaType
	}
	body, err := readSendBody(rc.r, stream, topic, time.Now())
	if err != nil {
		return err
	}
	backend := rc.api.opts.Backend
	if noAck {
		// Answered once dispatched; the outcome is the server's log's to tell.
		caller, log, route := rc.caller, rc.api.log, rc.route
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), noAckTimeout)
			defer cancel()
			if _, err := backend.Do(ctx, caller, wire.CodeSendMessages, body); err != nil {
				log.Debug("http: an unacknowledged send failed", "route", route, "err", err)
			}
		}()
		rc.w.Header().Set("Iggy-Durability", "none")
		rc.w.WriteHeader(http.StatusAccepted)
		return nil
	}
	reply, err := rc.partitionWrite(wire.CodeSendMessages, body, errProduceTimeout)
	if err != nil {
		return err
	}
	var c wire.SendConfirmations
	if err := c.Decode(reply); err != nil {
		return err
	}
	out := jsonview.SendConfirmations{Confirmations: jsonview.AppendSendConfirmations(make([]jsonview.SendConfirmation, 0, c.Len()), c)}
	rc.w.Header().Set("Iggy-Durability", "replicated-memory")
	writeJSON(rc.w, http.StatusCreated, out)
	return nil
}

// buildSend encodes a SendMessages request: its routing and one batch of the
// messages, each stamped with now as its origin time.
func buildSend(stream, topic wire.Identifier, b *sendMessagesBody, now time.Time) ([]byte, error) {
	partitioning, err := b.Partitioning.wire()
	if err != nil {
		return nil, err
	}
	msgs := *b.Messages
	if len(msgs) == 0 {
		return nil, wire.ErrInvalidMessagesCount
	}
	req := wire.SendMessages{StreamID: stream, TopicID: topic, Partitioning: partitioning, MessagesCount: uint32(len(msgs))}
	body, err := req.AppendMetadata(nil)
	if err != nil {
		return nil, err
	}
	var bb wire.BatchBuilder
	bb.Reset(body)
	ts := uint64(now.UnixMicro())
	for i, m := range msgs {
		payload, err := decodeBase64(*m.Payload)
		if err != nil || len(payload) == 0 {
			return nil, rejectJSONShape("messages[" + strconv.Itoa(i) + "].payload: not non-empty standard base64")
		}
		var headers []byte
		if m.UserHeaders != nil {
			headers = m.UserHeaders.block
		}
		if err := bb.Append(m.ID.orRandom(), ts, payload, headers); err != nil {
			return nil, err
		}
	}
	return bb.Finish()
}

func getOffset(rc *reqCtx) error {
	stream, topic, err := rc.streamTopic()
	if err != nil {
		return err
	}
	req := wire.GetConsumerOffset{Consumer: defaultConsumer, StreamID: stream, TopicID: topic, Partition: wire.SomePartition(0)}
	q := rc.r.URL.Query()
	if q.Has("consumer_id") {
		if req.Consumer, err = consumerFromText(q.Get("consumer_id")); err != nil {
			return err
		}
	}
	if q.Has("partition_id") {
		p, err := rc.queryU32("partition_id")
		if err != nil {
			return err
		}
		req.Partition = wire.SomePartition(p)
	}
	reply, err := rc.partitionRead(wire.CodeGetConsumerOffset, &req)
	var code wire.ErrorCode
	if errors.As(err, &code) && statusOf(code) == http.StatusNotFound {
		return errNotFound
	}
	if err != nil {
		return err
	}
	if len(reply) == 0 {
		return errNotFound
	}
	var o wire.ConsumerOffset
	if err := o.Decode(reply); err != nil {
		return err
	}
	return rc.json(jsonview.ConsumerOffset{PartitionID: o.PartitionID, CurrentOffset: o.CurrentOffset, StoredOffset: o.StoredOffset})
}

// consumerIDJSON is consumer_id in a body: a string (as the SDK sends it) or a
// number (as the reference's examples do).
type consumerIDJSON struct {
	c wire.Consumer
}

func (c *consumerIDJSON) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) > 0 && b[0] != '"' {
		var n uint32
		if err := json.Unmarshal(b, &n); err != nil {
			return err
		}
		s = strconv.FormatUint(uint64(n), 10)
	} else if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	consumer, err := consumerFromText(s)
	if err != nil {
		return &shapeError{"consumer_id: not an id or a name of 1 to 255 bytes"}
	}
	c.c = consumer
	return nil
}

type storeOffsetBody struct {
	ConsumerID  *consumerIDJSON `json:"consumer_id"`
	PartitionID *uint32         `json:"partition_id"`
	Offset      *uint64         `json:"offset"`
}

func (b *storeOffsetBody) check() error {
	if b.Offset == nil {
		return &shapeError{"missing field `offset`"}
	}
	return nil
}

func storeOffset(rc *reqCtx) error {
	stream, topic, err := rc.streamTopic()
	if err != nil {
		return err
	}
	var b storeOffsetBody
	if err := rc.decodeJSON(&b); err != nil {
		return err
	}
	req := wire.StoreConsumerOffset{Consumer: defaultConsumer, StreamID: stream, TopicID: topic, Offset: *b.Offset, Ack: wire.AckQuorum}
	if b.ConsumerID != nil {
		req.Consumer = b.ConsumerID.c
	}
	if b.PartitionID != nil {
		req.Partition = wire.SomePartition(*b.PartitionID)
	}
	body, err := req.Append(nil)
	if err != nil {
		return err
	}
	if _, err := rc.partitionWrite(wire.CodeStoreConsumerOffset, body, errOffsetWriteTimeout); err != nil {
		return err
	}
	return rc.noContent()
}

func deleteOffset(rc *reqCtx) error {
	stream, topic, err := rc.streamTopic()
	if err != nil {
		return err
	}
	consumer, err := consumerFromText(rc.path("consumer_id"))
	if err != nil {
		return err
	}
	req := wire.DeleteConsumerOffset{Consumer: consumer, StreamID: stream, TopicID: topic, Ack: wire.AckQuorum}
	if rc.r.URL.Query().Has("partition_id") {
		p, err := rc.queryU32("partition_id")
		if err != nil {
			return err
		}
		req.Partition = wire.SomePartition(p)
	}
	body, err := req.Append(nil)
	if err != nil {
		return err
	}
	if _, err := rc.partitionWrite(wire.CodeDeleteConsumerOffset, body, errOffsetWriteTimeout); err != nil {
		return err
	}
	return rc.noContent()
}
