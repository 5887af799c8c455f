package replica

import (
	"errors"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

func auth(t testing.TB, secret, previous string) *wire.HandshakeAuth {
	t.Helper()
	a, err := wire.NewHandshakeAuth([]byte(secret), []byte(previous))
	if err != nil {
		t.Fatal(err)
	}
	return &a
}

var (
	secretA = strings.Repeat("a", 32)
	secretB = strings.Repeat("b", 32)
	nonceD  = [32]byte{1, 2, 3}
	nonceA  = [32]byte{9, 8, 7}
)

// run plays the handshake between a dialer and an acceptor and returns each side's
// last step.
func run(t *testing.T, dialerCfg, acceptorCfg HandshakeConfig, peer uint8) (dialer, acceptor Step, a *Acceptor) {
	t.Helper()
	d, hello, err := NewDialer(dialerCfg, peer, nonceD)
	if err != nil {
		t.Fatal(err)
	}
	a = NewAcceptor(acceptorCfg, nonceA)
	acceptor = a.Receive(hello)
	if acceptor.Send == nil {
		return Step{}, acceptor, a
	}
	dialer = d.Receive(acceptor.Send)
	if dialer.Send != nil && acceptor.Err == nil && !acceptor.Done {
		acceptor = a.Receive(dialer.Send)
	}
	return dialer, acceptor, a
}

func statusOf(err error) (wire.HandshakeStatus, bool) {
	var he *HandshakeError
	if errors.As(err, &he) {
		return he.Status, true
	}
	return 0, false
}

func TestHandshake(t *testing.T) {
	cluster := wire.ClusterID("prod")
	cfg := func(self uint8, a *wire.HandshakeAuth) HandshakeConfig {
		return HandshakeConfig{Cluster: cluster, Self: self, ReplicaCount: 3, Auth: a}
	}
	exporter1, exporter2 := &[32]byte{1}, &[32]byte{2}
	withTLS := func(c HandshakeConfig, e *[32]byte) HandshakeConfig { c.TLSExporter = e; return c }
	cases := []struct {
		name                string
		dialer, acceptor    HandshakeConfig
		peer                uint8
		dialerErr, accepErr wire.HandshakeStatus // 255: no error
		dialerDone, accDone bool
	}{
		{"no auth", cfg(0, nil), cfg(1, nil), 1, 255, 255, true, true},
		{"auth", cfg(0, auth(t, secretA, "")), cfg(2, auth(t, secretA, "")), 2, 255, 255, true, true},
		{"rotation step 1: the new key is accepted before anyone signs with it", cfg(1, auth(t, secretA, "")), cfg(2, auth(t, secretA, secretB)), 2,
			255, 255, true, true},
		{"rotation: a node signing with the new key fails a peer that knows only the old", cfg(1, auth(t, secretA, "")), cfg(2, auth(t, secretB, secretA)), 2,
			wire.HandshakeMACMismatch, 255, false, false},
		{"rotation: both hold the new key, one the old as previous", cfg(1, auth(t, secretB, secretA)), cfg(2, auth(t, secretB, "")), 2,
			255, 255, true, true},
		{"another secret", cfg(0, auth(t, secretA, "")), cfg(1, auth(t, secretB, "")), 1, wire.HandshakeMACMismatch, 255, false, false},
		{"another cluster", HandshakeConfig{Cluster: wire.ClusterID("staging"), Self: 0, ReplicaCount: 3}, cfg(1, nil), 1,
			wire.HandshakeClusterMismatch, wire.HandshakeClusterMismatch, false, false},
		{"auth required", cfg(0, nil), cfg(1, auth(t, secretA, "")), 1, 255, wire.HandshakeAuthRequired, false, false},
		{"TLS sessions differ", withTLS(cfg(0, auth(t, secretA, "")), exporter1), withTLS(cfg(1, auth(t, secretA, "")), exporter2), 1,
			wire.HandshakeMACMismatch, 255, false, false},
		{"TLS session bound", withTLS(cfg(0, auth(t, secretA, "")), exporter1), withTLS(cfg(1, auth(t, secretA, "")), exporter1), 1,
			255, 255, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, a, acc := run(t, tc.dialer, tc.acceptor, tc.peer)
			check := func(side string, step Step, want wire.HandshakeStatus, done bool) {
				t.Helper()
				got, failed := statusOf(step.Err)
				if want == 255 && failed {
					t.Fatalf("%s refused: %v", side, step.Err)
				}
				if want != 255 && (!failed || got != want) {
					t.Fatalf("%s: %v, want a refusal with %s", side, step.Err, want)
				}
				if step.Done != done {
					t.Fatalf("%s done %v, want %v", side, step.Done, done)
				}
			}
			check("dialer", d, tc.dialerErr, tc.dialerDone)
			check("acceptor", a, tc.accepErr, tc.accDone)
			if tc.accDone && acc.Peer != tc.dialer.Self {
				t.Fatalf("acceptor took the dialer for replica %d, not %d", acc.Peer, tc.dialer.Self)
			}
		})
	}
}

