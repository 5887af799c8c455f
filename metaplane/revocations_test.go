package metaplane

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// revoke has plane p revoke tokens at nowMicros, the group's frames delivered
// until the answer comes (g nil: a single node, which answers at once).
func revoke(t *testing.T, g *testGroup, p *Plane, nowMicros uint64, tokens ...metadata.Revocation) error {
	t.Helper()
	answered, got := false, error(nil)
	p.RevokeTokens(tokens, nowMicros, func(err error) {
		if answered {
			t.Fatal("RevokeTokens answered twice")
		}
		answered, got = true, err
	})
	for range 100 {
		if answered || g == nil {
			break
		}
		g.deliver(nil)
	}
	if !answered {
		t.Fatal("RevokeTokens never answered")
	}
	return got
}

// settle ticks and delivers until every replica applied the primary's commit.
func (g *testGroup) settle() {
	g.t.Helper()
	for range 500 {
		g.deliver(nil)
		top := g.planes[0].Applied().Op
		if g.planes[1].Applied().Op == top && g.planes[2].Applied().Op == top {
			return
		}
		for _, p := range g.planes {
			p.Tick()
		}
	}
	g.t.Fatal("the backups never applied the primary's commits")
}

func TestRevokeTokensOnEveryReplica(t *testing.T) {
	g := newTestGroup(t)
	primary := g.planes[0]
	const now = 1_700_000_000_000_000
	tok := metadata.Revocation{JTI: "019388a2-7c00-7000-8000-000000000001", ExpiryMicros: now + 3_665_000_000}
	if err := revoke(t, g, primary, now, tok); err != nil {
		t.Fatal(err)
	}
	g.settle()
	digest := primary.Digest()
	for i, p := range g.planes {
		if !p.RevokedTokens().Revoked(tok.JTI, now) || !p.State().TokenRevoked(tok.JTI, now) {
			t.Fatalf("replica %d: the token is not revoked", i)
		}
		if p.RevokedTokens().Revoked(tok.JTI, tok.ExpiryMicros) {
			t.Fatalf("replica %d: the token is revoked past its expiry", i)
		}
		if p.Digest() != digest {
			t.Fatalf("replica %d holds another state", i)
		}
	}
	if primary.RevokeTokenOps() != 1 {
		t.Fatalf("%d ops proposed", primary.RevokeTokenOps())
	}
	// A backup proposes nothing: the caller retries at the primary.
	if err := revoke(t, g, g.planes[1], now, tok); !errors.Is(err, ErrNotPrimary) {
		t.Fatalf("at a backup: %v", err)
	}
	// Tokens no op can carry are refused before anything is proposed.
	if err := revoke(t, g, primary, now); !errors.Is(err, wire.ErrInvalidCommand) {
		t.Fatalf("no tokens: %v", err)
	}
	if err := revoke(t, g, primary, now, metadata.Revocation{JTI: "", ExpiryMicros: now + 1}); !errors.Is(err, wire.ErrInvalidCommand) {
		t.Fatalf("empty jti: %v", err)
	}
	// Revoked again (a retried logout): committed, nothing changes.
	if err := revoke(t, g, primary, now+1, tok); err != nil {
		t.Fatal(err)
	}
	// The first op applied past the expiry, whatever it is, takes the entry out
	// of the state and of the copies alike.
	body, _ := wire.AppendName(nil, []byte("later"))
	primary.Propose(vsr.Proposal{Operation: wire.OperationCreateStream, UserID: metadata.RootUserID}, body, tok.ExpiryMicros, func(*Commit, error) {})
	g.settle()
	for i, p := range g.planes {
		if p.RevokedTokens().Len() != 0 || p.State().RevokedTokens().Len() != 0 {
			t.Fatalf("replica %d keeps an expired entry (%d, state %d)", i, p.RevokedTokens().Len(), p.State().RevokedTokens().Len())
		}
	}
}

