package server

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestFullDiskIsLogged: on a data directory whose filesystem fills up (a 16 MiB
// tmpfs: needs root, skipped otherwise), sends answered 4006 get a log line, one for
// the connection however many it sends, naming the full disk and the numbers: the
// batch's bytes, the partition's, the filesystem's free and total bytes.
func TestFullDiskIsLogged(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("mounting a 16 MiB tmpfs for a full disk: %v (needs root)", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	var logged lockedBuffer
	cfg := defaultSetup()
	cfg.TCPAddress, cfg.SystemPath, cfg.ShardCount, cfg.PinCPUs = "127.0.0.1:0", dir, 1, false
	s, err := start(cfg, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopServer(t, s) })
	ctx := testContext(t)
	c := dialRoot(t, s)
	st, err := c.CreateStream(ctx, "full")
	if err != nil {
		t.Fatal(err)
	}
	stream := wire.NumericIdentifier(st.ID)
	tp, err := c.CreateTopic(ctx, stream, "t", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	topic := wire.NumericIdentifier(tp.ID)
	batch := make([]client.Message, 16)
	for i := range batch {
		batch[i].Payload = bytes.Repeat([]byte{byte(i + 1)}, 64<<10)
	}
	refused := 0
	for sent := 0; refused < 5 && sent < 100; sent++ { // 16 MiB takes 16 batches of 1 MiB
		_, err := c.SendMessages(ctx, stream, topic, wire.Partitioning{Kind: wire.PartitioningPartitionID}, batch)
		if err == nil {
			continue
		}
		wantCode(t, "a send to a full disk", err, wire.ErrCannotSaveMessagesToSegment)
		refused++
	}
	if refused < 5 {
		t.Fatalf("%d sends refused of 100 batches of 1 MiB to a 16 MiB filesystem", refused)
	}
	lines := logged.linesWith("send refused")
	if len(lines) != 1 {
		t.Fatalf("%d log lines for %d refused sends of one connection, want 1:\n%s", len(lines), refused, strings.Join(lines, "\n"))
	}
	for _, want := range []string{"code=4006", "disk_full=true", "batch_bytes=", "partition_bytes=", "filesystem_free_bytes=", "filesystem_bytes=16777216", "cause="} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the log line lacks %q: %s", want, lines[0])
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "metadata")); err != nil {
		t.Fatal(err)
	}
}

func (b *lockedBuffer) linesWith(s string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, line := range strings.Split(b.buf.String(), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}
