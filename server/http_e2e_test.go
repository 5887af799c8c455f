package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The HTTP API end to end: one scenario run over HTTP against one server and
// over TCP against another, step by step the same answers, and at the end the
// same state (read back over both transports, with the instants that must
// differ left out).

// httpSide is a client of a server's HTTP API.
type httpSide struct {
	t     testing.TB
	base  string
	token string
	http  *http.Client
}

func newHTTPSide(t testing.TB, s *Server) *httpSide {
	t.Helper()
	if s.HTTPAddr() == nil {
		t.Fatal("the server serves no HTTP API")
	}
	return &httpSide{t: t, base: "http://" + s.HTTPAddr().String(), http: &http.Client{Timeout: 20 * time.Second}}
}

// httpStatusBase marks a refusal whose body is not a JSON error (a text
// rejection): its status plus httpStatusBase, never an error id.
const httpStatusBase = 1_000_000

// call sends body (JSON unless a []byte or a string) and decodes a 2xx answer
// into out. It returns 0 for a 2xx, else the error body's id.
func (h *httpSide) call(method, path string, body, out any) uint32 {
	h.t.Helper()
	status, raw := h.raw(method, path, body)
	if status/100 == 2 {
		if out != nil && len(raw) > 0 {
			if err := json.Unmarshal(raw, out); err != nil {
				h.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
			}
		}
		return 0
	}
	var e struct {
		ID *uint32 `json:"id"`
	}
	if json.Unmarshal(raw, &e) != nil || e.ID == nil {
		return httpStatusBase + uint32(status)
	}
	return *e.ID
}

// raw sends a request and returns the status and the body.
func (h *httpSide) raw(method, path string, body any) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, h.base+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	resp, err := h.http.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return resp.StatusCode, raw
}

// login logs in as user and keeps the bearer; 0 or the error id.
func (h *httpSide) login(user, password string) uint32 {
	var id struct {
		AccessToken struct {
			Token string `json:"token"`
		} `json:"access_token"`
	}
	code := h.call("POST", "/users/login", map[string]string{"username": user, "password": password}, &id)
	if code == 0 {
		h.token = id.AccessToken.Token
	}
	return code
}

// as is a second client of the same API, logged in as user.
func (h *httpSide) as(user, password string) *httpSide {
	o := &httpSide{t: h.t, base: h.base, http: h.http}
	if code := o.login(user, password); code != 0 {
		h.t.Fatalf("HTTP login as %s: %d", user, code)
	}
	return o
}

// codeOf is the error code a binary call answered, 0 for none.
func codeOf(t testing.TB, err error) uint32 {
	t.Helper()
	var code wire.ErrorCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return uint32(code)
	}
	t.Fatalf("a binary call failed without an error code: %v", err)
	return 0
}

// scenarioStep is one step of the scenario over both transports: each returns 0
// or the error code it was answered with.
type scenarioStep struct {
	name string
	http func(h *httpSide) uint32
	tcp  func(c *client.Client) uint32
}

