package httpapi

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Per route: the wire reply the fake server gives, the JSON the route must answer
// (written by hand from the reference's types, apache/iggy core/common/src/types/,
// and its examples, core/server/server.http), and the wire request it must run.

func checkAnswer(t *testing.T, what string, gotStatus int, gotBody string, wantStatus int, golden string) {
	t.Helper()
	want := golden
	if strings.HasPrefix(strings.TrimSpace(golden), "{") || strings.HasPrefix(strings.TrimSpace(golden), "[") {
		want = compact(t, golden)
	}
	if gotStatus != wantStatus || gotBody != want {
		t.Fatalf("%s: %d\n%s\nwant %d\n%s", what, gotStatus, gotBody, wantStatus, want)
	}
}

const createdAt = 1733400000000000

func TestStreamRoutes(t *testing.T) {
	a, f, _ := testAPI(t)
	auth := bearer(t, a, 0)
	orders := wire.StreamHeader{ID: 0, CreatedAtMicros: createdAt, Name: []byte("orders")}
	f.on(wire.CodeGetStreams, wire.AppendStreamsReply(nil, []wire.StreamHeader{orders, {ID: 1, CreatedAtMicros: createdAt,
		TopicsCount: 2, SizeBytes: 1536, MessagesCount: 10, Name: []byte("logs")}}), nil)
	w := serve(a, "GET", "/streams", auth, "")
	checkAnswer(t, "GET /streams", w.Code, w.Body.String(), 200, `[
	 {"id":0,"created_at":1733400000000000,"name":"orders","size":"0 B","messages_count":0,"topics_count":0,"options":{}},
	 {"id":1,"created_at":1733400000000000,"name":"logs","size":"1.5 KiB","messages_count":10,"topics_count":2,"options":{}}]`)

	details := wire.StreamDetails{StreamHeader: orders}
	f.on(wire.CodeCreateStream, details.Append(nil), nil)
	w = serve(a, "POST", "/streams", auth, `{"name":"orders","stream_id":7}`) // an old client's stream_id is ignored
	checkAnswer(t, "POST /streams", w.Code, w.Body.String(), 200,
		`{"id":0,"created_at":1733400000000000,"name":"orders","size":"0 B","messages_count":0,"topics_count":0,"topics":[],"options":{}}`)
	var cs wire.CreateStream
	if err := cs.Decode(f.last(t, wire.CodeCreateStream).body); err != nil || string(cs.Name) != "orders" || len(cs.Options) != 0 {
		t.Fatalf("POST /streams ran CreateStream %+v (%v)", cs, err)
	}
	if w := serve(a, "POST", "/streams", auth, `{"name":""}`); w.Code != 400 || !strings.Contains(w.Body.String(), `"id":1013`) {
		t.Fatalf("an empty stream name: %d %s", w.Code, w.Body)
	}

	f.on(wire.CodeGetStream, nil, nil)
	w = serve(a, "GET", "/streams/9", auth, "")
	checkAnswer(t, "GET /streams/9 (missing)", w.Code, w.Body.String(), 404, `{"id":404,"code":"not_found","reason":"Resource not found","field":null}`)

	w = serve(a, "PUT", "/streams/orders", auth, `{"name":"sales"}`)
	checkAnswer(t, "PUT /streams/orders", w.Code, w.Body.String(), 204, "")
	var us wire.UpdateStream
	if err := us.Decode(f.last(t, wire.CodeUpdateStream).body); err != nil || string(us.Name) != "sales" || !us.StreamID.Equal(wire.StringIdentifier([]byte("orders"))) {
		t.Fatalf("PUT /streams/orders ran UpdateStream %+v (%v)", us, err)
	}
	for _, r := range []struct {
		method, path string
		code         wire.CommandCode
	}{{"DELETE", "/streams/0", wire.CodeDeleteStream}, {"DELETE", "/streams/0/purge", wire.CodePurgeStream},
		{"DELETE", "/streams/0/topics/1", wire.CodeDeleteTopic}, {"DELETE", "/streams/0/topics/1/purge", wire.CodePurgeTopic}} {
		w := serve(a, r.method, r.path, auth, "")
		checkAnswer(t, r.method+" "+r.path, w.Code, w.Body.String(), 204, "")
		f.last(t, r.code)
	}
}

