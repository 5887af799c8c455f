package segment

import (
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// TestSegmentChecksMergeAndBound: verified ranges merge when they touch,
// never exceed verifiedRangesMax however scattered the reads, and forgetting
// a stretch splits the range around it.
func TestSegmentChecksMergeAndBound(t *testing.T) {
	var c segmentChecks
	c.add(100, 200)
	c.add(200, 300) // touching: one range
	c.add(50, 100)
	if len(c.verified) != 1 || !c.covers(50, 300) || c.covers(40, 60) || c.covers(250, 301) {
		t.Fatalf("merged ranges %+v", c.verified)
	}
	for i := range int64(100) {
		c.add(1000+i*100, 1000+i*100+10+i) // scattered, growing
		if len(c.verified) > verifiedRangesMax {
			t.Fatalf("%d ranges, bound %d", len(c.verified), verifiedRangesMax)
		}
	}
	if !c.covers(1000+99*100, 1000+99*100+109) {
		t.Fatalf("the largest, newest range was dropped: %+v", c.verified)
	}
	c = segmentChecks{}
	c.add(0, 1000)
	c.quarantine(400, 500, wire.ErrInvalidBatchChecksum)
	if c.covers(0, 1000) || !c.covers(0, 400) || !c.covers(500, 1000) || c.corruptAt(400) == nil || c.corruptAt(0) != nil {
		t.Fatalf("after quarantine of [400,500): %+v %+v", c.verified, c.corrupt)
	}
	seg := &segment{checks: &c}
	seg.forgetFrom(400)
	if c.covers(500, 501) || !c.covers(0, 400) || c.corruptAt(400) != nil {
		t.Fatalf("after a cut at 400: %+v %+v", c.verified, c.corrupt)
	}
}

// TestReadVerifiesABatchOnce: the first read of a batch after it was written
// verifies it; reads of it again, whole or cut, do not; a batch written since
// is verified on its first read; and a recovered log verifies again.
func TestReadVerifiesABatchOnce(t *testing.T) {
	st := NewSimDisk(1)
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 8 << 10}
	l := openLog(t, st, cfg)
	a := newAppender(t, l, 1, 100)
	const batches = 60
	for range batches {
		a.append(5)
	}
	l.WaitIdle()
	if l.SegmentCount() < 3 {
		t.Fatalf("%d segments: want several sealed", l.SegmentCount())
	}
	msgs := readAll(t, l, 0, 1<<20)
	a.sent.check(t, msgs)
	if got := l.Stats().BatchesVerified; got != batches {
		t.Fatalf("first read verified %d batches, want %d", got, batches)
	}
	a.sent.check(t, readAll(t, l, 0, 1<<20))
	var p Polled
	if err := l.Read(Query{Kind: PollOffset, Value: 7, Count: 50}, &p); err != nil || p.MessageCount != 50 {
		t.Fatalf("cut read: %d messages, %v", p.MessageCount, err)
	}
	if got := l.Stats().BatchesVerified; got != batches {
		t.Fatalf("reads of verified batches verified %d more", got-batches)
	}
	a.append(5)
	l.WaitIdle()
	a.sent.check(t, readAll(t, l, 0, 1<<20))
	if got := l.Stats().BatchesVerified; got != batches+1 {
		t.Fatalf("after one more batch: %d verified, want %d", got, batches+1)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, st, cfg)
	t.Cleanup(func() { l.Close() })
	a.sent.check(t, readAll(t, l, 0, 1<<20))
	if got := l.Stats().BatchesVerified; got != batches+1 {
		t.Fatalf("a recovered log verified %d batches on its first read, want all %d", got, batches+1)
	}
}