func le32(v uint32) string {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	return base64.StdEncoding.EncodeToString(b[:])
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// scenario is what both transports do, in order. The TCP side's logins are
// made by the driver (tcpAs), so that a step is one command.
func scenario(t testing.TB, tcpAs func(user, password string) *client.Client, tcpPAT func(token string) *client.Client) []scenarioStep {
	ctx := context.Background()
	id := func(s string) wire.Identifier { return wire.StringIdentifier([]byte(s)) }
	var patHTTP, patTCP string
	messages := func(prefix string, n int) ([]map[string]any, []client.Message) {
		var js []map[string]any
		var bin []client.Message
		for i := 1; i <= n; i++ {
			payload := fmt.Sprintf("%s-%d", prefix, i)
			js = append(js, map[string]any{"id": i, "payload": b64(payload)})
			bin = append(bin, client.Message{ID: wire.Uint128{Lo: uint64(i)}, Payload: []byte(payload)})
		}
		return js, bin
	}
	orders1JS, orders1 := messages("first", 10)
	orders2JS, orders2 := messages("second", 3)
	keyedJS, keyed := messages("keyed", 4)
	alicePermissions := wire.Permissions{Global: wire.GlobalPermissions{ReadStreams: true, ReadTopics: true, PollMessages: true}}
	alicePermissionsJS := map[string]any{"global": map[string]bool{"manage_servers": false, "read_servers": false,
		"manage_users": false, "read_users": false, "manage_streams": false, "read_streams": true, "manage_topics": false,
		"read_topics": true, "poll_messages": true, "send_messages": false}, "streams": nil}
	aliceMore := alicePermissions
	aliceMore.Global.SendMessages = true
	aliceMoreJS := map[string]any{"global": map[string]bool{"manage_servers": false, "read_servers": false,
		"manage_users": false, "read_users": false, "manage_streams": false, "read_streams": true, "manage_topics": false,
		"read_topics": true, "poll_messages": true, "send_messages": true}, "streams": nil}
	topicJS := func(name string, partitions int) map[string]any {
		return map[string]any{"name": name, "partitions_count": partitions, "compression_algorithm": "none",
			"message_expiry": 0, "max_topic_size": 0}
	}
	offsetJS := func(consumer string, partition uint32, offset uint64) map[string]any {
		return map[string]any{"consumer_id": consumer, "partition_id": partition, "offset": offset}
	}
	consumer7 := wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericIdentifier(7)}
	return []scenarioStep{
		{"create stream",
			func(h *httpSide) uint32 { return h.call("POST", "/streams", map[string]string{"name": "orders"}, nil) },
			func(c *client.Client) uint32 { _, err := c.CreateStream(ctx, "orders"); return codeOf(t, err) }},
		{"create a stream whose name is taken",
			func(h *httpSide) uint32 { return h.call("POST", "/streams", map[string]string{"name": "orders"}, nil) },
			func(c *client.Client) uint32 { _, err := c.CreateStream(ctx, "orders"); return codeOf(t, err) }},
		{"create a second stream",
			func(h *httpSide) uint32 { return h.call("POST", "/streams", map[string]string{"name": "scratch"}, nil) },
			func(c *client.Client) uint32 { _, err := c.CreateStream(ctx, "scratch"); return codeOf(t, err) }},
		{"rename it",
			func(h *httpSide) uint32 {
				return h.call("PUT", "/streams/scratch", map[string]string{"name": "scratch-2"}, nil)
			},
			func(c *client.Client) uint32 { return codeOf(t, c.UpdateStream(ctx, id("scratch"), "scratch-2")) }},
		{"create a topic of 3 partitions",
			func(h *httpSide) uint32 { return h.call("POST", "/streams/orders/topics", topicJS("events", 3), nil) },
			func(c *client.Client) uint32 {
				_, err := c.CreateTopic(ctx, id("orders"), "events", 3, nil)
				return codeOf(t, err)
			}},
		{"create a topic in a missing stream",
			func(h *httpSide) uint32 { return h.call("POST", "/streams/nowhere/topics", topicJS("x", 1), nil) },
			func(c *client.Client) uint32 {
				_, err := c.CreateTopic(ctx, id("nowhere"), "x", 1, nil)
				return codeOf(t, err)
			}},
		{"create a topic to purge and delete",
			func(h *httpSide) uint32 { return h.call("POST", "/streams/scratch-2/topics", topicJS("tmp", 1), nil) },
			func(c *client.Client) uint32 {
				_, err := c.CreateTopic(ctx, id("scratch-2"), "tmp", 1, nil)
				return codeOf(t, err)
			}},
		{"add 2 partitions",
			func(h *httpSide) uint32 {
				return h.call("POST", "/streams/orders/topics/events/partitions", map[string]int{"partitions_count": 2}, nil)
			},
			func(c *client.Client) uint32 {
				return codeOf(t, c.CreatePartitions(ctx, id("orders"), id("events"), 2))
			}},
		{"delete 1 partition",
			func(h *httpSide) uint32 {
				return h.call("DELETE", "/streams/orders/topics/events/partitions?partitions_count=1", nil, nil)
			},
			func(c *client.Client) uint32 {
				return codeOf(t, c.DeletePartitions(ctx, id("orders"), id("events"), 1))
			}},
		{"delete more partitions than there are",
			func(h *httpSide) uint32 {
				return h.call("DELETE", "/streams/orders/topics/events/partitions?partitions_count=9", nil, nil)
			},
			func(c *client.Client) uint32 {
				return codeOf(t, c.DeletePartitions(ctx, id("orders"), id("events"), 9))
			}},
		{"send 10 messages to partition 1",
			func(h *httpSide) uint32 {
				return h.call("POST", "/streams/orders/topics/events/messages", map[string]any{
					"partitioning": map[string]string{"kind": "partition_id", "value": le32(1)}, "messages": orders1JS}, nil)
			},
			func(c *client.Client) uint32 {
				_, err := c.SendMessages(ctx, id("orders"), id("events"), wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 1}, orders1)
				return codeOf(t, err)
			}},
		{"send 3 more to partition 1",
			func(h *httpSide) uint32 {
				return h.call("POST", "/streams/orders/topics/events/messages", map[string]any{
					"partitioning": map[string]string{"kind": "partition_id", "value": le32(1)}, "messages": orders2JS}, nil)
			},
			func(c *client.Client) uint32 {
				_, err := c.SendMessages(ctx, id("orders"), id("events"), wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 1}, orders2)
				return codeOf(t, err)
			}},
		{"send 4 by key",
			func(h *httpSide) uint32 {
				return h.call("POST", "/streams/orders/topics/events/messages", map[string]any{
					"partitioning": map[string]string{"kind": "messages_key", "value": b64("customer-42")}, "messages": keyedJS}, nil)
			},
			func(c *client.Client) uint32 {
				_, err := c.SendMessages(ctx, id("orders"), id("events"), wire.Partitioning{Kind: wire.PartitioningMessagesKey, Key: []byte("customer-42")}, keyed)
				return codeOf(t, err)
			}},
		{"send to a missing partition",
			func(h *httpSide) uint32 {
				return h.call("POST", "/streams/orders/topics/events/messages", map[string]any{
					"partitioning": map[string]string{"kind": "partition_id", "value": le32(99)}, "messages": orders2JS}, nil)
			},
			func(c *client.Client) uint32 {
				_, err := c.SendMessages(ctx, id("orders"), id("events"), wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 99}, orders2)
				return codeOf(t, err)
			}},
		{"store consumer 7's offset on partition 1",
			func(h *httpSide) uint32 {
				return h.call("PUT", "/streams/orders/topics/events/consumer-offsets", offsetJS("7", 1, 5), nil)
			},
			func(c *client.Client) uint32 {
				return codeOf(t, c.StoreConsumerOffset(ctx, &wire.StoreConsumerOffset{Consumer: consumer7, StreamID: id("orders"),
					TopicID: id("events"), Partition: wire.SomePartition(1), Offset: 5}))
			}},
		{"store an offset past the end",
			func(h *httpSide) uint32 {
				return h.call("PUT", "/streams/orders/topics/events/consumer-offsets", offsetJS("7", 1, 500), nil)
			},
			func(c *client.Client) uint32 {
				return codeOf(t, c.StoreConsumerOffset(ctx, &wire.StoreConsumerOffset{Consumer: consumer7, StreamID: id("orders"),
					TopicID: id("events"), Partition: wire.SomePartition(1), Offset: 500}))
			}},
		{"store consumer 8's offset on partition 1, then delete it",
			func(h *httpSide) uint32 {
				if code := h.call("PUT", "/streams/orders/topics/events/consumer-offsets", offsetJS("8", 1, 2), nil); code != 0 {
					return code
				}
				return h.call("DELETE", "/streams/orders/topics/events/consumer-offsets/8?partition_id=1", nil, nil)
			},
			func(c *client.Client) uint32 {
				c8 := wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericIdentifier(8)}
				if code := codeOf(t, c.StoreConsumerOffset(ctx, &wire.StoreConsumerOffset{Consumer: c8, StreamID: id("orders"),
					TopicID: id("events"), Partition: wire.SomePartition(1), Offset: 2})); code != 0 {
					return code
				}
				return codeOf(t, c.DeleteConsumerOffset(ctx, &wire.DeleteConsumerOffset{Consumer: c8, StreamID: id("orders"),
					TopicID: id("events"), Partition: wire.SomePartition(1)}))
			}},
		{"delete an offset never stored",
			func(h *httpSide) uint32 {
				return h.call("DELETE", "/streams/orders/topics/events/consumer-offsets/9?partition_id=1", nil, nil)
			},
			func(c *client.Client) uint32 {
				return codeOf(t, c.DeleteConsumerOffset(ctx, &wire.DeleteConsumerOffset{Consumer: wire.Consumer{Kind: wire.ConsumerSingle,
					ID: wire.NumericIdentifier(9)}, StreamID: id("orders"), TopicID: id("events"), Partition: wire.SomePartition(1)}))
			}},
		{"create consumer groups",
			func(h *httpSide) uint32 {
				for _, g := range []string{"billing", "audit"} {
					if code := h.call("POST", "/streams/orders/topics/events/consumer-groups", map[string]string{"name": g}, nil); code != 0 {
						return code
					}
				}
				return 0
			},
			func(c *client.Client) uint32 {
				for _, g := range []string{"billing", "audit"} {
					if _, err := c.CreateConsumerGroup(ctx, id("orders"), id("events"), g); err != nil {
						return codeOf(t, err)
					}
				}
				return 0
			}},
		{"delete a consumer group",
			func(h *httpSide) uint32 {
				return h.call("DELETE", "/streams/orders/topics/events/consumer-groups/audit", nil, nil)
			},
			func(c *client.Client) uint32 {
				return codeOf(t, c.DeleteConsumerGroup(ctx, id("orders"), id("events"), id("audit")))
			}},
		{"delete a missing consumer group",
			func(h *httpSide) uint32 {
				return h.call("DELETE", "/streams/orders/topics/events/consumer-groups/nobody", nil, nil)
			},
			func(c *client.Client) uint32 {
				return codeOf(t, c.DeleteConsumerGroup(ctx, id("orders"), id("events"), id("nobody")))
			}},
		{"create user alice",
			func(h *httpSide) uint32 {
				return h.call("POST", "/users", map[string]any{"username": "alice", "password": "secret-1", "status": "active",
					"permissions": alicePermissionsJS}, nil)
			},
			func(c *client.Client) uint32 {
				_, err := c.CreateUser(ctx, "alice", "secret-1", wire.UserActive, &alicePermissions)
				return codeOf(t, err)
			}},
		{"alice may not create a stream",
			func(h *httpSide) uint32 {
				return h.as("alice", "secret-1").call("POST", "/streams", map[string]string{"name": "alices"}, nil)
			},
			func(*client.Client) uint32 {
				_, err := tcpAs("alice", "secret-1").CreateStream(ctx, "alices")
				return codeOf(t, err)
			}},
		{"alice may not send",
			func(h *httpSide) uint32 {
				return h.as("alice", "secret-1").call("POST", "/streams/orders/topics/events/messages", map[string]any{
					"partitioning": map[string]string{"kind": "partition_id", "value": le32(0)}, "messages": orders2JS}, nil)
			},
			func(*client.Client) uint32 {
				_, err := tcpAs("alice", "secret-1").SendMessages(ctx, id("orders"), id("events"),
					wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 0}, orders2)
				return codeOf(t, err)
			}},
		{"give alice send",
			func(h *httpSide) uint32 {
				return h.call("PUT", "/users/alice/permissions", map[string]any{"permissions": aliceMoreJS}, nil)
			},
			func(c *client.Client) uint32 { return codeOf(t, c.UpdatePermissions(ctx, id("alice"), &aliceMore)) }},
		{"alice sends to partition 0",
			func(h *httpSide) uint32 {
				return h.as("alice", "secret-1").call("POST", "/streams/orders/topics/events/messages", map[string]any{
					"partitioning": map[string]string{"kind": "partition_id", "value": le32(0)}, "messages": orders2JS}, nil)
			},
			func(*client.Client) uint32 {
				_, err := tcpAs("alice", "secret-1").SendMessages(ctx, id("orders"), id("events"),
					wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 0}, orders2)
				return codeOf(t, err)
			}},
		{"alice changes her password with a wrong current one",
			func(h *httpSide) uint32 {
				return h.call("PUT", "/users/alice/password", map[string]string{"current_password": "nope", "new_password": "secret-2"}, nil)
			},
			func(c *client.Client) uint32 {
				return codeOf(t, c.ChangePassword(ctx, id("alice"), "nope", "secret-2"))
			}},
		{"alice changes her password",
			func(h *httpSide) uint32 {
				return h.call("PUT", "/users/alice/password", map[string]string{"current_password": "secret-1", "new_password": "secret-2"}, nil)
			},
			func(c *client.Client) uint32 {
				return codeOf(t, c.ChangePassword(ctx, id("alice"), "secret-1", "secret-2"))
			}},
		{"the old password no longer logs in",
			func(h *httpSide) uint32 {
				return (&httpSide{t: h.t, base: h.base, http: h.http}).login("alice", "secret-1")
			},
			func(c *client.Client) uint32 {
				_, err := client.Dial(ctx, c.Addr(), client.WithCredentials("alice", "secret-1"))
				return codeOf(t, err)
			}},
		{"create and deactivate user bob, then delete him",
			func(h *httpSide) uint32 {
				if code := h.call("POST", "/users", map[string]any{"username": "bob", "password": "secret-1", "status": "active"}, nil); code != 0 {
					return code
				}
				if code := h.call("PUT", "/users/bob", map[string]string{"status": "inactive"}, nil); code != 0 {
					return code
				}
				return h.call("DELETE", "/users/bob", nil, nil)
			},
			func(c *client.Client) uint32 {
				if _, err := c.CreateUser(ctx, "bob", "secret-1", wire.UserActive, nil); err != nil {
					return codeOf(t, err)
				}
				if err := c.UpdateUser(ctx, id("bob"), client.UserUpdate{Status: wire.UserInactive}); err != nil {
					return codeOf(t, err)
				}
				return codeOf(t, c.DeleteUser(ctx, id("bob")))
			}},
		{"the root user cannot be deleted",
			func(h *httpSide) uint32 { return h.call("DELETE", "/users/0", nil, nil) },
			func(c *client.Client) uint32 { return codeOf(t, c.DeleteUser(ctx, wire.NumericIdentifier(0))) }},
		{"create personal access tokens",
			func(h *httpSide) uint32 {
				var tok struct {
					Token string `json:"token"`
				}
				if code := h.call("POST", "/personal-access-tokens", map[string]any{"name": "ci-token", "expiry": 0}, &tok); code != 0 {
					return code
				}
				patHTTP = tok.Token
				return h.call("POST", "/personal-access-tokens", map[string]any{"name": "old-token", "expiry": 0}, nil)
			},
			func(c *client.Client) uint32 {
				tok, err := c.CreatePersonalAccessToken(ctx, "ci-token", 0)
				if err != nil {
					return codeOf(t, err)
				}
				patTCP = tok
				_, err = c.CreatePersonalAccessToken(ctx, "old-token", 0)
				return codeOf(t, err)
			}},
		{"a duplicate token name",
			func(h *httpSide) uint32 {
				return h.call("POST", "/personal-access-tokens", map[string]any{"name": "ci-token", "expiry": 0}, nil)
			},
			func(c *client.Client) uint32 {
				_, err := c.CreatePersonalAccessToken(ctx, "ci-token", 0)
				return codeOf(t, err)
			}},
		{"delete a token",
			func(h *httpSide) uint32 { return h.call("DELETE", "/personal-access-tokens/old-token", nil, nil) },
			func(c *client.Client) uint32 { return codeOf(t, c.DeletePersonalAccessToken(ctx, "old-token")) }},
		{"a stream created with the token",
			func(h *httpSide) uint32 {
				byToken := &httpSide{t: h.t, base: h.base, http: h.http}
				var id struct {
					AccessToken struct {
						Token string `json:"token"`
					} `json:"access_token"`
				}
				if code := byToken.call("POST", "/personal-access-tokens/login", map[string]string{"token": patHTTP}, &id); code != 0 {
					return code
				}
				byToken.token = id.AccessToken.Token
				return byToken.call("POST", "/streams", map[string]string{"name": "by-token"}, nil)
			},
			func(*client.Client) uint32 {
				_, err := tcpPAT(patTCP).CreateStream(ctx, "by-token")
				return codeOf(t, err)
			}},
		{"purge and delete the scratch topic, delete its stream",
			func(h *httpSide) uint32 {
				if code := h.call("DELETE", "/streams/scratch-2/topics/tmp/purge", nil, nil); code != 0 {
					return code
				}
				if code := h.call("DELETE", "/streams/scratch-2/topics/tmp", nil, nil); code != 0 {
					return code
				}
				return h.call("DELETE", "/streams/scratch-2", nil, nil)
			},
			func(c *client.Client) uint32 {
				if err := c.PurgeTopic(ctx, id("scratch-2"), id("tmp")); err != nil {
					return codeOf(t, err)
				}
				if err := c.DeleteTopic(ctx, id("scratch-2"), id("tmp")); err != nil {
					return codeOf(t, err)
				}
				return codeOf(t, c.DeleteStream(ctx, id("scratch-2")))
			}},
		{"delete a missing stream",
			func(h *httpSide) uint32 { return h.call("DELETE", "/streams/scratch-2", nil, nil) },
			func(c *client.Client) uint32 { return codeOf(t, c.DeleteStream(ctx, id("scratch-2"))) }},
	}
}

