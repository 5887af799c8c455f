package server

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/metafiles"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestTokenNeverReachesTheDisk: a personal access token is shown to its client and
// kept nowhere under the data directory (journal, snapshot, the client table's
// cached replies in it), before a snapshot, after one and after a restart; it still
// logs in after the restart, and a retry of its request gets it again from memory.
// Everything the server created there is its owner's alone (0600 and 0700).
func TestTokenNeverReachesTheDisk(t *testing.T) {
	dir := t.TempDir()
	s := testServer(t, dir, 2)
	ctx := testContext(t)
	root := dialRoot(t, s)
	token, err := root.CreatePersonalAccessToken(ctx, "ci", 0)
	mustOK(t, "CreatePersonalAccessToken", err)

	// A raw client whose last request, a CreatePersonalAccessToken, stays cached in
	// the client table through the snapshot below.
	raw := dialRaw(t, s)
	rawClient := wire.Uint128{Lo: 0x7a7, Hi: 1}
	epoch := raw.login(rawClient)
	createBody, err := (&wire.CreatePersonalAccessToken{Name: []byte("raw")}).Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	createToken := rawRequest{client: rawClient, request: 1, session: epoch, op: wire.OperationCreatePersonalAccessToken, body: createBody}
	raw.send(createToken)
	rawToken := createdToken(t, raw, "CreatePersonalAccessToken")
	raw.send(createToken) // a retry: the cached reply, the token added back from memory
	if again := createdToken(t, raw, "its retry"); again != rawToken {
		t.Fatalf("the retry got token %q, the request %q", again, rawToken)
	}
	wantNoFileHolds(t, dir, token, rawToken)

	// More than SnapshotIntervalOps (16) commits: a snapshot is written, and the
	// last of them waited for it.
	for i := range 20 {
		_, err := root.CreateStream(ctx, "s"+strconv.Itoa(i))
		mustOK(t, "CreateStream", err)
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "metadata", metafiles.SnapshotFileName)); err != nil {
		t.Fatal(err)
	} else if head, err := metaplane.SplitSnapshot(raw); err != nil || head.At.Op < 16 {
		t.Fatalf("snapshot at op %d (%v), want one after the streams", head.At.Op, err)
	}
	wantNoFileHolds(t, dir, token, rawToken)

	root.Close()
	stopServer(t, s)
	s = testServer(t, dir, 2)
	wantNoFileHolds(t, dir, token, rawToken)
	for _, tok := range []string{token, rawToken} {
		pat, err := client.Dial(ctx, s.Addr().String(), client.WithPersonalAccessToken(tok))
		mustOK(t, "login with a token after a restart", err)
		pat.Close()
	}
}

// createdToken reads a CreatePersonalAccessToken reply from r and returns its token.
func createdToken(t *testing.T, r *rawConn, what string) string {
	t.Helper()
	h, body := r.reply()
	payload, result, err := wire.SplitResult(body)
	if h.Status != 0 || err != nil || result != 0 {
		t.Fatalf("%s: status %d result %d (%v)", what, h.Status, result, err)
	}
	var tok wire.CreatedToken
	if err := tok.Decode(payload); err != nil {
		t.Fatalf("%s: reply payload % x: %v", what, payload, err)
	}
	return string(tok.Token)
}

// wantNoFileHolds fails if a file under dir contains one of secrets, or if a file
// or directory the server created there is open to anyone but its owner.
func wantNoFileHolds(t *testing.T, dir string, secrets ...string) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s has mode %v, want no access for group and others", path, perm)
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, secret := range secrets {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the token %q", path, secret)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("no file under the data directory")
	}
}