func TestTopicRoutes(t *testing.T) {
	a, f, _ := testAPI(t)
	auth := bearer(t, a, 0)
	topic := wire.TopicHeader{ID: 0, CreatedAtMicros: createdAt, PartitionsCount: 1, MessageExpiryMicros: math.MaxUint64,
		CompressionAlgorithm: wire.TopicCompressionNone, MaxTopicSizeBytes: math.MaxUint64, Name: []byte("topic1")}
	details := wire.TopicDetails{TopicHeader: topic, Partitions: []wire.PartitionInfo{{ID: 0, CreatedAtMicros: createdAt, SegmentsCount: 1}}}
	f.on(wire.CodeGetTopic, details.Append(nil), nil)
	w := serve(a, "GET", "/streams/0/topics/0", auth, "")
	checkAnswer(t, "GET topic", w.Code, w.Body.String(), 200, `
{"id":0,"created_at":1733400000000000,"name":"topic1","size":"0 B",
 "message_expiry":18446744073709551615,"compression_algorithm":"none",
 "max_topic_size":18446744073709551615,"messages_count":0,"partitions_count":1,
 "partitions":[{"id":0,"created_at":1733400000000000,"segments_count":1,
   "current_offset":0,"size":"0 B","messages_count":0}],
 "options":{"compression_algorithm":{"value":"none","explicit":false},
   "enforce_fsync":{"value":"false","explicit":false},
   "max_topic_size":{"value":"18446744073709551615","explicit":false},
   "message_expiry":{"value":"18446744073709551615","explicit":false},
   "messages_required_to_save":{"value":"1024","explicit":false},
   "preallocate_segments":{"value":"false","explicit":false},
   "segment_size":{"value":"1073741824","explicit":false},
   "size_of_messages_required_to_save":{"value":"1048576","explicit":false}}}`)

	f.on(wire.CodeGetTopic, nil, wire.ErrTopicIdNotFound)
	w = serve(a, "GET", "/streams/0/topics/5", auth, "")
	checkAnswer(t, "GET a missing topic", w.Code, w.Body.String(), 404, `{"id":404,"code":"not_found","reason":"Resource not found","field":null}`)

	f.on(wire.CodeGetTopics, nil, wire.ErrStreamIdNotFound)
	w = serve(a, "GET", "/streams/5/topics", auth, "")
	checkAnswer(t, "GET topics of a missing stream", w.Code, w.Body.String(), 200, `[]`)

	// The SDK's create-topic body; explicit gzip and an expiry become options.
	f.on(wire.CodeCreateTopic, details.Append(nil), nil)
	w = serve(a, "POST", "/streams/0/topics", auth,
		`{"name":"topic1","partitions_count":3,"compression_algorithm":"GZIP","max_topic_size":0,"message_expiry":5000000,"options":{"segment_size":"128MiB"},"replication_factor":1}`)
	if w.Code != 200 {
		t.Fatalf("POST topics: %d %s", w.Code, w.Body)
	}
	var ct wire.CreateTopic
	if err := ct.Decode(f.last(t, wire.CodeCreateTopic).body); err != nil || string(ct.Name) != "topic1" || ct.PartitionsCount != 3 {
		t.Fatalf("POST topics ran CreateTopic %+v (%v)", ct, err)
	}
	resolved, err := wire.ResolveCreateTopicOptions(ct.Options, ct.PartitionsCount)
	if err != nil || resolved.Effective.CompressionAlgorithm != wire.TopicCompressionGzip || resolved.Effective.MessageExpiryMicros != 5_000_000 ||
		resolved.Effective.SegmentSizeBytes != 128<<20 || resolved.Effective.MaxTopicSizeBytes != math.MaxUint64 ||
		resolved.Explicit.Has(wire.TopicOptionMaxTopicSize) {
		t.Fatalf("POST topics' options resolve to %+v (%v)", resolved, err)
	}
	// The SDK's defaults: nothing explicit.
	serve(a, "POST", "/streams/0/topics", auth, `{"name":"t","partitions_count":1,"compression_algorithm":"none","max_topic_size":0,"message_expiry":0}`)
	if err := ct.Decode(f.last(t, wire.CodeCreateTopic).body); err != nil {
		t.Fatal(err)
	}
	if resolved, err := wire.ResolveCreateTopicOptions(ct.Options, 1); err != nil || resolved.Explicit != 0 {
		t.Fatalf("a topic at the defaults has explicit options %b (%v)", resolved.Explicit, err)
	}
	for _, body := range []string{`{"name":"t","partitions_count":1,"compression_algorithm":"none","message_expiry":0}`,
		`{"name":"t","partitions_count":1,"compression_algorithm":"zip","message_expiry":0,"max_topic_size":0}`} {
		if w := serve(a, "POST", "/streams/0/topics", auth, body); w.Code != 422 {
			t.Fatalf("POST topics %s: %d, want 422", body, w.Code)
		}
	}

	// The Web UI's edit: the compression read back from GET, max_topic_size 0.
	w = serve(a, "PUT", "/streams/0/topics/0", auth, `{"name":"renamed","message_expiry":0,"compression_algorithm":"none","max_topic_size":0}`)
	checkAnswer(t, "PUT topic", w.Code, w.Body.String(), 204, "")
	var ut wire.UpdateTopic
	if err := ut.Decode(f.last(t, wire.CodeUpdateTopic).body); err != nil || string(ut.Name) != "renamed" {
		t.Fatalf("PUT topic ran UpdateTopic %+v (%v)", ut, err)
	}
	if _, err := wire.CheckTopicUpdate(ut.Options, wire.DefaultSegmentSizeBytes); err != nil {
		t.Fatalf("PUT topic's options are refused: %v", err)
	}

	w = serve(a, "POST", "/streams/0/topics/0/partitions", auth, `{"partitions_count":2}`)
	checkAnswer(t, "POST partitions", w.Code, w.Body.String(), 200, "")
	var cp wire.CreatePartitions
	if err := cp.Decode(f.last(t, wire.CodeCreatePartitions).body); err != nil || cp.PartitionsCount != 2 {
		t.Fatalf("POST partitions ran %+v (%v)", cp, err)
	}
	w = serve(a, "DELETE", "/streams/0/topics/0/partitions?partitions_count=2", auth, "")
	checkAnswer(t, "DELETE partitions", w.Code, w.Body.String(), 204, "")
	var dp wire.DeletePartitions
	if err := dp.Decode(f.last(t, wire.CodeDeletePartitions).body); err != nil || dp.PartitionsCount != 2 {
		t.Fatalf("DELETE partitions ran %+v (%v)", dp, err)
	}
	w = serve(a, "DELETE", "/streams/0/topics/0/partitions/3?segments_count=4", auth, "")
	checkAnswer(t, "DELETE segments", w.Code, w.Body.String(), 204, "")
	var ds wire.DeleteSegments
	if err := ds.Decode(f.last(t, wire.CodeDeleteSegments).body); err != nil || ds.PartitionID != 3 || ds.SegmentsCount != 4 {
		t.Fatalf("DELETE segments ran %+v (%v)", ds, err)
	}
}

