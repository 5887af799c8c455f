package main

import (
	"encoding/binary"
	"unicode/utf8"

	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// sessionlessHandler is the server before any metadata, partition or user store exists:
// it answers PING and refuses everything else exactly as the protocol refuses a client
// that has not logged in (errors.md §2, responses.md §2.2):
//
//	PING (operation 2, code 1)          status-0 reply, empty body
//	any other read (operation 2)        status 40 Unauthenticated, empty body
//	Register (operation 1)              Eviction: 15 MalformedLogin when the body does not
//	                                    start with a ClientVersionInfo, else
//	                                    9 InvalidCredentials (there are no users)
//	Logout and replicated operations    Eviction 1 NoSession (no session is bound)
//
// Header faults (unknown codes, legacy login codes 38/44, bad sizes) never reach it:
// the runtime answers them.
type sessionlessHandler struct{}

func (sessionlessHandler) ServeRequest(c *shard.Conn, req *shard.Request) {
	h := req.Header
	switch h.Operation {
	case wire.OperationNonReplicated:
		if h.NonReplicatedCode == wire.CodePing {
			c.ReplyStatus(h, 0)
		} else {
			c.ReplyStatus(h, wire.ErrUnauthenticated)
		}
	case wire.OperationRegister:
		if !hasClientVersionInfo(req.Body) {
			c.Evict(h.Client, wire.EvictionMalformedLogin)
		} else {
			c.Evict(h.Client, wire.EvictionInvalidCredentials)
		}
	default:
		c.Evict(h.Client, wire.EvictionNoSession)
	}
}

func (sessionlessHandler) ServeMessage(*shard.Shard, shard.Message) {}
func (sessionlessHandler) ConnClosed(*shard.Conn)                   {}

// hasClientVersionInfo reports whether a login body starts with the ClientVersionInfo
// prefix: [protocol_version u32][sdk_name_len u8][sdk_name][sdk_version_len u8]
// [sdk_version], both strings 1..255 bytes of UTF-8.
func hasClientVersionInfo(body []byte) bool {
	if len(body) < 4 {
		return false
	}
	_ = binary.LittleEndian.Uint32(body) // the version; no window is enforced without users
	rest := body[4:]
	for range 2 {
		if len(rest) < 1 {
			return false
		}
		n := int(rest[0])
		if n == 0 || len(rest) < 1+n || !utf8.Valid(rest[1:1+n]) {
			return false
		}
		rest = rest[1+n:]
	}
	return true
}