func TestHandshakeDirectionalRule(t *testing.T) {
	cluster := wire.ClusterID("prod")
	if _, _, err := NewDialer(HandshakeConfig{Cluster: cluster, Self: 2, ReplicaCount: 3}, 1, nonceD); err == nil {
		t.Fatal("a replica dialed a lower id")
	}
	// A Hello from a higher id (a peer breaking the rule) is refused with a status.
	var hello [256]byte
	wire.PutReplicaHello(hello[:], cluster, 2, nil)
	step := NewAcceptor(HandshakeConfig{Cluster: cluster, Self: 1, ReplicaCount: 3}, nonceA).Receive(hello[:])
	if s, _ := statusOf(step.Err); s != wire.HandshakeDirectionalRule || step.Send == nil {
		t.Fatalf("%v, %d bytes sent; want DirectionalRule told to the dialer", step.Err, len(step.Send))
	}
	var challenge wire.HandshakeHeader
	copy(wire.HeaderBytes(&challenge)[:], step.Send)
	if challenge.Command != wire.CommandReplicaChallenge || challenge.Status != wire.HandshakeDirectionalRule || challenge.HasNonce() {
		t.Fatalf("the refusal is %+v", challenge)
	}
}

func TestHandshakeRefusesWhatIsNotAHandshake(t *testing.T) {
	cluster := wire.ClusterID("prod")
	cfg := HandshakeConfig{Cluster: cluster, Self: 1, ReplicaCount: 3, Auth: auth(t, secretA, "")}
	var commit [256]byte
	binaryPutSize(commit[:])
	commit[60] = byte(wire.CommandCommit)
	if s, _ := statusOf(NewAcceptor(cfg, nonceA).Receive(commit[:]).Err); s != wire.HandshakeUnknownCommand {
		t.Fatalf("a Commit as first frame: %s, want UnknownCommand", s)
	}
	if s, _ := statusOf(NewAcceptor(cfg, nonceA).Receive(commit[:100]).Err); s != wire.HandshakeUnknownCommand {
		t.Fatalf("a short frame: %s, want UnknownCommand", s)
	}
	// A Finish whose MAC was tampered with.
	d, hello, _ := NewDialer(HandshakeConfig{Cluster: cluster, Self: 0, ReplicaCount: 3, Auth: auth(t, secretA, "")}, 1, nonceD)
	a := NewAcceptor(cfg, nonceA)
	finish := d.Receive(a.Receive(hello).Send).Send
	tampered := append([]byte(nil), finish...)
	tampered[160] ^= 1
	if step := a.Receive(tampered); step.Done || step.Send != nil {
		t.Fatalf("a tampered Finish: %+v", step)
	} else if s, _ := statusOf(step.Err); s != wire.HandshakeMACMismatch {
		t.Fatalf("a tampered Finish: %s, want MacMismatch (logged, not sent)", s)
	}
}

func binaryPutSize(b []byte) { b[48], b[49] = 0, 1 } // size 256, little endian

// FuzzAcceptor: any bytes as the dialer's frames end in a verdict, never a panic,
// and an acceptor never finishes a handshake with auth on for frames not MACed
// with the secret.
func FuzzAcceptor(f *testing.F) {
	cluster := wire.ClusterID("prod")
	var hello [256]byte
	wire.PutReplicaHello(hello[:], cluster, 0, &nonceD)
	f.Add(hello[:], hello[:])
	f.Fuzz(func(t *testing.T, first, second []byte) {
		a := NewAcceptor(HandshakeConfig{Cluster: cluster, Self: 1, ReplicaCount: 3, Auth: auth(t, secretA, "")}, nonceA)
		step := a.Receive(first)
		if step.Done {
			t.Fatal("an authenticated handshake finished on one frame")
		}
		if step.Err == nil {
			if step = a.Receive(second); step.Done {
				t.Fatal("a Finish without the secret's MAC was accepted")
			}
		}
	})
}