func TestConsumerGroupRoutes(t *testing.T) {
	a, f, _ := testAPI(t)
	auth := bearer(t, a, 0)
	g := wire.ConsumerGroupHeader{ID: 0, PartitionsCount: 3, MembersCount: 1, Name: []byte("cg1")}
	f.on(wire.CodeGetConsumerGroups, wire.AppendConsumerGroupsReply(nil, []wire.ConsumerGroupHeader{g}), nil)
	w := serve(a, "GET", "/streams/0/topics/0/consumer-groups", auth, "")
	checkAnswer(t, "GET groups", w.Code, w.Body.String(), 200, `[{"id":0,"name":"cg1","partitions_count":3,"members_count":1}]`)
	details := wire.ConsumerGroupDetails{ConsumerGroupHeader: g, Members: []wire.ConsumerGroupMember{{ID: 1, PartitionIDs: []uint32{0, 2}}}}
	f.on(wire.CodeCreateConsumerGroup, details.Append(nil), nil)
	w = serve(a, "POST", "/streams/0/topics/0/consumer-groups", auth, `{"name":"cg1"}`)
	checkAnswer(t, "POST group", w.Code, w.Body.String(), 200,
		`{"id":0,"name":"cg1","partitions_count":3,"members_count":1,"members":[{"id":1,"partitions_count":2,"partitions":[0,2]}]}`)
	f.on(wire.CodeGetConsumerGroups, nil, wire.ErrStreamIdNotFound)
	w = serve(a, "GET", "/streams/9/topics/0/consumer-groups", auth, "")
	checkAnswer(t, "GET groups of a missing stream", w.Code, w.Body.String(), 404,
		`{"id":1009,"code":"stream_id_not_found","reason":"Stream with ID: 0 was not found.","field":"stream_id"}`)
	w = serve(a, "DELETE", "/streams/0/topics/0/consumer-groups/cg1", auth, "")
	checkAnswer(t, "DELETE group", w.Code, w.Body.String(), 204, "")
	var dg wire.DeleteConsumerGroup
	if err := dg.Decode(f.last(t, wire.CodeDeleteConsumerGroup).body); err != nil || !dg.GroupID.Equal(wire.StringIdentifier([]byte("cg1"))) {
		t.Fatalf("DELETE group ran %+v (%v)", dg, err)
	}
}

func rootPermissions() wire.Permissions {
	return wire.Permissions{Global: wire.GlobalPermissions{ManageServers: true, ReadServers: true, ManageUsers: true, ReadUsers: true,
		ManageStreams: true, ReadStreams: true, ManageTopics: true, ReadTopics: true, PollMessages: true, SendMessages: true}}
}

