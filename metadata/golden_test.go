package metadata

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.hex from the current encoder")

// goldenState is a small state touching every part of the snapshot format; the
// revoked tokens are the part version 2 added.
func goldenState(t testing.TB, revocations bool) *State {
	f := newFixture(t)
	f.must(wire.OperationCreateUser, root, createUser("alice", &wire.Permissions{
		Global:  wire.GlobalPermissions{ReadStreams: true},
		Streams: []wire.StreamPermissions{{StreamID: 0, ManageStream: true, Topics: []wire.TopicPermissions{{TopicID: 0, PollMessages: true}}}},
	}))
	f.must(wire.OperationCreatePersonalAccessToken, alice, tokenBody("ci", 3_600_000_000, "token-text"))
	f.must(wire.OperationCreateStream, root, createStream("orders"))
	f.must(wire.OperationCreateTopic, root, createTopic(num(0), 2, "eu", option("segment_size", wire.HeaderString, []byte("128MiB"))))
	f.must(wire.OperationPurgeTopic, root, topicBody(num(0), num(0)))
	f.must(wire.OperationCreateConsumerGroup, root, createGroup(num(0), num(0), "billing"))
	f.applyAs(wire.OperationJoinConsumerGroup, root, 7, groupBody(num(0), num(0), num(0)))
	if revocations {
		f.must(wire.OperationRevokeTokens, root, body(AppendRevokeTokens(nil, []Revocation{
			{JTI: "019388a2-7c00-7000-8000-000000000001", ExpiryMicros: goldenRevokedUntil},
			{JTI: "019388a2-7c00-7000-8000-000000000002", ExpiryMicros: goldenRevokedUntil},
		})))
	}
	return f.s
}

// goldenRevokedUntil is the golden state's revoked tokens' expiry: an hour past
// the fixture's clock.
const goldenRevokedUntil = tsStart + 3_600_000_000

// TestSnapshotGolden pins the on-disk snapshot format: a change to the encoder that
// alters these bytes needs a new SnapshotVersion (and a decoder for the old one).
// Regenerate with -update only when the format change is intended.
func TestSnapshotGolden(t *testing.T) {
	got := goldenState(t, true).AppendSnapshot(nil, 13)
	path := filepath.Join("testdata", "snapshot_v2.hex")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(hex.Dump(got)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if dump := hex.Dump(got); dump != string(want) {
		t.Fatalf("snapshot bytes changed:\n%s\nwant:\n%s", dump, want)
	}
	s, op, err := DecodeSnapshot(got)
	if err != nil || op != 13 {
		t.Fatal(op, err)
	}
	if _, reason := s.CheckToken([]byte("token-text"), tsStart); reason != wire.EvictionReserved {
		t.Fatalf("token after restore: %v", reason)
	}
	const jti = "019388a2-7c00-7000-8000-000000000002"
	if !s.TokenRevoked(jti, goldenRevokedUntil-1) || s.TokenRevoked(jti, goldenRevokedUntil) {
		t.Fatal("revoked token after restore")
	}
}

// TestSnapshotVersion1 reads a snapshot written before the revoked tokens
// (testdata/snapshot_v1.hex, the format's first version, never rewritten): the
// state it holds, with no revoked token, written again as version 2.
func TestSnapshotVersion1(t *testing.T) {
	v1 := readHexDump(t, filepath.Join("testdata", "snapshot_v1.hex"))
	if binary.LittleEndian.Uint32(v1[4:]) != 1 {
		t.Fatal("testdata/snapshot_v1.hex is not a version 1 snapshot")
	}
	s, op, err := DecodeSnapshot(v1)
	if err != nil || op != 12 {
		t.Fatal(op, err)
	}
	if s.RevokedTokens().Len() != 0 {
		t.Fatal("a version 1 snapshot holds revoked tokens")
	}
	if got, want := s.AppendSnapshot(nil, 12), goldenState(t, false).AppendSnapshot(nil, 12); !bytes.Equal(got, want) {
		t.Fatalf("version 1 read back as another state:\n%s\nwant:\n%s", hex.Dump(got), hex.Dump(want))
	}
	// Version 1 with the revocation section's bytes appended is not version 1.
	body := append(bytes.Clone(v1[:len(v1)-8]), 0, 0, 0, 0)
	if _, _, err := DecodeSnapshot(reseal(body)); err == nil {
		t.Fatal("a version 1 snapshot with trailing bytes decodes")
	}
}

// readHexDump reads a file written by hex.Dump back into its bytes.
func readHexDump(t testing.TB, path string) []byte {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	for line := range strings.Lines(string(text)) {
		if len(line) < 10 {
			continue
		}
		hexPart, _, _ := strings.Cut(line[10:], "|")
		raw, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(hexPart), " ", ""))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b = append(b, raw...)
	}
	return b
}

// TestPurity is the lint of DESIGN.md for this package: no clock, no randomness, no
// files or sockets outside tests.
func TestPurity(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{"time.Now", `"math/rand`, `"crypto/rand"`, `"os"`, `"net"`, `"syscall"`, "iggy-shard/ring", "iggy-shard/shard", "iggy-shard/segment"}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range forbidden {
			if strings.Contains(string(src), f) {
				t.Errorf("%s uses %s", name, f)
			}
		}
	}
}
