package httpapi

import (
	"net"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/tlsterm"
	"github.com/iggy-shard/iggy-shard/wire"
)

// twoNodes is a primary serving on a real listener and a backup that forwards to it.
func twoNodes(t *testing.T) (backup *API, backupFake, primaryFake *fakeBackend) {
	t.Helper()
	primary, pf, _ := testAPI(t)
	pf.cluster = ClusterState{View: 9, Primary: true, PrimaryIndex: 0}
	srv := httptest.NewServer(primary)
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	backup, bf, _ := testAPI(t, func(o *Options) {
		o.Forwarding = true
		o.PrimaryHTTPAddress = func(i int) (string, bool) { return addr, i == 0 }
	})
	bf.cluster = ClusterState{View: 3, Primary: false, PrimaryIndex: 0}
	backup.forward.retry, backup.forward.budget = 5*time.Millisecond, 2*time.Second
	return backup, bf, pf
}

func ran(f *fakeBackend, code wire.CommandCode) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.code == code {
			n++
		}
	}
	return n
}

func TestBackupForwardsControlPlane(t *testing.T) {
	backup, bf, pf := twoNodes(t)
	auth := bearer(t, backup, 4)
	details := wire.StreamDetails{StreamHeader: wire.StreamHeader{ID: 0, CreatedAtMicros: createdAt, Name: []byte("orders")}}
	pf.on(wire.CodeCreateStream, details.Append(nil), nil)

	w := serve(backup, "POST", "/streams", auth, `{"name":"orders"}`)
	checkAnswer(t, "POST /streams at a backup", w.Code, w.Body.String(), 200,
		`{"id":0,"created_at":1733400000000000,"name":"orders","size":"0 B","messages_count":0,"topics_count":0,"topics":[],"options":{}}`)
	if w.Header().Get("Iggy-View") != "9" || ran(bf, wire.CodeCreateStream) != 0 || pf.last(t, wire.CodeCreateStream).caller.UserID != 4 {
		t.Fatalf("the write was not the primary's: view %q, backup ran it %d times", w.Header().Get("Iggy-View"), ran(bf, wire.CodeCreateStream))
	}
	// Reads are served locally unless linearizable.
	serve(backup, "GET", "/streams", auth, "")
	if ran(bf, wire.CodeGetStreams) != 1 || ran(pf, wire.CodeGetStreams) != 0 {
		t.Fatal("a serializable read left the backup")
	}
	serve(backup, "GET", "/streams?consistency=linearizable", auth, "")
	if ran(bf, wire.CodeGetStreams) != 1 || ran(pf, wire.CodeGetStreams) != 1 {
		t.Fatal("a linearizable read was not forwarded")
	}
	// Messages and offsets are never forwarded.
	serve(backup, "PUT", "/streams/0/topics/0/consumer-offsets", auth, `{"offset":1}`)
	if ran(bf, wire.CodeStoreConsumerOffset) != 1 || ran(pf, wire.CodeStoreConsumerOffset) != 0 {
		t.Fatal("an offset write was forwarded")
	}
	// The bearer is checked here first; a relayed request is never relayed again.
	if w := serve(backup, "POST", "/streams", "", `{"name":"x"}`); w.Code != 401 || ran(pf, wire.CodeCreateStream) != 1 {
		t.Fatalf("no bearer at a backup: %d", w.Code)
	}
	w = serve(backup, "POST", "/streams", auth, `{"name":"x"}`, "Iggy-Forwarded", "1")
	if w.Code != 503 || !strings.Contains(w.Body.String(), `"id":58`) || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("a relayed request at a backup: %d %s", w.Code, w.Body)
	}
}

func TestForwardRetriesWhileThePrimaryRefuses(t *testing.T) {
	backup, _, pf := twoNodes(t)
	var refusals atomic.Int32
	pf.replies[wire.CodeDeleteStream] = func(Caller, []byte) ([]byte, error) {
		if refusals.Add(1) <= 3 {
			return nil, wire.ErrTransientNotAccepted
		}
		return nil, nil
	}
	if w := serve(backup, "DELETE", "/streams/0", bearer(t, backup, 0), ""); w.Code != 204 || refusals.Load() != 4 {
		t.Fatalf("after 3 refusals: %d, %d tries", w.Code, refusals.Load())
	}
	// Other answers, errors included, are relayed as they are.
	pf.on(wire.CodeDeleteStream, nil, wire.ErrStreamIdNotFound)
	w := serve(backup, "DELETE", "/streams/0", bearer(t, backup, 0), "")
	checkAnswer(t, "a relayed error", w.Code, w.Body.String(), 404,
		`{"id":1009,"code":"stream_id_not_found","reason":"Stream with ID: 0 was not found.","field":"stream_id"}`)
}

func TestForwardBounds(t *testing.T) {
	backup, bf, _ := twoNodes(t)
	auth := bearer(t, backup, 0)
	backup.forward.slots = make(chan struct{}) // no room
	w := serve(backup, "DELETE", "/streams/0", auth, "")
	checkAnswer(t, "forwards at their cap", w.Code, w.Body.String(), 503,
		`{"id":503,"code":"forward_busy","reason":"node is at its forward budget; retry with backoff","field":null}`)

	backup.forward.slots = make(chan struct{}, forwardsMax)
	backup.opts.HTTP.RequestSizeMaxBytes = 10
	w = serve(backup, "POST", "/streams", auth, `{"name":"longer than ten bytes"}`)
	checkAnswer(t, "a body over the limit at a backup", w.Code, w.Body.String(), 413,
		`{"id":413,"code":"payload_too_large","reason":"request body exceeds http.max_request_size","field":null}`)
	backup.opts.HTTP.RequestSizeMaxBytes = 2_000_000
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	backup.opts.PrimaryHTTPAddress = func(int) (string, bool) { return dead, true }
	backup.forward.budget = 100 * time.Millisecond
	w = serve(backup, "DELETE", "/streams/0", auth, "")
	checkAnswer(t, "no primary listening", w.Code, w.Body.String(), 503,
		`{"id":503,"code":"no_reachable_primary","reason":"no primary accepted the request within the forward budget; retry","field":null}`)
	bf.cluster.PrimaryIndex = -1
	if w := serve(backup, "DELETE", "/streams/0", auth, ""); w.Code != 503 || !strings.Contains(w.Body.String(), "no_reachable_primary") {
		t.Fatalf("no primary known: %d %s", w.Code, w.Body)
	}
}

func TestForwardTLSPinsTheNodesCertificate(t *testing.T) {
	own, err := tlsterm.SelfSigned(testStart)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlsterm.SelfSigned(testStart)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ForwardTLSConfig(own)
	if err := cfg.VerifyPeerCertificate(own.Certificate, nil); err != nil {
		t.Fatalf("the node's own certificate: %v", err)
	}
	if err := cfg.VerifyPeerCertificate(other.Certificate, nil); err == nil {
		t.Fatal("another certificate accepted")
	}
}