func TestUserRoutes(t *testing.T) {
	a, f, _ := testAPI(t)
	auth := bearer(t, a, 0)
	root := wire.UserDetails{UserHeader: wire.UserHeader{ID: 0, CreatedAtMicros: createdAt, Status: 1, Username: []byte("iggy")},
		HasPermissions: true, Permissions: rootPermissions()}
	f.on(wire.CodeGetUser, root.Append(nil), nil)
	w := serve(a, "GET", "/users/me", auth, "")
	checkAnswer(t, "GET /users/me", w.Code, w.Body.String(), 200, `
{"id":0,"created_at":1733400000000000,"status":"active","username":"iggy",
 "permissions":{"global":{"manage_servers":true,"read_servers":true,"manage_users":true,
 "read_users":true,"manage_streams":true,"read_streams":true,"manage_topics":true,
 "read_topics":true,"poll_messages":true,"send_messages":true},"streams":null},"options":{}}`)
	var gu wire.GetUser
	if err := gu.Decode(f.last(t, wire.CodeGetUser).body); err != nil || !gu.UserID.Equal(wire.NumericIdentifier(0)) {
		t.Fatalf("GET /users/me ran %+v (%v)", gu, err)
	}
	f.on(wire.CodeGetUsers, wire.AppendUsersReply(nil, []wire.UserHeader{{ID: 1, CreatedAtMicros: createdAt, Status: 1, Username: []byte("user1")}}), nil)
	w = serve(a, "GET", "/users", auth, "")
	checkAnswer(t, "GET /users", w.Code, w.Body.String(), 200, `[{"id":1,"created_at":1733400000000000,"status":"active","username":"user1","options":{}}]`)

	// The reference's permissions example, in and out.
	perms := `{"global":{"manage_servers":false,"read_servers":true,"manage_users":false,"read_users":false,
 "manage_streams":false,"read_streams":true,"manage_topics":false,"read_topics":true,
 "poll_messages":true,"send_messages":true},
 "streams":{"0":{"manage_stream":false,"read_stream":true,"manage_topics":false,"read_topics":true,
  "poll_messages":true,"send_messages":true,
  "topics":{"0":{"manage_topic":false,"read_topic":true,"poll_messages":true,"send_messages":true}}}}}`
	f.replies[wire.CodeCreateUser] = func(_ Caller, body []byte) ([]byte, error) {
		var r wire.CreateUser
		if err := r.Decode(body); err != nil {
			return nil, err
		}
		return wire.AppendUserDetailsRaw(nil, &wire.UserHeader{ID: 1, CreatedAtMicros: createdAt, Status: uint8(r.Status), Username: r.Username}, r.Permissions), nil
	}
	w = serve(a, "POST", "/users", auth, `{"username":"user1","password":"secret","status":"inactive","permissions":`+perms+`}`)
	checkAnswer(t, "POST /users", w.Code, w.Body.String(), 200,
		`{"id":1,"created_at":1733400000000000,"status":"inactive","username":"user1","permissions":`+perms+`,"options":{}}`)
	for body, want := range map[string]int{
		`{"username":"user1","password":"secret"}`:                                               422, // status is required
		`{"username":"user1","password":"secret","status":"asleep"}`:                             422,
		`{"username":"u","password":"secret","status":"active"}`:                                 400,
		`{"username":"user1","password":"secret","status":"active","permissions":{"global":{}}}`: 422,
	} {
		if w := serve(a, "POST", "/users", auth, body); w.Code != want {
			t.Errorf("POST /users %s: %d %s, want %d", body, w.Code, w.Body, want)
		}
	}
	w = serve(a, "PUT", "/users/1", auth, `{"username":"user2","status":"active","permissions":null}`)
	checkAnswer(t, "PUT /users/1", w.Code, w.Body.String(), 204, "")
	var uu wire.UpdateUser
	if err := uu.Decode(f.last(t, wire.CodeUpdateUser).body); err != nil || !uu.HasUsername || string(uu.Username) != "user2" || !uu.HasStatus || uu.Status != wire.UserActive {
		t.Fatalf("PUT /users/1 ran %+v (%v)", uu, err)
	}
	w = serve(a, "PUT", "/users/1/password", auth, `{"current_password":"secret","new_password":"secret2"}`)
	checkAnswer(t, "PUT password", w.Code, w.Body.String(), 204, "")
	w = serve(a, "PUT", "/users/1/permissions", auth, `{"permissions":null}`)
	checkAnswer(t, "PUT permissions", w.Code, w.Body.String(), 204, "")
	var up wire.UpdatePermissions
	if err := up.Decode(f.last(t, wire.CodeUpdatePermissions).body); err != nil || up.HasPermissions {
		t.Fatalf("PUT permissions ran %+v (%v)", up, err)
	}
	f.on(wire.CodeDeleteUser, nil, wire.ErrCannotDeleteUser)
	w = serve(a, "DELETE", "/users/0", auth, "")
	checkAnswer(t, "DELETE root", w.Code, w.Body.String(), 400, `{"id":48,"code":"cannot_delete_user","reason":"Cannot delete user","field":null}`)
}

