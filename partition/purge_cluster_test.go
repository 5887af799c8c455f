package partition

import (
	"errors"
	"testing"
)

// purgeAt purges replica i's partition to purge generation generation, as its
// node's partitionhost does when it applies the topic's purge op.
func purgeAt(t *testing.T, c *testCluster, i int, generation uint64) {
	t.Helper()
	if err := c.stores[i].Purge(testKey, generation); err != nil {
		t.Fatalf("replica %d: purge: %v", i, err)
	}
}

// holdsOnly fails unless every replica serves messages messages from offset 0, in
// the same log.
func holdsOnly(t *testing.T, c *testCluster, messages uint64) {
	t.Helper()
	sameLogs(t, c)
	if info, _ := c.stores[0].Info(testKey); info.MessagesCount != messages {
		t.Fatalf("the replicas serve %d messages, want %d", info.MessagesCount, messages)
	}
}

// Every node purges when it applies the metadata op, so a backup may purge while
// the partition's primary still runs the old life and commits batches in it. The
// backup used to take those prepares into its new life, repair the history below
// them from the primary and commit it again: after every replica had purged, it
// served the 36 purged messages, where the others served none, and refused the
// new life's batches (replica 2 serves 36 messages, replica 0 9). Each life's
// frames now carry its own tag, and the purged backup drops the old life's.
func TestClusterPurgedBackupTakesNothingOfTheOldLife(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		cfg := smallConfig()
		cfg.EnforceFsync = fsync
		c := newTestCluster(t, 11, 3, cfg)
		rec := newSendRecorder()
		next := c.sendAll(0, 10, rec, 1)
		purgeAt(t, c, 2, 1)
		c.sendAll(next, 2, rec, 11) // committed by replicas 0 and 1, in the old life
		c.tick(50)
		if info, _ := c.stores[2].Info(testKey); info.MessagesCount != 0 {
			t.Fatalf("enforce_fsync %v: the purged backup holds %d messages of the old life", fsync, info.MessagesCount)
		}
		var dropped int
		for _, err := range c.stepErrs {
			if errors.Is(err, errOtherIncarnation) {
				dropped++
			}
		}
		if dropped == 0 {
			t.Fatalf("enforce_fsync %v: the old life's frames reached the purged backup without a drop: %v", fsync, c.stepErrs)
		}
		purgeAt(t, c, 0, 1)
		purgeAt(t, c, 1, 1)
		c.tick(200)
		holdsOnly(t, c, 0)
		c.elect()
		c.sendAll(0, 3, rec, 100)
		c.tick(50)
		holdsOnly(t, c, 9)
	}
}

// The primary and one backup purge first and commit the new life's batches; the
// other backup, still in the old life, takes none of them, then purges and
// catches up with the new life alone.
func TestClusterBackupPurgingLateTakesTheNewLife(t *testing.T) {
	c := newTestCluster(t, 12, 3, smallConfig())
	rec := newSendRecorder()
	c.sendAll(0, 10, rec, 1)
	purgeAt(t, c, 0, 1)
	purgeAt(t, c, 1, 1)
	c.sendAll(0, 2, rec, 11)
	c.tick(50)
	if info, _ := c.stores[2].Info(testKey); info.MessagesCount != 30 {
		t.Fatalf("the backup still in the old life serves %d messages, want its 30", info.MessagesCount)
	}
	purgeAt(t, c, 2, 1)
	c.tick(200)
	c.sendAll(6, 3, rec, 100)
	c.tick(50)
	holdsOnly(t, c, 15)
}

// Lives a purge apart never share a tag, and a purge to the generation a replica is
// in already does not leave it in another life.
func TestPurgeMovesTheLifesTag(t *testing.T) {
	c := newTestCluster(t, 13, 3, smallConfig())
	p := c.stores[0].partitions[testKey]
	before := p.tag()
	purgeAt(t, c, 0, 1)
	p = c.stores[0].partitions[testKey]
	if p.tag() == before {
		t.Fatalf("purge generation 1 keeps tag %d", before)
	}
	group, _ := p.groupID()
	if !p.ofIncarnation(group) {
		t.Fatal("a purged partition does not take its own group id")
	}
	purgeAt(t, c, 0, 1)
	if again, _ := c.stores[0].partitions[testKey].groupID(); again != group {
		t.Fatalf("purging to the same generation again moved the group id %#x to %#x", group, again)
	}
}
