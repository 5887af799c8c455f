package client

import (
	"bytes"
	"context"

	"github.com/iggy-shard/iggy-shard/wire"
)

// ID names a stream, topic, user or consumer group by its numeric id (0-based).
func ID(id uint32) wire.Identifier { return wire.NumericIdentifier(id) }

// NameID names a stream, topic, user or consumer group by its name.
func NameID(name string) wire.Identifier { return wire.StringIdentifier([]byte(name)) }

// SingleConsumer is a consumer polling and storing offsets on its own.
func SingleConsumer(id wire.Identifier) wire.Consumer {
	return wire.Consumer{Kind: wire.ConsumerSingle, ID: id}
}

// GroupConsumer is a consumer group polling and storing offsets together.
func GroupConsumer(group wire.Identifier) wire.Consumer {
	return wire.Consumer{Kind: wire.ConsumerGroup, ID: group}
}

// requestBody is any wire request body.
type requestBody interface {
	Append(b []byte) ([]byte, error)
}

// call encodes body (nil for an empty one) as the request of code and returns a copy
// of the reply payload that the caller owns. It is the path of every command but the
// hot ones (SendMessages, PollMessages), which reuse the client's buffers instead.
func (c *Client) call(ctx context.Context, code wire.CommandCode, body requestBody) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.callLocked(ctx, code, body)
}

// callLocked is call for a caller that holds c.mu.
func (c *Client) callLocked(ctx context.Context, code wire.CommandCode, body requestBody) ([]byte, error) {
	op, ok := code.Operation()
	if !ok || op == wire.OperationReserved {
		panic("client: call with a command code outside the registry: " + code.String())
	}
	frame := c.frame()
	if body != nil {
		var err error
		if frame, err = body.Append(frame); err != nil {
			return nil, err
		}
	}
	payload, err := c.do(ctx, frame, op, code)
	if err != nil {
		return nil, err
	}
	switch code {
	case wire.CodeCreatePartitions, wire.CodeDeletePartitions, wire.CodeDeleteTopic, wire.CodeDeleteStream:
		c.topologyGen++
	}
	return bytes.Clone(payload), nil
}

// SendRaw sends body as the request of code, with the operation the registry gives
// it, and returns a copy of the reply payload (the result section stripped), like the
// Go SDK's SendBinaryRequest. Codes outside the registry go as operation-2 reads. The
// session codes 38, 39, 40, 44 and 45 are refused locally with wire.ErrInvalidCommand:
// use Login and Logout.
func (c *Client) SendRaw(ctx context.Context, code wire.CommandCode, body []byte) ([]byte, error) {
	switch code {
	case wire.CodeLoginUser, wire.CodeLogoutUser, wire.CodeLoginRegister,
		wire.CodeLoginWithPersonalAccessToken, wire.CodeLoginRegisterWithPAT:
		return nil, wire.ErrInvalidCommand
	}
	op, ok := code.Operation()
	if !ok {
		op = wire.OperationNonReplicated
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	frame := append(c.frame(), body...)
	payload, err := c.do(ctx, frame, op, code)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(payload), nil
}
