package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestKill9KeepsEveryAcknowledgedMessage: producers send, and an admin creates
// streams, while the server is killed with SIGKILL; after a restart every
// acknowledged message is there, in order, and nothing that was not sent; the
// metadata created before the kill is all there, and so is every stream whose
// creation was acknowledged (the journal's fdatasync runs off shard 0, but the reply
// still waits for it).
func TestKill9KeepsEveryAcknowledgedMessage(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, "--system-path", dir, "--shards", "2", "--pin-cpus=false")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := client.Dial(ctx, s.addr, client.WithCredentials("iggy", "iggy"))
	if err != nil {
		t.Fatal(err)
	}
	const partitions = 4
	for i := 0; i < 5; i++ {
		if _, err := admin.CreateStream(ctx, fmt.Sprintf("meta-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CreateStream(ctx, "load"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTopic(ctx, client.NameID("load"), "t", partitions, nil); err != nil {
		t.Fatal(err)
	}
	admin.Close()

	// One producer per partition, each numbering its batches; acked[p] is how many
	// batches of partition p were acknowledged.
	const batchMessages = 10
	var acked [partitions]int
	var mu sync.Mutex
	// progress wakes the test when a writer is acknowledged; a full channel already
	// holds a wake-up, so a writer never waits on it.
	progress := make(chan struct{}, 1)
	acknowledged := func() {
		select {
		case progress <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	for p := 0; p < partitions; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			c, err := client.Dial(ctx, s.addr, client.WithCredentials("iggy", "iggy"), client.WithRequestTimeout(5*time.Second))
			if err != nil {
				return
			}
			defer c.Close()
			msgs := make([]client.Message, batchMessages)
			for batch := 0; batch < 100_000; batch++ {
				for i := range msgs {
					msgs[i] = client.Message{Payload: []byte(fmt.Sprintf("p%d-b%d-m%d", p, batch, i))}
				}
				conf, err := c.SendMessages(ctx, client.NameID("load"), client.NameID("t"),
					wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: uint32(p)}, msgs)
				if err != nil {
					return // the server is gone
				}
				if conf.At(0).BaseOffset != uint64(batch*batchMessages) {
					t.Errorf("partition %d batch %d at offset %d", p, batch, conf.At(0).BaseOffset)
					return
				}
				mu.Lock()
				acked[p] = batch + 1
				mu.Unlock()
				acknowledged()
			}
		}(p)
	}
	// Metadata writes during the load: liveAcked streams live-0.. were acknowledged.
	var liveAcked int
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := client.Dial(ctx, s.addr, client.WithCredentials("iggy", "iggy"), client.WithRequestTimeout(5*time.Second))
		if err != nil {
			return
		}
		defer c.Close()
		for i := 0; i < 100_000; i++ {
			if _, err := c.CreateStream(ctx, fmt.Sprintf("live-%d", i)); err != nil {
				return // the server is gone
			}
			mu.Lock()
			liveAcked = i + 1
			mu.Unlock()
			acknowledged()
		}
	}()
	// Kill once every writer is in full swing: each partition has batches
	// acknowledged, 200 in all, and streams are being created.
	deadline := time.After(30 * time.Second)
	for {
		mu.Lock()
		total, least := 0, acked[0]
		for _, n := range acked {
			total, least = total+n, min(least, n)
		}
		ready := total >= 200 && least >= 10 && liveAcked >= 5
		mu.Unlock()
		if ready {
			break
		}
		select {
		case <-progress:
		case <-deadline:
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("writers not in full swing after 30 s: batches %v, streams %d", acked, liveAcked)
		}
	}
	s.stop(t, syscall.SIGKILL)
	wg.Wait()

	s2 := startServer(t, "--system-path", dir, "--shards", "3", "--pin-cpus=false")
	c, err := client.Dial(ctx, s2.addr, client.WithCredentials("iggy", "iggy"))
	if err != nil {
		t.Fatalf("login after restart: %v\n%s", err, s2.logText())
	}
	defer c.Close()
	streams, err := c.GetStreams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, st := range streams {
		if name := string(st.Name); strings.HasPrefix(name, "live-") {
			live[name] = true
		}
	}
	for i := range liveAcked {
		if !live[fmt.Sprintf("live-%d", i)] {
			t.Fatalf("stream live-%d was acknowledged before the kill and is gone", i)
		}
	}
	// The creation in flight at the kill may have reached the journal or not.
	if len(live) != liveAcked && len(live) != liveAcked+1 {
		t.Fatalf("%d live streams after the kill, %d acknowledged", len(live), liveAcked)
	}
	if len(streams)-len(live) != 6 {
		t.Fatalf("%d streams besides the live ones after the kill, want 6", len(streams)-len(live))
	}
	t.Logf("%d stream creations acknowledged before the kill, %d recovered", liveAcked, len(live))
	for p := 0; p < partitions; p++ {
		next := uint64(0)
		for {
			polled, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.NameID("load"),
				TopicID: client.NameID("t"), Partition: wire.SomePartition(uint32(p)), Strategy: wire.PollingStrategy{Kind: wire.PollingOffset, Value: next}, Count: 1000})
			if err != nil {
				t.Fatalf("poll partition %d at %d: %v\n%s", p, next, err, s2.logText())
			}
			if polled.MessagesCount == 0 {
				break
			}
			for it := polled.Messages(); it.Next(); next++ {
				m := it.Message()
				want := fmt.Sprintf("p%d-b%d-m%d", p, next/batchMessages, next%batchMessages)
				if m.Offset != next || string(m.Payload()) != want {
					t.Fatalf("partition %d offset %d: %q at offset %d, want %q", p, next, m.Payload(), m.Offset, want)
				}
			}
		}
		if next < uint64(acked[p]*batchMessages) {
			t.Fatalf("partition %d: %d messages after the kill, %d were acknowledged", p, next, acked[p]*batchMessages)
		}
		if next%batchMessages != 0 {
			t.Fatalf("partition %d: a batch was split by the crash (%d messages)", p, next)
		}
		t.Logf("partition %d: %d acknowledged batches, %d recovered", p, acked[p], next/batchMessages)
	}
	if code := s2.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d\n%s", code, s2.logText())
	}
	if !strings.Contains(s2.logText(), "msg=listening") {
		t.Fatal("no listening line")
	}
}