func TestTokenRoutes(t *testing.T) {
	a, f, clock := testAPI(t)
	w := serve(a, "POST", "/users/login", "", `{"username":"iggy","password":"iggy","version":"0.8.0","context":""}`)
	var id struct {
		UserID      uint32 `json:"user_id"`
		AccessToken struct {
			Token  string `json:"token"`
			Expiry int64  `json:"expiry"`
		} `json:"access_token"`
	}
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &id) != nil || id.UserID != 0 || id.AccessToken.Expiry != testStart.Unix()+3600 ||
		!strings.HasPrefix(w.Body.String(), `{"user_id":0,"access_token":{"token":"`) {
		t.Fatalf("login: %d %s", w.Code, w.Body)
	}
	if w := serve(a, "GET", "/streams", "Bearer "+id.AccessToken.Token, ""); w.Code != 200 {
		t.Fatalf("the login's token: %d", w.Code)
	}
	for _, body := range []string{`{"username":"iggy","password":"wrong"}`, `{"username":"x","password":"iggy"}`} {
		w := serve(a, "POST", "/users/login", "", body)
		checkAnswer(t, "login "+body, w.Code, w.Body.String(), 400, `{"id":42,"code":"invalid_credentials","reason":"Invalid credentials","field":null}`)
	}
	w = serve(a, "POST", "/personal-access-tokens/login", "", `{"token":"nope"}`)
	checkAnswer(t, "PAT login", w.Code, w.Body.String(), 401, `{"id":53,"code":"invalid_personal_access_token","reason":"Invalid personal access token","field":null}`)
	if w := serve(a, "POST", "/personal-access-tokens/login", "", `{"token":"pat-of-5"}`); w.Code != 200 || !strings.HasPrefix(w.Body.String(), `{"user_id":5,`) {
		t.Fatalf("PAT login: %d %s", w.Code, w.Body)
	}
	// Refresh is stateless: the new token works, and so does the old one.
	clock.advance(10 * 60e9)
	w = serve(a, "POST", "/users/refresh-token", "", `{"token":"`+id.AccessToken.Token+`"}`)
	var refreshed struct {
		AccessToken struct {
			Token  string `json:"token"`
			Expiry int64  `json:"expiry"`
		} `json:"access_token"`
	}
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &refreshed) != nil || refreshed.AccessToken.Expiry != testStart.Unix()+600+3600 {
		t.Fatalf("refresh: %d %s", w.Code, w.Body)
	}
	for _, tok := range []string{id.AccessToken.Token, refreshed.AccessToken.Token} {
		if w := serve(a, "GET", "/streams", "Bearer "+tok, ""); w.Code != 200 {
			t.Fatalf("after refresh: %d", w.Code)
		}
	}
	w = serve(a, "POST", "/users/refresh-token", "", `{"token":""}`)
	checkAnswer(t, "refresh of nothing", w.Code, w.Body.String(), 401, `{"id":40,"code":"unauthenticated","reason":"Unauthenticated","field":null}`)

	auth := "Bearer " + id.AccessToken.Token
	w = serve(a, "DELETE", "/users/logout", auth, "")
	checkAnswer(t, "logout", w.Code, w.Body.String(), 204, "")
	if c := f.last(t, wire.CodeLogoutUser).caller; c.Credential == "" || !c.LoggedIn {
		t.Fatalf("logout ran as %+v", c)
	}
	auth = bearer(t, a, 0) // the logged-out token is revoked (auth_test.go)

	f.on(wire.CodeGetPersonalAccessTokens, wire.AppendPersonalAccessTokensReply(nil, []wire.PatEntry{{Name: []byte("prod"), ExpiryAtMicros: createdAt}, {Name: []byte("dev")}}), nil)
	w = serve(a, "GET", "/personal-access-tokens", auth, "")
	checkAnswer(t, "GET PATs", w.Code, w.Body.String(), 200, `[{"name":"dev","expiry_at":null},{"name":"prod","expiry_at":1733400000000000}]`)
	token := strings.Repeat("A", 68)
	created := wire.CreatedToken{Token: []byte(token)}
	f.on(wire.CodeCreatePersonalAccessToken, created.Append(nil), nil)
	w = serve(a, "POST", "/personal-access-tokens", auth, `{"name":"dev","expiry":0}`)
	checkAnswer(t, "POST PAT", w.Code, w.Body.String(), 200, `{"token":"`+token+`"}`)
	var cp wire.CreatePersonalAccessToken
	if err := cp.Decode(f.last(t, wire.CodeCreatePersonalAccessToken).body); err != nil || string(cp.Name) != "dev" || cp.ExpiryUs != 0 {
		t.Fatalf("POST PAT ran %+v (%v)", cp, err)
	}
	if w := serve(a, "POST", "/personal-access-tokens", auth, `{"name":"d","expiry":0}`); w.Code != 400 || !strings.Contains(w.Body.String(), `"id":50`) {
		t.Fatalf("a 1-byte PAT name: %d %s", w.Code, w.Body)
	}
	w = serve(a, "DELETE", "/personal-access-tokens/dev", auth, "")
	checkAnswer(t, "DELETE PAT", w.Code, w.Body.String(), 204, "")
}

