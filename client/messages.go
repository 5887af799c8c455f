package client

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Message is one message to send. The slices are read during the call and not kept.
type Message struct {
	// ID is the message id; a zero id is replaced by a random UUID v4, as the Go
	// SDK does.
	ID wire.Uint128
	// Payload must not be empty.
	Payload []byte
	// UserHeaders is a raw user-headers block (build one with wire.AppendTLV), nil
	// for none.
	UserHeaders []byte
	// TimestampMicros is the producer time in microseconds since the Unix epoch;
	// zero means the time of the send call.
	TimestampMicros uint64
}

// SendMessages sends messages as one batch (SEND_MESSAGES, code 101) to the topic's
// partition that partitioning names. The partitioning goes to the server as given:
// Balanced and MessagesKey are resolved by the server; a Producer resolves them on the
// client like the Go SDK. The batch is built in the client's request buffer with
// every checksum, and the reply is decoded in place, so a warm client sends without
// allocating. The confirmations are a view valid until the next call.
func (c *Client) SendMessages(ctx context.Context, stream, topic wire.Identifier, partitioning wire.Partitioning, messages []Message) (wire.SendConfirmations, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sendLocked(ctx, stream, topic, partitioning, messages)
}

func (c *Client) sendLocked(ctx context.Context, stream, topic wire.Identifier, partitioning wire.Partitioning, messages []Message) (wire.SendConfirmations, error) {
	if len(messages) == 0 || uint64(len(messages)) > uint64(^uint32(0)) {
		return wire.SendConfirmations{}, wire.ErrInvalidMessagesCount
	}
	frame, err := appendSendMessages(c.frame(), &c.batch, c.rng, stream, topic, partitioning, messages)
	c.keep(frame)
	if err != nil {
		return wire.SendConfirmations{}, err
	}
	return c.sendFrame(ctx, frame)
}

// appendSendMessages appends a SendMessages body (routing metadata, then the batch
// with every checksum) to frame, building the batch with bb. Zero ids are drawn from
// rng, zero timestamps are now. The caller has checked the message count.
func appendSendMessages(frame []byte, bb *wire.BatchBuilder, rng *rand.ChaCha8, stream, topic wire.Identifier,
	partitioning wire.Partitioning, messages []Message) ([]byte, error) {
	meta := wire.SendMessages{StreamID: stream, TopicID: topic, Partitioning: partitioning, MessagesCount: uint32(len(messages))}
	body, err := meta.AppendMetadata(frame)
	if err != nil {
		return frame, err
	}
	now := uint64(time.Now().UnixMicro())
	bb.Reset(body)
	for i := range messages {
		m := &messages[i]
		if len(m.Payload) == 0 {
			return body, wire.ErrInvalidMessagePayloadLength
		}
		id := m.ID
		if id.IsZero() {
			id = randomUUID(rng)
		}
		at := m.TimestampMicros
		if at == 0 {
			at = now
		}
		if err := bb.Append(id, at, m.Payload, m.UserHeaders); err != nil {
			return body, err
		}
	}
	return bb.Finish()
}

// SendBatch sends a batch built elsewhere (wire.BatchBuilder), copying it behind the
// routing metadata. Its message count comes from its header.
func (c *Client) SendBatch(ctx context.Context, stream, topic wire.Identifier, partitioning wire.Partitioning, batch []byte) (wire.SendConfirmations, error) {
	header, err := wire.ViewBatchHeader(batch)
	if err != nil {
		return wire.SendConfirmations{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	req := wire.SendMessages{StreamID: stream, TopicID: topic, Partitioning: partitioning,
		MessagesCount: header.MessageCount(), Batch: batch}
	frame, err := req.Append(c.frame())
	c.keep(frame)
	if err != nil {
		return wire.SendConfirmations{}, err
	}
	return c.sendFrame(ctx, frame)
}

func (c *Client) sendFrame(ctx context.Context, frame []byte) (wire.SendConfirmations, error) {
	var confirmations wire.SendConfirmations
	payload, err := c.do(ctx, frame, wire.OperationSendMessages, wire.CodeSendMessages)
	if err != nil {
		return confirmations, err
	}
	err = confirmations.Decode(payload)
	return confirmations, err
}

// PollMessages polls (POLL_MESSAGES, code 100) and returns the reply as a view into
// the client's reply buffer, valid until the next call on the Client. Walk it without
// allocating:
//
//	for it := polled.Messages(); it.Next(); {
//		m := it.Message()
//		... m.Offset, m.Payload() ...
//	}
func (c *Client) PollMessages(ctx context.Context, req *wire.PollMessages) (wire.PolledMessages, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pollLocked(ctx, req)
}

func (c *Client) pollLocked(ctx context.Context, req *wire.PollMessages) (wire.PolledMessages, error) {
	frame, err := req.Append(c.frame())
	if err != nil {
		return wire.PolledMessages{}, err
	}
	payload, err := c.do(ctx, frame, wire.OperationNonReplicated, wire.CodePollMessages)
	if err != nil {
		return wire.PolledMessages{}, err
	}
	if err := c.polled.Decode(payload); err != nil {
		return wire.PolledMessages{}, err
	}
	return c.polled, nil
}

// PollMessagesCopy polls like PollMessages and copies the batch records into dst
// (reusing its capacity: pass the previous result's Records to recycle it), so the
// result stays valid after later calls.
func (c *Client) PollMessagesCopy(ctx context.Context, req *wire.PollMessages, dst []byte) (wire.PolledMessages, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	polled, err := c.pollLocked(ctx, req)
	if err != nil {
		return polled, err
	}
	polled.Records = append(dst[:0], polled.Records...)
	return polled, nil
}
