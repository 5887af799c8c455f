package server

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/wire"
)

// httpCluster starts a 3-node cluster whose nodes serve HTTP at the roster's
// ports.http; secret "" turns cluster.auth off (bearers verify on their own
// node only, and forwarding is off).
func httpCluster(t *testing.T, secret string) []*Server {
	t.Helper()
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	nodes := make([]config.ClusterNode, len(cfgs[0].Cluster.Nodes))
	copy(nodes, cfgs[0].Cluster.Nodes)
	// Free ports the roster does not use already (its listeners are closed, so
	// the kernel may hand one of them out again).
	taken := map[uint16]bool{}
	for _, n := range nodes {
		taken[n.Ports.TCP], taken[n.Ports.TCPReplica] = true, true
	}
	var ports []uint16
	for attempt := 0; len(ports) < len(nodes); attempt++ {
		if attempt == 10 {
			t.Fatal("no free ports apart from the roster's")
		}
		ports = ports[:0]
		for _, p := range freeLoopbackPorts(t, len(nodes)) {
			if !taken[p] {
				ports = append(ports, p)
			}
		}
	}
	for i := range nodes {
		nodes[i].Ports.HTTP = ports[i]
	}
	for i := range cfgs {
		cfgs[i].Cluster.Nodes = nodes
		if secret == "" {
			cfgs[i].Cluster.Auth = config.ClusterAuth{}
		}
	}
	servers := startCluster(t, cfgs)
	// A node takes logins once it applied the root user's creation.
	for i, s := range servers {
		waitUntil(t, fmt.Sprint("node ", i, " knows the root user"), func() bool {
			return newHTTPSide(t, s).login("iggy", "iggy") != uint32(wire.ErrTransientNotAccepted)
		})
	}
	for i, s := range servers {
		if s.HTTPAddr() == nil || s.HTTPAddr().Port != int(ports[i]) {
			t.Fatalf("node %d serves HTTP at %v, not its roster port %d", i, s.HTTPAddr(), ports[i])
		}
	}
	return servers
}