func TestSystemRoutes(t *testing.T) {
	a, f, _ := testAPI(t)
	auth := bearer(t, a, 0)
	stats := wire.Stats{ProcessID: 4242, CPUUsage: 0.5, TotalCPUUsage: 3.25, MemoryUsageBytes: 52342784, TotalMemoryBytes: 16 << 30,
		AvailableMemoryBytes: 10468982784, RunTimeMicros: 125000000, StartTimeMicros: createdAt, WrittenBytes: 12 << 10,
		MessagesSizeBytes: 1536, StreamsCount: 1, TopicsCount: 1, PartitionsCount: 3, SegmentsCount: 3, MessagesCount: 10,
		ClientsCount: 1, Hostname: []byte("node1"), OSName: []byte("Linux"), OSVersion: []byte("24.04"),
		KernelVersion: []byte("6.8.0"), IggyServerVersion: []byte("0.x.y"), ThreadsCount: 17,
		FreeDiskSpaceBytes: 100e9, TotalDiskSpaceBytes: 500e9}
	f.on(wire.CodeGetStats, stats.Append(nil), nil)
	w := serve(a, "GET", "/stats", auth, "")
	checkAnswer(t, "GET /stats", w.Code, w.Body.String(), 200, `
{"process_id":4242,"cpu_usage":0.5,"total_cpu_usage":3.25,"memory_usage":"51116 KiB",
 "total_memory":"16 GiB","available_memory":"9.75 GiB","run_time":125000000,
 "start_time":1733400000000000,"read_bytes":"0 B","written_bytes":"12 KiB",
 "messages_size_bytes":"1.5 KiB","streams_count":1,"topics_count":1,"partitions_count":3,
 "segments_count":3,"messages_count":10,"clients_count":1,"consumer_groups_count":0,
 "hostname":"node1","os_name":"Linux","os_version":"24.04","kernel_version":"6.8.0",
 "iggy_server_version":"0.x.y","iggy_server_semver":null,"cache_metrics":{},
 "threads_count":17,"free_disk_space":"100 GB","total_disk_space":"500 GB"}`)

	cluster := wire.ClusterMetadata{Name: []byte("single-node"), Nodes: []wire.ClusterNode{{Name: []byte("iggy-node"), IP: []byte("127.0.0.1"),
		TCPPort: 8090, QUICPort: 8080, HTTPPort: 3000, WebSocketPort: 8092, Role: wire.ClusterRoleLeader, Status: wire.ClusterNodeHealthy}}}
	f.on(wire.CodeGetClusterMetadata, cluster.Append(nil), nil)
	w = serve(a, "GET", "/cluster/metadata", auth, "")
	checkAnswer(t, "GET /cluster/metadata", w.Code, w.Body.String(), 200, `
{"name":"single-node","nodes":[{"name":"iggy-node","ip":"127.0.0.1",
 "endpoints":{"tcp":8090,"quic":8080,"http":3000,"websocket":8092},
 "role":"leader","status":"healthy"}]}`)

	f.on(wire.CodeGetClients, wire.AppendClientsReply(nil, []wire.ClientHeader{
		{ClientID: 2, UserID: wire.ClientUserIDNone, Transport: wire.ClientTransportTCP, Address: []byte("127.0.0.1:50001")},
		{ClientID: 1, UserID: 0, Transport: wire.ClientTransportTCP, Address: []byte("127.0.0.1:50000")}}), nil)
	w = serve(a, "GET", "/clients", auth, "")
	checkAnswer(t, "GET /clients", w.Code, w.Body.String(), 200, `[
 {"client_id":1,"user_id":0,"address":"127.0.0.1:50000","transport":"TCP","consumer_groups_count":0},
 {"client_id":2,"user_id":null,"address":"127.0.0.1:50001","transport":"TCP","consumer_groups_count":0}]`)
	client := wire.ClientDetails{ClientHeader: wire.ClientHeader{ClientID: 1, Transport: wire.ClientTransportTCP, Address: []byte("127.0.0.1:50000"),
		ConsumerGroupsCount: 1}, Groups: []wire.ClientGroup{{StreamID: 0, TopicID: 0, GroupID: 0}}}
	f.on(wire.CodeGetClient, client.Append(nil), nil)
	w = serve(a, "GET", "/clients/1", auth, "")
	checkAnswer(t, "GET /clients/1", w.Code, w.Body.String(), 200,
		`{"client_id":1,"user_id":0,"address":"127.0.0.1:50000","transport":"TCP","consumer_groups_count":1,"consumer_groups":[{"stream_id":0,"topic_id":0,"group_id":0}]}`)
	f.on(wire.CodeGetClient, nil, nil)
	w = serve(a, "GET", "/clients/9", auth, "")
	checkAnswer(t, "GET a missing client", w.Code, w.Body.String(), 404, `{"id":404,"code":"not_found","reason":"Resource not found","field":null}`)

	catalog, err := wire.AppendOptionsCatalogReply(nil, wire.OptionsScopeTopic)
	if err != nil {
		t.Fatal(err)
	}
	f.on(wire.CodeDescribeOptions, catalog, nil)
	w = serve(a, "GET", "/options/topic", auth, "")
	var specs []jsonview.OptionSpec
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &specs) != nil || len(specs) != 8 || specs[0].Key != "compression_algorithm" ||
		specs[0].Kind != "string" || fmt.Sprint(specs[0].DefaultValue) != "[110 111 110 101]" {
		t.Fatalf("GET /options/topic: %d %s", w.Code, w.Body)
	}
	w = serve(a, "GET", "/options/queue", auth, "")
	checkAnswer(t, "GET /options/queue", w.Code, w.Body.String(), 400, `{"id":3,"code":"invalid_command","reason":"Invalid command","field":null}`)

	f.on(wire.CodeGetSnapshot, []byte("PK-archive"), nil)
	w = serve(a, "POST", "/snapshot", auth, `{"compression":"Deflated","snapshot_types":["All"]}`)
	if w.Code != 200 || w.Body.String() != "PK-archive" || w.Header().Get("Content-Type") != "application/zip" ||
		w.Header().Get("Content-Disposition") != `attachment; filename="iggy_snapshot_20241205_120000.zip"` {
		t.Fatalf("POST /snapshot: %d %v", w.Code, w.Header())
	}
	var gs wire.GetSnapshot
	if err := gs.Decode(f.last(t, wire.CodeGetSnapshot).body); err != nil || gs.Compression != wire.SnapshotDeflated || len(gs.Types) != 1 || gs.Type(0) != wire.SnapshotAll {
		t.Fatalf("POST /snapshot ran %+v (%v)", gs, err)
	}
	if w := serve(a, "POST", "/snapshot", auth, `{"compression":"deflated","snapshot_types":[]}`); w.Code != 422 {
		t.Fatalf("a lower-case compression: %d, want 422", w.Code)
	}
}

