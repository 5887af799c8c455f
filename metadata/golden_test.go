package metadata

import (
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.hex from the current encoder")

// goldenState is a small state touching every part of the snapshot format.
func goldenState(t testing.TB) *State {
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
	return f.s
}

// TestSnapshotGolden pins the on-disk snapshot format: a change to the encoder that
// alters these bytes needs a new SnapshotVersion (and a decoder for the old one).
// Regenerate with -update only when the format change is intended.
func TestSnapshotGolden(t *testing.T) {
	got := goldenState(t).AppendSnapshot(nil, 12)
	path := filepath.Join("testdata", "snapshot_v1.hex")
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
	if err != nil || op != 12 {
		t.Fatal(op, err)
	}
	if _, reason := s.CheckToken([]byte("token-text"), tsStart); reason != wire.EvictionReserved {
		t.Fatalf("token after restore: %v", reason)
	}
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