// TestScrubberCatchesCorruptionUnderAVerifiedRange: a byte flipped on disk
// inside a range reads trust is found by the scrubber within one round; the
// batch is then never served again (the CorruptBatchError a poll of a
// corrupt batch has always had), and the rest of the log still is.
func TestScrubberCatchesCorruptionUnderAVerifiedRange(t *testing.T) {
	st := NewSimDisk(1)
	l := openLog(t, st, Config{PartitionID: testPartition, SegmentSizeBytes: 8 << 10})
	t.Cleanup(func() { l.Close() })
	a := newAppender(t, l, 2, 100)
	for range 60 {
		a.append(5)
	}
	l.WaitIdle()
	a.sent.check(t, readAll(t, l, 0, 1<<20)) // everything verified

	victim := l.segments[1]
	if victim.state != segmentSealed || !victim.checks.covers(0, victim.sizeBytes) {
		t.Fatalf("segment 1 sealed %v, verified %+v", victim.state == segmentSealed, victim.checks)
	}
	position := victim.index.position(2)
	victimOffset := victim.index.offset(2)
	if err := st.FlipBit(segmentLogName(victim.baseOffset), (position+wire.BatchHeaderSize+wire.FrameHeaderSize+3)*8); err != nil {
		t.Fatal(err)
	}

	var sealedBytes int64
	for _, s := range l.segments {
		if s.state == segmentSealed {
			sealedBytes += s.sizeBytes
		}
	}
	var found *CorruptBatchError
	var scrubbed int64
	var buf []byte
	for scrubbed < sealedBytes {
		var n int64
		var err error
		n, buf, err = l.Scrub(1<<10, buf)
		if n <= 0 {
			t.Fatalf("scrub step verified %d bytes (%v) after %d of %d", n, err, scrubbed, sealedBytes)
		}
		scrubbed += n
		if err != nil {
			if !errors.As(err, &found) {
				t.Fatalf("scrub: %v", err)
			}
		}
	}
	if found == nil || found.Segment != victim.baseOffset || found.Position != position || l.Stats().ScrubCorrupt != 1 {
		t.Fatalf("one round of scrubbing found %v (%d corrupt), want the batch at %d of segment %d",
			found, l.Stats().ScrubCorrupt, position, victim.baseOffset)
	}
	for range 2 { // quarantined: not served, however often asked
		var p Polled
		err := l.Read(Query{Kind: PollOffset, Value: victimOffset, Count: 1}, &p)
		var corrupt *CorruptBatchError
		if !errors.As(err, &corrupt) || corrupt.Position != position || !(errors.Is(err, wire.ErrInvalidBatchChecksum) || errors.Is(err, wire.ErrInvalidMessageChecksum)) || p.MessageCount != 0 {
			t.Fatalf("read of the quarantined batch: %d messages, %v", p.MessageCount, err)
		}
	}
	a.sent.check(t, readAll(t, l, victim.endOffset, 1<<20))
	// Another round passes the quarantined batch again and finds it again.
	before := l.Stats().ScrubbedBytes
	for l.Stats().ScrubbedBytes-before < uint64(sealedBytes) {
		_, buf, _ = l.Scrub(1<<10, buf)
	}
	if l.Stats().ScrubCorrupt != 2 {
		t.Fatalf("second round: %d corrupt found in all, want 2", l.Stats().ScrubCorrupt)
	}
}

// TestScrubAsyncMatchesScrub: two logs alike, one scrubbed by Scrub and the
// other by ScrubAsync's steps (each read completing in the storage's Poll),
// verify the same bytes step for step over two rounds, find the same corrupt
// batch, and quarantine it alike; a step in flight holds back the next.
func TestScrubAsyncMatchesScrub(t *testing.T) {
	var logs [2]*Log
	var disks [2]*SimDisk
	for i := range logs {
		disks[i] = NewSimDisk(1)
		logs[i] = openLog(t, disks[i], Config{PartitionID: testPartition, SegmentSizeBytes: 8 << 10})
		a := newAppender(t, logs[i], 2, 100)
		for range 60 {
			a.append(5)
		}
		logs[i].WaitIdle()
		victim := logs[i].segments[2]
		if err := disks[i].FlipBit(segmentLogName(victim.baseOffset), (victim.index.position(1)+wire.BatchHeaderSize+7)*8); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { logs[0].Close(); logs[1].Close() })
	sync, async := logs[0], logs[1]
	var syncBuf, asyncBuf []byte
	type stepResult struct {
		n   int64
		err error
	}
	var got stepResult
	finished := false
	done := func(n int64, buf []byte, err error) {
		got, asyncBuf, finished = stepResult{n, err}, buf, true
	}
	for step := range 400 {
		maxBytes := int64(1+step%7) << 10
		var want stepResult
		want.n, syncBuf, want.err = sync.Scrub(maxBytes, syncBuf)
		finished = false
		started, buf, err := async.ScrubAsync(maxBytes, asyncBuf, done)
		asyncBuf = buf
		if err != nil {
			t.Fatal(err)
		}
		if started {
			if finished {
				t.Fatal("ScrubAsync completed inside the call")
			}
			func() {
				defer func() {
					if recover() == nil {
						t.Fatal("a second step started while one was in flight")
					}
				}()
				async.ScrubAsync(maxBytes, nil, done)
			}()
			for !finished {
				if disks[1].Poll(true) == 0 {
					t.Fatal("the step's read was lost")
				}
			}
		} else {
			got = stepResult{}
		}
		var wantCorrupt, gotCorrupt *CorruptBatchError
		if got.n != want.n || errors.As(got.err, &gotCorrupt) != errors.As(want.err, &wantCorrupt) ||
			(gotCorrupt != nil && (gotCorrupt.Segment != wantCorrupt.Segment || gotCorrupt.Position != wantCorrupt.Position)) {
			t.Fatalf("step %d: async %d bytes, %v; sync %d bytes, %v", step, got.n, got.err, want.n, want.err)
		}
	}
	ss, as := sync.Stats(), async.Stats()
	if ss.ScrubbedBytes != as.ScrubbedBytes || ss.ScrubCorrupt != as.ScrubCorrupt || as.ScrubCorrupt < 2 {
		t.Fatalf("sync scrubbed %d bytes, %d corrupt; async %d, %d", ss.ScrubbedBytes, ss.ScrubCorrupt, as.ScrubbedBytes, as.ScrubCorrupt)
	}
}
