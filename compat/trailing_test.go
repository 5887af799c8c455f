package compat

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Every command with its minimal valid body, the same body with 4 bytes after it (the
// Node.js SDK sends DeleteTopic as [stream][topic][u32 partitions_count]), and the
// body one byte short, checked against wire.RequestBodyRules: bytes after the last
// field are ignored or refused as the reference server treats them, and a truncated
// body gets the server's answer to a body that does not decode. The table is the
// one thing this file takes from wire/: what it checks is the bytes on the wire.
//
// A case tells a decoded body from an undecodable one by the answer: most commands
// answer an undecodable body with code 3; the partition writes with 20 (SendMessages
// with 3 or 20); PollMessages with an empty poll of partition 0; GetConsumerOffset,
// GetClient and SyncConsumerGroup with an empty body (the reference's handlers in
// apache/iggy core/server/src/dispatch.rs). The valid bodies aim at objects that exist,
// so that their answers differ from those.

// trailingBytes is what the test appends.
var trailingBytes = []byte{0, 0, 0, 0}

// knownTrailingDivergences are the commands the server does not yet answer as the
// table says, with where the fix lies. The test requires them to still diverge, so
// that a fix removes its row here.
var knownTrailingDivergences = map[wire.CommandCode]string{}

type bodyCase struct {
	op   uint8
	body []byte
	// decoded and undecodable classify a reply; nil means by code: 3 is undecodable,
	// anything else decoded.
	decoded, undecodable func(c *rawConn, r reply) bool
	// before runs before each of the three requests.
	before func()
	// fresh runs the case on connections of its own (logins and logout end a session).
	fresh bool
}

func byCode(c *rawConn, r reply) uint32 {
	c.t.Helper()
	_, code := c.outcome(r)
	return code
}

func TestRequestBodiesAsTheReferenceDecodesThem(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("trailing")
	topic, _ := c.createTopic(streamID, "t", 1)
	st := ids(streamID, topic.id)
	c.send(streamID, topic.id, 0, []byte("m0"), []byte("m1"))
	target := offsetTarget(consumer(1, 7), ids(streamID), ids(topic.id), 0, true)
	c.ok("StoreConsumerOffset", opStoreConsumerOffset, 121, storeOffsetBody(target, 1, 1))
	c.ok("CreateConsumerGroup", opCreateConsumerGroup, 602, appendName(clone(st), "g"))
	group := stringID(clone(st), "g")
	c.ok("JoinConsumerGroup", opJoinConsumerGroup, 604, group)
	token := func() string {
		d := decoder{t: t, what: "CreatePersonalAccessToken", b: c.ok("CreatePersonalAccessToken", opCreatePAT, 42, patBody("trailing-login", 0))}
		return d.name()
	}()
	me := c.ok("GetMe", opNonReplicated, 20, nil)
	clientID := binary.LittleEndian.Uint32(me)

	codeIs := func(want ...uint32) func(c *rawConn, r reply) bool {
		return func(c *rawConn, r reply) bool {
			got := byCode(c, r)
			for _, w := range want {
				if got == w {
					return true
				}
			}
			return false
		}
	}
	codeIsNot := func(not ...uint32) func(c *rawConn, r reply) bool {
		is := codeIs(not...)
		return func(c *rawConn, r reply) bool { return !is(c, r) }
	}
	emptyOK := func(c *rawConn, r reply) bool { return r.status == 0 && len(r.body) == 0 }
	nonEmptyOK := func(c *rawConn, r reply) bool { return r.status == 0 && len(r.body) > 0 }
	loggedIn := func(c *rawConn, r reply) bool {
		return r.command == commandReply && r.status == 0 && r.operation == opRegister && len(r.body) > 0
	}
	loginRefused := func(c *rawConn, r reply) bool { return !loggedIn(c, r) }
	read := func(body []byte) bodyCase { return bodyCase{op: opNonReplicated, body: body} }
	write := func(op uint8, body []byte) bodyCase { return bodyCase{op: op, body: body} }
	u32 := func(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(clone(b), v) }
	now := uint64(time.Now().UnixMicro())

	cases := map[wire.CommandCode]bodyCase{
		1:  read(nil),
		10: read(nil),
		11: read([]byte{1, 0}), // stored, no sections: an empty archive
		12: read(nil),
		13: read([]byte{1}),
		20: read(nil),
		21: {op: opNonReplicated, body: u32(nil, clientID), decoded: nonEmptyOK, undecodable: emptyOK},
		22: read(nil),
		31: read(ids(0)),
		32: read(nil),
		33: write(141, createUserBody("trailing-user", "secret", userActive, nil)),
		34: write(143, ids(999)),
		35: write(142, append(ids(999), 0, 0)), // no username, no status, no options
		36: write(145, append(ids(999), 0)),
		37: write(144, appendName(appendName(ids(999), "old"), "new-secret")),
		39: {op: opLogout, fresh: true, decoded: codeIs(0), undecodable: codeIsNot(0)},
		40: {op: opRegister, body: loginBody("iggy", "iggy"), fresh: true, decoded: loggedIn, undecodable: loginRefused},
		41: read(nil),
		42: write(opCreatePAT, patBody("trailing", 0)),
		43: write(147, appendName(nil, "no-such-token")),
		45: {op: opRegister, body: patLoginBody(token), fresh: true, decoded: loggedIn, undecodable: loginRefused},
		100: {op: opNonReplicated, body: pollBody(consumer(1, 1), ids(streamID), ids(topic.id), 0, true, strategyFirst, 0, 10, false),
			decoded: func(c *rawConn, r reply) bool {
				return r.status == 0 && len(r.body) >= 16 && binary.LittleEndian.Uint32(r.body[12:]) > 0
			},
			undecodable: func(c *rawConn, r reply) bool {
				return r.status == 0 && len(r.body) == 16 && binary.LittleEndian.Uint32(r.body) == 0 && binary.LittleEndian.Uint32(r.body[12:]) == 0
			}},
		101: {op: opSendMessages, body: sendBody(ids(streamID), ids(topic.id), 0, now, []byte("payload")),
			decoded: codeIs(0), undecodable: codeIs(3, 20)},
		102: {op: opNonReplicated, body: target, decoded: codeIs(5), undecodable: codeIs(5)}, // never decoded: always 5
		120: {op: opNonReplicated, body: target, decoded: nonEmptyOK, undecodable: emptyOK},
		121: {op: opStoreConsumerOffset, body: storeOffsetBody(target, 1, 1), decoded: codeIsNot(3, 20), undecodable: codeIs(20)},
		122: {op: opDeleteConsumerOffset, body: deleteOffsetBody(target, 1), decoded: codeIsNot(3, 20), undecodable: codeIs(20)},
		200: read(ids(streamID)),
		201: read(nil),
		202: write(opCreateStream, appendName(nil, "trailing-2")),
		203: write(opDeleteStream, ids(999)),
		204: write(opUpdateStream, appendName(ids(streamID), "trailing-renamed")),
		205: write(131, ids(999)),
		300: read(st),
		301: read(ids(streamID)),
		302: write(opCreateTopic, createTopicBody(streamID, "t2", 1, nil)),
		303: write(opDeleteTopic, ids(streamID, 999)),
		304: write(opUpdateTopic, appendName(clone(st), "t")),
		305: write(135, ids(streamID, 999)),
		402: write(opCreatePartitions, u32(st, 1)),
		403: write(opDeletePartitions, u32(st, 1)),
		503: write(opDeleteSegments, u32(u32(st, 0), 1)),
		600: read(group),
		601: read(st),
		602: write(opCreateConsumerGroup, appendName(clone(st), "g2")),
		603: write(opDeleteConsumerGroup, append(clone(st), numericID(nil, 999)...)),
		604: write(opJoinConsumerGroup, group),
		605: write(opLeaveConsumerGroup, group),
		606: {op: opNonReplicated, body: group, decoded: nonEmptyOK, undecodable: emptyOK,
			before: func() { c.do(opJoinConsumerGroup, 604, group) }},
	}

	for _, rule := range wire.RequestBodyRules() {
		tc, ok := cases[rule.Code]
		if !ok {
			t.Errorf("%v (%d): no case", rule.Code, rule.Code)
			continue
		}
		conn := c
		do := func(body []byte) (*rawConn, reply) {
			if tc.before != nil {
				tc.before()
			}
			if tc.fresh {
				conn = dial(t, addr)
				if tc.op != opRegister {
					conn.login("iggy", "iggy")
				}
			}
			return conn, conn.do(tc.op, uint32(rule.Code), body)
		}
		decoded, undecodable := tc.decoded, tc.undecodable
		if decoded == nil {
			decoded, undecodable = codeIsNot(3), codeIs(3)
		}

		if rc, r := do(tc.body); !decoded(rc, r) {
			t.Errorf("%v: the minimal body is answered %v", rule.Code, r)
			continue
		}
		rc, r := do(append(clone(tc.body), trailingBytes...))
		followed := rule.Trailing == wire.TrailingIgnored && decoded(rc, r) ||
			rule.Trailing == wire.TrailingRefused && undecodable(rc, r)
		if where, known := knownTrailingDivergences[rule.Code]; known {
			if followed {
				t.Errorf("%v now treats 4 trailing bytes as the reference does: remove it from knownTrailingDivergences", rule.Code)
			}
			t.Logf("%v: 4 trailing bytes %s by the reference, answered %v here (%s)", rule.Code, rule.Trailing, r, where)
		} else if !followed {
			t.Errorf("%v: with 4 trailing bytes (%s by the reference, %s): answered %v", rule.Code, rule.Trailing, rule.Reference, r)
		}
		if len(tc.body) == 0 {
			continue // nothing to truncate
		}
		if rc, r := do(tc.body[:len(tc.body)-1]); !undecodable(rc, r) {
			t.Errorf("%v: one byte short: answered %v, want the answer to an undecodable body", rule.Code, r)
		}
	}
}

// clone copies b, so that appending to a shared prefix never writes into another body.
func clone(b []byte) []byte { return append([]byte(nil), b...) }