// stateOverHTTP reads what the scenario leaves, over the HTTP API, as JSON
// values without the instants and checksums that differ between two runs.
func stateOverHTTP(t testing.TB, h *httpSide) map[string]any {
	t.Helper()
	state := map[string]any{}
	get := func(path string) any {
		var v any
		if code := h.call("GET", path, nil, &v); code != 0 {
			t.Fatalf("GET %s: %d", path, code)
		}
		return stripVolatile(v)
	}
	state["streams"] = get("/streams")
	state["users"] = get("/users")
	state["alice"] = get("/users/alice")
	state["tokens"] = get("/personal-access-tokens")
	for _, s := range []string{"orders", "by-token"} {
		state["stream "+s] = get("/streams/" + s)
	}
	state["topic"] = get("/streams/orders/topics/events")
	state["groups"] = get("/streams/orders/topics/events/consumer-groups")
	for p := range 4 {
		state[fmt.Sprint("messages ", p)] = get(fmt.Sprintf("/streams/orders/topics/events/messages?consumer_id=1&partition_id=%d&kind=offset&value=0&count=100", p))
	}
	var offset any
	code := h.call("GET", "/streams/orders/topics/events/consumer-offsets?consumer_id=7&partition_id=1", nil, &offset)
	state["offset 7"] = []any{code, stripVolatile(offset)}
	return state
}

