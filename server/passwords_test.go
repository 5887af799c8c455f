package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestLoginDoesNotStallShardZero: while a login's password is being verified, shard 0
// goes on serving. With one shard every metadata request lands there; the test holds
// the verification, has a logged-in client create a stream and list the streams, and
// only then lets the login finish.
func TestLoginDoesNotStallShardZero(t *testing.T) {
	s := testServer(t, t.TempDir(), 1)
	root := dialRoot(t, s)
	ctx := testContext(t)

	held := newGate(t)
	v := s.handlers[0].meta.Passwords()
	v.Intercept(func(hash string, password []byte) bool {
		held.hold()
		return metadata.VerifyPassword(hash, password)
	}, nil)

	anon := dialAnonymous(t, s)
	loginDone := make(chan error, 1)
	go func() {
		_, err := anon.Login(ctx, "iggy", "iggy")
		loginDone <- err
	}()
	held.awaitReached(t, "the login's password at the verifier")
	if _, err := root.CreateStream(ctx, "served-meanwhile"); err != nil {
		t.Fatalf("create stream while a login is verified: %v", err)
	}
	streams, err := root.GetStreams(ctx)
	if err != nil || len(streams) != 1 || string(streams[0].Name) != "served-meanwhile" {
		t.Fatalf("streams while a login is verified: %+v, %v", streams, err)
	}
	select {
	case err := <-loginDone:
		t.Fatalf("the login finished while its password was held: %v", err)
	default:
	}
	held.open()
	select {
	case err := <-loginDone:
		mustOK(t, "login after the verification", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the login did not finish after its verification")
	}
	if _, err := anon.GetStreams(ctx); err != nil {
		t.Fatalf("the logged-in client: %v", err)
	}
}

// TestLoginVerifiedAgainstAStalePassword: a user's password changes while a login with
// the old one is being verified. The verdict was reached against a hash that no longer
// holds, so the login is verified again against the new one, and refused.
func TestLoginVerifiedAgainstAStalePassword(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	root := dialRoot(t, s)
	ctx := testContext(t)
	if _, err := root.CreateUser(ctx, "alice", "old-password", wire.UserActive, nil); err != nil {
		t.Fatal(err)
	}

	held := newGate(t)
	var first sync.Once
	v := s.handlers[0].meta.Passwords()
	v.Intercept(func(hash string, password []byte) bool {
		isFirst := false
		first.Do(func() { isFirst = true })
		if isFirst { // the login's; the ChangePassword's current password is not held
			held.hold()
		}
		return metadata.VerifyPassword(hash, password)
	}, nil)

	anon := dialAnonymous(t, s)
	loginDone := make(chan error, 1)
	go func() {
		_, err := anon.Login(ctx, "alice", "old-password")
		loginDone <- err
	}()
	held.awaitReached(t, "the login's password at the verifier")
	// ChangePassword's argon2id work goes to the other worker.
	if err := root.ChangePassword(ctx, wire.StringIdentifier([]byte("alice")), "old-password", "new-password"); err != nil {
		t.Fatalf("change password: %v", err)
	}
	held.open()
	select {
	case err := <-loginDone:
		var ev *client.EvictionError
		if !errors.As(err, &ev) || ev.Reason != wire.EvictionInvalidCredentials {
			t.Fatalf("login with the replaced password: %v, want eviction %v", err, wire.EvictionInvalidCredentials)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the login did not finish after its verification")
	}
	dialAs(t, s, "alice", "new-password")
}

// TestShutdownDuringLogins: clients log in over and over on every shard while the
// server shuts down, some of them held in the verifier. The shutdown must come out
// clean: logins still waiting are answered or dropped, and every request buffer they
// held goes back to its arena (the runtime's leak check would fail Shutdown).
func TestShutdownDuringLogins(t *testing.T) {
	dir := t.TempDir()
	cfg := defaultSetup()
	cfg.TCPAddress, cfg.SystemPath, cfg.ShardCount, cfg.PinCPUs = "127.0.0.1:0", dir, 3, false
	s, err := start(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	held := newGate(t) // opened as the shutdown starts: logins wait in the verifier
	v := s.handlers[0].meta.Passwords()
	v.Intercept(func(hash string, password []byte) bool {
		held.hold()
		return metadata.VerifyPassword(hash, password)
	}, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 9 {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := client.Dial(ctx, s.Addr().String(), client.WithCredentials("iggy", "iggy"),
					client.WithRequestTimeout(5*time.Second))
				if err != nil {
					return // the server is going away
				}
				c.Close()
			}
		})
	}
	held.awaitReached(t, "a login at the verifier")
	// Every connection sends a login that waits in the verifier.
	waitForCondition(t, "logins waiting in the verifier", func() bool {
		return v.Waiting() >= 5
	})
	// The shards stop while the logins are held, so shard 0 abandons them; only
	// then may the verifier finish (Shutdown waits for it after the shards).
	shutdown := make(chan error, 1)
	go func() { shutdown <- s.Shutdown(ctx) }()
	select {
	case <-s.rt.Done():
	case <-ctx.Done():
		t.Fatal("the shards did not stop while logins were held in the verifier")
	}
	held.open()
	if err := <-shutdown; err != nil {
		t.Fatalf("Shutdown during logins: %v", err)
	}
	cancel()
	wg.Wait()
	if n := s.handlers[0].meta.AbandonedChecks(); n == 0 {
		t.Error("no login was waiting in the verifier when shard 0 stopped: the test missed its case")
	}
}

// waitForCondition polls cond for up to 10 s; for states no event announces.
func waitForCondition(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