// pollBody is a PolledMessages reply of two messages, one with a user header.
func pollBody(t *testing.T) []byte {
	t.Helper()
	id2, _ := new(big.Int).SetString("317214470914146297389045710532749853215", 10)
	headers, err := wire.AppendTLV(nil, wire.HeaderString, []byte("key_1"), wire.HeaderString, []byte("value 1"))
	if err != nil {
		t.Fatal(err)
	}
	var bb wire.BatchBuilder
	if err := bb.Append(wire.Uint128{Lo: 1}, 1733399999999000, []byte("hello"), nil); err != nil {
		t.Fatal(err)
	}
	if err := bb.Append(uint128FromBig(id2), 1733399999999500, []byte("world"), headers); err != nil {
		t.Fatal(err)
	}
	batch, err := bb.Finish()
	if err != nil {
		t.Fatal(err)
	}
	wire.StampBatch(batch, 0, 0, createdAt)
	p := wire.PolledMessages{PartitionID: 0, CurrentOffset: 1, MessagesCount: 2, Records: batch}
	return p.Append(nil)
}

func TestMessageRoutes(t *testing.T) {
	a, f, _ := testAPI(t)
	auth := bearer(t, a, 0)
	reply := pollBody(t)
	var p wire.PolledMessages
	if err := p.Decode(reply); err != nil {
		t.Fatal(err)
	}
	var sums []uint64
	for it := p.Messages(); it.Next(); {
		sums = append(sums, it.Message().Checksum())
	}
	f.on(wire.CodePollMessages, reply, nil)
	w := serve(a, "GET", "/streams/0/topics/0/messages?kind=offset&value=0&count=20&auto_commit=false&partition_id=0", auth, "")
	checkAnswer(t, "poll", w.Code, w.Body.String(), 200, fmt.Sprintf(`
{"partition_id":0,"current_offset":1,"count":2,"messages":[
 {"header":{"checksum":%d,"id":1,"offset":0,"timestamp":1733400000000000,
   "origin_timestamp":1733399999999000,"user_headers_length":0,"payload_length":5,
   "reserved":0},"payload":"aGVsbG8=","user_headers":[]},
 {"header":{"checksum":%d,"id":317214470914146297389045710532749853215,"offset":1,
   "timestamp":1733400000000000,"origin_timestamp":1733399999999500,
   "user_headers_length":22,"payload_length":5,"reserved":0},"payload":"d29ybGQ=",
  "user_headers":[{"key":{"kind":"string","value":"a2V5XzE="},"value":{"kind":"string","value":"dmFsdWUgMQ=="}}]}]}`, sums[0], sums[1]))
	var pm wire.PollMessages
	if err := pm.Decode(f.last(t, wire.CodePollMessages).body); err != nil || pm.Count != 20 || pm.Partition != wire.SomePartition(0) ||
		pm.Strategy.Kind != wire.PollingOffset || pm.AutoCommit || !pm.Consumer.ID.Equal(wire.NumericIdentifier(1)) || pm.Consumer.Kind != wire.ConsumerSingle {
		t.Fatalf("poll ran %+v (%v)", pm, err)
	}
	serve(a, "GET", "/streams/0/topics/0/messages?consumer_id=reader&kind=n&auto_commit=true", auth, "")
	if err := pm.Decode(f.last(t, wire.CodePollMessages).body); err != nil || pm.Count != 10 || pm.Strategy.Kind != wire.PollingNext ||
		!pm.AutoCommit || !pm.Consumer.ID.Equal(wire.StringIdentifier([]byte("reader"))) {
		t.Fatalf("poll with defaults ran %+v (%v)", pm, err)
	}
	f.on(wire.CodePollMessages, nil, wire.ErrTopicIdNotFound)
	w = serve(a, "GET", "/streams/0/topics/9/messages", auth, "")
	checkAnswer(t, "poll of a missing topic", w.Code, w.Body.String(), 404, `{"id":404,"code":"not_found","reason":"Resource not found","field":null}`)
	f.on(wire.CodePollMessages, nil, wire.ErrPartitionNotFound)
	w = serve(a, "GET", "/streams/0/topics/0/messages?partition_id=9", auth, "")
	if w.Code != 404 || !strings.Contains(w.Body.String(), `"id":3007`) || !strings.Contains(w.Body.String(), `"field":"partition_id"`) {
		t.Fatalf("poll of a missing partition: %d %s", w.Code, w.Body)
	}

	// A produce body as the reference documents it, ids of each kind.
	send := `{"partitioning":{"kind":"partition_id","value":"AAAAAA=="},
 "messages":[{"id":0,"payload":"aGVsbG8="},
  {"id":"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","payload":"d29ybGQ=",
   "user_headers":[{"key":{"kind":"string","value":"a2V5XzE="},
                    "value":{"kind":"string","value":"dmFsdWUgMQ=="}}]}]}`
	f.on(wire.CodeSendMessages, wire.AppendSendConfirmations(nil, wire.SendConfirmation{StreamID: 0, TopicID: 0, PartitionID: 0, BaseOffset: 0}), nil)
	w = serve(a, "POST", "/streams/0/topics/0/messages", auth, send)
	checkAnswer(t, "send", w.Code, w.Body.String(), 201, `{"confirmations":[{"stream_id":0,"topic_id":0,"partition_id":0,"base_offset":0}]}`)
	if w.Header().Get("Iggy-Durability") != "replicated-memory" {
		t.Fatalf("send: iggy-durability %q", w.Header().Get("Iggy-Durability"))
	}
	var sm wire.SendMessages
	if err := sm.Decode(f.last(t, wire.CodeSendMessages).body); err != nil || sm.MessagesCount != 2 ||
		sm.Partitioning.Kind != wire.PartitioningPartitionID || sm.Partitioning.PartitionID != 0 {
		t.Fatalf("send ran %+v (%v)", sm, err)
	}
	if err := wire.ValidateBatch(sm.Batch); err != nil {
		t.Fatalf("send's batch is refused: %v", err)
	}
	sent := wire.PolledMessages{Records: sm.Batch, MessagesCount: 2}
	it := sent.Messages()
	it.Next()
	if m := it.Message(); m.ID().IsZero() || string(m.Payload()) != "hello" || len(m.UserHeaders()) != 0 {
		t.Fatalf("send's first message: id %v payload %q", m.ID(), m.Payload())
	}
	it.Next()
	if m := it.Message(); m.ID() != (wire.Uint128{Hi: 0x0190a1b2c3d47e5f, Lo: 0x8a9b0c1d2e3f4a5b}) || string(m.Payload()) != "world" || len(m.UserHeaders()) != 22 {
		t.Fatalf("send's second message: id %+v payload %q headers %d", m.ID(), m.Payload(), len(m.UserHeaders()))
	}

	w = serve(a, "POST", "/streams/0/topics/0/messages?ack=none", auth, send)
	if w.Code != 202 || w.Body.Len() != 0 || w.Header().Get("Iggy-Durability") != "none" {
		t.Fatalf("send with ack=none: %d %q %v", w.Code, w.Body, w.Header())
	}
	for body, want := range map[string]string{
		`{"partitioning":{"kind":"balanced","value":""},"messages":[]}`:                                          `"id":4009`,
		`{"partitioning":{"kind":"partition_id","value":"AAA="},"messages":[{"payload":"aGk="}]}`:                `"id":3,`,
		`{"partitioning":{"kind":"messages_key","value":""},"messages":[{"payload":"aGk="}]}`:                    `"id":4028`,
		`{"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":""}]}`:                            "Failed to deserialize",
		`{"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":"!!"}]}`:                          "Failed to deserialize",
		`{"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":"aGk=","id":-1}]}`:                "Failed to deserialize",
		`{"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":"aGk="}],"stream_id":1}`:          "Failed to deserialize",
		`{"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":"aGk=","user_headers":"!"}]}`:     "Failed to deserialize",
		`{"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":"aGk=","extra":true,"id":"12"}]}`: `"confirmations"`,
	} {
		w := serve(a, "POST", "/streams/0/topics/0/messages", auth, body)
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("send %s: %d %s, want %s", body, w.Code, w.Body, want)
		}
	}
}