// stateOverTCP reads the same over the binary protocol, as the SDKs see it.
func stateOverTCP(t testing.TB, c *client.Client) map[string]any {
	t.Helper()
	ctx := testContext(t.(*testing.T))
	must := func(v any, err error) any {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	state := map[string]any{}
	streams := must(c.GetStreams(ctx)).([]wire.StreamHeader)
	var names []string
	for _, s := range streams {
		names = append(names, fmt.Sprintf("%d %s %d topics %d messages %d B", s.ID, s.Name, s.TopicsCount, s.MessagesCount, s.SizeBytes))
	}
	state["streams"] = names
	topic := must(c.GetTopic(ctx, wire.StringIdentifier([]byte("orders")), wire.StringIdentifier([]byte("events")))).(*wire.TopicDetails)
	var parts []string
	for _, p := range topic.Partitions {
		parts = append(parts, fmt.Sprintf("%d: offset %d, %d messages", p.ID, p.CurrentOffset, p.MessagesCount))
	}
	state["partitions"] = parts
	users := must(c.GetUsers(ctx)).([]wire.UserHeader)
	var us []string
	for _, u := range users {
		us = append(us, fmt.Sprintf("%d %s %d", u.ID, u.Username, u.Status))
	}
	state["users"] = us
	alice := must(c.GetUser(ctx, wire.StringIdentifier([]byte("alice")))).(*wire.UserDetails)
	state["alice"] = fmt.Sprintf("%+v", alice.Permissions)
	var pats []string
	for _, p := range must(c.GetPersonalAccessTokens(ctx)).([]wire.PatEntry) {
		pats = append(pats, string(p.Name))
	}
	sort.Strings(pats)
	state["tokens"] = pats
	for p := range uint32(4) {
		polled, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericIdentifier(1)},
			StreamID: wire.StringIdentifier([]byte("orders")), TopicID: wire.StringIdentifier([]byte("events")),
			Partition: wire.SomePartition(p), Strategy: wire.PollingStrategy{Kind: wire.PollingOffset}, Count: 100})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for it := polled.Messages(); it.Next(); {
			m := it.Message()
			got = append(got, fmt.Sprintf("%d %v %s", m.Offset, m.ID(), m.Payload()))
		}
		state[fmt.Sprint("messages ", p)] = got
	}
	return state
}