// noRedirects is an HTTP client that shows a 307 rather than following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// send sends a request with h's bearer and returns the answer, body read.
func (h *httpSide) send(method, path string) (*http.Response, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.base+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := noRedirects.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// With bearers valid on every node (cluster.auth's shared secret), a follower
// relays writes and linearizable reads to the primary, answers with the view,
// and a logout anywhere revokes the token on every node; the binary and HTTP
// cluster metadata list each node's HTTP port.
func TestHTTPClusterFollowerForwards(t *testing.T) {
	servers := httpCluster(t, testClusterSecret)
	primary, follower := newHTTPSide(t, servers[0]), newHTTPSide(t, servers[1])
	if code := follower.login("iggy", "iggy"); code != 0 {
		t.Fatalf("login at a follower: %d", code)
	}
	if code := follower.call("POST", "/streams", map[string]string{"name": "via-follower"}, nil); code != 0 {
		t.Fatalf("a write at a follower: %d", code)
	}
	root := dialRoot(t, servers[0])
	if !hasStream(t, root, "via-follower") {
		t.Fatal("the forwarded write is not at the primary")
	}
	resp, body := follower.send("GET", "/streams?consistency=linearizable")
	if resp.StatusCode != 200 || resp.Header.Get("iggy-view") == "" {
		t.Fatalf("a linearizable read at a follower: %d %q, iggy-view %q", resp.StatusCode, body, resp.Header.Get("iggy-view"))
	}
	// The follower's token is the cluster's: the primary takes it.
	primary.token = follower.token
	if code := primary.call("GET", "/streams", nil, nil); code != 0 {
		t.Fatalf("the follower's bearer at the primary: %d", code)
	}
	var meta struct {
		Nodes []struct {
			Name      string            `json:"name"`
			Endpoints map[string]uint16 `json:"endpoints"`
		} `json:"nodes"`
	}
	if code := follower.call("GET", "/cluster/metadata", nil, &meta); code != 0 || len(meta.Nodes) != 3 {
		t.Fatalf("GET /cluster/metadata: %d %+v", code, meta)
	}
	binary, err := root.GetClusterMetadata(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range meta.Nodes {
		want := uint16(servers[i].HTTPAddr().Port)
		if n.Endpoints["http"] != want || n.Endpoints["quic"] != 0 || n.Endpoints["websocket"] != 0 ||
			binary.Nodes[i].HTTPPort != want || binary.Nodes[i].QUICPort|binary.Nodes[i].WebSocketPort != 0 {
			t.Errorf("node %d: HTTP %v, binary %+v, want http %d", i, n.Endpoints, binary.Nodes[i], want)
		}
	}
	// A logout at the follower is forwarded, revoked on every node.
	if code := follower.call("DELETE", "/users/logout", nil, nil); code != 0 {
		t.Fatalf("logout at a follower: %d", code)
	}
	for i, s := range servers {
		h := newHTTPSide(t, s)
		h.token = follower.token
		waitUntil(t, fmt.Sprint("node ", i, " refuses the logged-out token"), func() bool {
			return h.call("GET", "/streams", nil, nil) == uint32(wire.ErrUnauthenticated)
		})
		if n := s.meta.RevokedTokens().Len(); n != 1 {
			t.Errorf("node %d holds %d revoked tokens, want 1", i, n)
		}
	}
}

// Without bearers shared between the nodes (no cluster.auth, no [http.jwt]
// secrets), a follower forwards nothing: a write is answered 503 (58), a
// linearizable read is redirected (307) to the primary's HTTP address, and a
// logout revokes the token in the follower's own table (only it can verify it).
func TestHTTPClusterFollowerWithoutForwarding(t *testing.T) {
	servers := httpCluster(t, "")
	follower := newHTTPSide(t, servers[1])
	if code := follower.login("iggy", "iggy"); code != 0 {
		t.Fatalf("login at a follower: %d", code)
	}
	if code := follower.call("POST", "/streams", map[string]string{"name": "refused"}, nil); code != uint32(wire.ErrTransientNotAccepted) {
		t.Fatalf("a write at a follower: %d, want 58", code)
	}
	resp, _ := follower.send("GET", "/streams?consistency=linearizable")
	want := "http://127.0.0.1:" + strconv.Itoa(servers[0].HTTPAddr().Port) + "/streams?consistency=linearizable"
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != want || resp.Header.Get("iggy-view") == "" {
		t.Fatalf("a linearizable read at a follower: %d to %q (iggy-view %q), want 307 to %q",
			resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("iggy-view"), want)
	}
	if code := follower.call("GET", "/streams", nil, nil); code != 0 {
		t.Fatalf("a serializable read at a follower: %d", code)
	}
	primary := newHTTPSide(t, servers[0])
	primary.token = follower.token
	if code := primary.call("GET", "/streams", nil, nil); code != uint32(wire.ErrUnauthenticated) {
		t.Fatalf("the follower's bearer at the primary: %d, want 40", code)
	}
	if code := follower.call("DELETE", "/users/logout", nil, nil); code != 0 {
		t.Fatalf("logout at a follower: %d", code)
	}
	if code := follower.call("GET", "/streams", nil, nil); code != uint32(wire.ErrUnauthenticated) {
		t.Fatalf("the token after its logout: %d, want 40", code)
	}
}

// A cluster whose roster lists no HTTP ports serves HTTP on ports of its own,
// and a follower answers a write at once (58) rather than waiting out the
// forward budget for a primary it cannot address.
func TestHTTPClusterWithoutRosterPorts(t *testing.T) {
	servers := startCluster(t, clusterConfigs(t, 3, testClusterSecret))
	follower := newHTTPSide(t, servers[1])
	waitUntil(t, "the follower knows the root user", func() bool {
		return follower.login("iggy", "iggy") != uint32(wire.ErrTransientNotAccepted)
	})
	if follower.token == "" {
		t.Fatal("login at the follower failed")
	}
	start := time.Now()
	if code := follower.call("POST", "/streams", map[string]string{"name": "refused"}, nil); code != uint32(wire.ErrTransientNotAccepted) {
		t.Fatalf("a write at a follower: %d, want 58", code)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the refusal took %v", waited)
	}
}
