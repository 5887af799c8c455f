package server

import (
	"context"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestHotPathsDoNotAllocate: once warm, a send and a poll allocate nothing, in the
// client or in any shard of the in-process server (testing.AllocsPerRun counts
// every goroutine's allocations).
func TestHotPathsDoNotAllocate(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts need a quiet process")
	}
	s := testServer(t, t.TempDir(), 2)
	c := dialRoot(t, s)
	ctx := testContext(t)
	_, err := c.CreateStream(ctx, "a")
	mustOK(t, "CreateStream", err)
	_, err = c.CreateTopic(ctx, client.NameID("a"), "t", 1, nil)
	mustOK(t, "CreateTopic", err)
	msgs := messages(10, "payload")
	for i := range msgs {
		msgs[i].ID = wire.Uint128{Lo: uint64(i + 1)} // a zero id would draw a random UUID
	}
	partitioning := wire.Partitioning{Kind: wire.PartitioningPartitionID}
	// A cancellable context costs the client an allocation per request (client doc).
	ctx = context.Background()
	send := func() {
		if _, err := c.SendMessages(ctx, client.NameID("a"), client.NameID("t"), partitioning, msgs); err != nil {
			t.Fatal(err)
		}
	}
	poll := wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.NameID("a"), TopicID: client.NameID("t"),
		Partition: wire.SomePartition(0), Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 10}
	pollOnce := func() {
		if _, err := c.PollMessages(ctx, &poll); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 50; i++ { // warm the free lists, buffers and maps
		send()
		pollOnce()
	}
	// A stray allocation of the runtime (a timer, the GC) may land in a run: the
	// bound is below one per request, where a per-request allocation would show.
	if n := testing.AllocsPerRun(200, send); n > 0.5 {
		t.Errorf("SendMessages: %.2f allocations per request", n)
	}
	if n := testing.AllocsPerRun(200, pollOnce); n > 0.5 {
		t.Errorf("PollMessages: %.2f allocations per request", n)
	}
}

func TestCoalesceContiguous(t *testing.T) {
	buf := []byte("0123456789abcdef")
	other := []byte("XYZ")
	tests := []struct {
		name  string
		parts [][]byte
		want  []string
	}{
		{"empty", nil, nil},
		{"one", [][]byte{buf[:4]}, []string{"0123"}},
		{"adjacent", [][]byte{buf[:4], buf[4:8], buf[8:16]}, []string{"0123456789abcdef"}},
		{"gap", [][]byte{buf[:4], buf[5:8]}, []string{"0123", "567"}},
		{"other array", [][]byte{buf[:4], other, buf[4:6]}, []string{"0123", "XYZ", "45"}},
		{"capacity cut", [][]byte{buf[:4:4], buf[4:8]}, []string{"0123", "4567"}},
		{"empty part kept apart", [][]byte{buf[:4], buf[4:4], buf[4:6]}, []string{"0123", "", "45"}},
	}
	for _, tc := range tests {
		got := coalesceContiguous(append([][]byte(nil), tc.parts...))
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %d parts %q, want %q", tc.name, len(got), got, tc.want)
		}
		for i := range got {
			if string(got[i]) != tc.want[i] {
				t.Fatalf("%s: part %d %q, want %q", tc.name, i, got[i], tc.want[i])
			}
		}
	}
}