// stripVolatile drops what differs between two runs of the same scenario: the
// instants (created_at, timestamps, expiries), the checksums that cover them,
// and the sizes that count them.
func stripVolatile(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			switch k {
			case "created_at", "timestamp", "origin_timestamp", "checksum", "expiry_at":
				continue
			}
			out[k] = stripVolatile(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = stripVolatile(e)
		}
		return out
	}
	return v
}

// TestHTTPAndTCPSameScenario runs the scenario over HTTP on one server and over
// TCP on another: every step is answered alike (the same error code, or none),
// and the two servers end in the same state, read over either transport.
func TestHTTPAndTCPSameScenario(t *testing.T) {
	overHTTP := testServer(t, t.TempDir(), 2)
	overTCP := testServer(t, t.TempDir(), 2)
	h := newHTTPSide(t, overHTTP)
	if code := h.login("iggy", "iggy"); code != 0 {
		t.Fatalf("HTTP login: %d", code)
	}
	root := dialRoot(t, overTCP)
	tcpAs := func(user, password string) *client.Client { return dialAs(t, overTCP, user, password) }
	tcpPAT := func(token string) *client.Client {
		c, err := client.Dial(testContext(t), overTCP.Addr().String(), client.WithPersonalAccessToken(token))
		if err != nil {
			t.Fatalf("login with a token: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	refusals := 0
	for _, step := range scenario(t, tcpAs, tcpPAT) {
		gotHTTP, gotTCP := step.http(h), step.tcp(root)
		if gotHTTP != gotTCP {
			t.Errorf("%s: HTTP answered %d, TCP %d", step.name, gotHTTP, gotTCP)
		}
		if gotTCP != 0 {
			refusals++
		}
	}
	if refusals < 10 {
		t.Errorf("only %d steps were refused: the scenario's error cases did not run", refusals)
	}
	tcpOfHTTP := dialRoot(t, overHTTP)
	if a, b := stateOverTCP(t, tcpOfHTTP), stateOverTCP(t, root); !reflect.DeepEqual(a, b) {
		t.Errorf("the state read over TCP differs:\nafter HTTP %v\nafter TCP  %v", a, b)
	}
	hOfTCP := newHTTPSide(t, overTCP)
	if code := hOfTCP.login("iggy", "iggy"); code != 0 {
		t.Fatal(code)
	}
	a, b := stateOverHTTP(t, h), stateOverHTTP(t, hOfTCP)
	for k := range a {
		if !reflect.DeepEqual(a[k], b[k]) {
			ja, _ := json.Marshal(a[k])
			jb, _ := json.Marshal(b[k])
			t.Errorf("%s read over HTTP differs:\nafter HTTP %s\nafter TCP  %s", k, ja, jb)
		}
	}
}