// TestRevokedTokensFullAtThePlane fills the table through the plane, at the
// production bound: the op past it is answered ErrRevokedTokensFull, and the copy
// other goroutines read holds exactly the state's entries.
func TestRevokedTokensFullAtThePlane(t *testing.T) {
	if testing.Short() {
		t.Skip("fills the table")
	}
	p := openSingle(t, metadata.NewState("iggy", "x", 1))
	const now = 1_700_000_000_000_000
	n := 0
	for i := 0; n < metadata.RevokedTokensMax; i++ {
		tokens := make([]metadata.Revocation, metadata.RevokeTokensPerOpMax)
		for k := range tokens {
			tokens[k] = metadata.Revocation{JTI: fmt.Sprintf("jti-%d", n), ExpiryMicros: now + 3_665_000_000}
			n++
		}
		if err := revoke(t, nil, p, now+uint64(i), tokens...); err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	err := revoke(t, nil, p, now+100, metadata.Revocation{JTI: "one-more", ExpiryMicros: now + 3_665_000_000})
	if !errors.Is(err, ErrRevokedTokensFull) {
		t.Fatalf("past the bound: %v", err)
	}
	if p.RevokedTokens().Revoked("one-more", now+100) || p.RevokedTokens().Len() != metadata.RevokedTokensMax {
		t.Fatal("the refused op changed the copy")
	}
	copied := p.RevokedTokens().Snapshot()
	if fmt.Sprint(collect(&copied)) != fmt.Sprint(collect(p.State().RevokedTokens())) || !p.RevokedTokens().Equal(p.State().RevokedTokens()) {
		t.Fatal("the copy differs from the state's table")
	}
}

func collect(t *metadata.RevocationTable) []metadata.Revocation {
	var all []metadata.Revocation
	for r := range t.All() {
		all = append(all, r)
	}
	return all
}

// openSingle opens a single node's plane over state.
func openSingle(t *testing.T, state *metadata.State) *Plane {
	t.Helper()
	h := &memHost{answers: map[uint64]Answer{}}
	p, err := Open(Config{ServerVersion: "test"}, &Recovered{Fresh: true, Snapshot: &Snapshot{State: state, Table: vsr.NewClientTable(64)}}, h)
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	if err := p.Replay(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRevokedTokensFromTheSnapshot: a plane opened from a snapshot that holds
// revoked tokens answers for them at once (a restart). An installed state
// replaces the copy too (the simulator's installs check it).
func TestRevokedTokensFromTheSnapshot(t *testing.T) {
	const now = 1_700_000_000_000_000
	p := openSingle(t, metadata.NewState("iggy", "x", 1))
	if err := revoke(t, nil, p, now, metadata.Revocation{JTI: "kept", ExpiryMicros: now + 60_000_000}); err != nil {
		t.Fatal(err)
	}
	snap, err := DecodeSnapshot(p.Snapshot(), 64)
	if err != nil {
		t.Fatal(err)
	}
	reopened := openSingle(t, snap.State)
	if !reopened.RevokedTokens().Revoked("kept", now) {
		t.Fatal("a reopened plane forgot a revoked token")
	}
}

// TestRevokedTokensReadFromOtherGoroutines runs bearer checks beside the plane's
// applies (go test -race finds a missing lock).
func TestRevokedTokensReadFromOtherGoroutines(t *testing.T) {
	const now = 1_700_000_000_000_000
	p := openSingle(t, metadata.NewState("iggy", "x", 1))
	r := p.RevokedTokens()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					r.Revoked("jti-1", now)
				}
			}
		})
	}
	for i := range 50 {
		if err := revoke(t, nil, p, now+uint64(i), metadata.Revocation{JTI: fmt.Sprint("jti-", i), ExpiryMicros: now + uint64(i) + 30}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	// Applied at now+49, the entries of the ops before now+20 expired and left.
	if r.Revoked("jti-19", now+49) || !r.Revoked("jti-49", now+49) || r.Len() != 30 {
		t.Fatalf("after 50 ops: %d held", r.Len())
	}
}