func TestConsumerOffsetRoutes(t *testing.T) {
	a, f, _ := testAPI(t)
	auth := bearer(t, a, 0)
	o := wire.ConsumerOffset{PartitionID: 0, CurrentOffset: 1, StoredOffset: 1}
	f.on(wire.CodeGetConsumerOffset, o.Append(nil), nil)
	w := serve(a, "GET", "/streams/0/topics/0/consumer-offsets?consumer_id=1&partition_id=0", auth, "")
	checkAnswer(t, "GET offset", w.Code, w.Body.String(), 200, `{"partition_id":0,"current_offset":1,"stored_offset":1}`)
	f.on(wire.CodeGetConsumerOffset, nil, nil)
	w = serve(a, "GET", "/streams/0/topics/0/consumer-offsets?consumer_id=1", auth, "")
	checkAnswer(t, "GET nothing stored", w.Code, w.Body.String(), 404, `{"id":404,"code":"not_found","reason":"Resource not found","field":null}`)
	for _, body := range []string{`{"consumer_id":"1","partition_id":0,"offset":5}`, `{"consumer_id":1,"partition_id":0,"offset":5}`} {
		w = serve(a, "PUT", "/streams/0/topics/0/consumer-offsets", auth, body)
		checkAnswer(t, "PUT offset "+body, w.Code, w.Body.String(), 204, "")
		var so wire.StoreConsumerOffset
		if err := so.Decode(f.last(t, wire.CodeStoreConsumerOffset).body); err != nil || so.Offset != 5 || so.Partition != wire.SomePartition(0) ||
			!so.Consumer.ID.Equal(wire.NumericIdentifier(1)) || so.Consumer.Kind != wire.ConsumerSingle {
			t.Fatalf("PUT offset %s ran %+v (%v)", body, so, err)
		}
	}
	if w := serve(a, "PUT", "/streams/0/topics/0/consumer-offsets", auth, `{"consumer_id":"1"}`); w.Code != 422 {
		t.Fatalf("PUT offset without an offset: %d", w.Code)
	}
	f.on(wire.CodeDeleteConsumerOffset, nil, wire.ErrConsumerOffsetNotFound)
	w = serve(a, "DELETE", "/streams/0/topics/0/consumer-offsets/1?partition_id=0", auth, "")
	checkAnswer(t, "DELETE offset never stored", w.Code, w.Body.String(), 404,
		`{"id":3021,"code":"consumer_offset_not_found","reason":"Consumer offset for consumer with ID: 0 was not found.","field":null}`)
}
