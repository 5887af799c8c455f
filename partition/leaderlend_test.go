package partition

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/vsr"
)

// prepareRecorder is a PrepareOutbox that records whose send each prepare named,
// and copies it on as the test cluster's outbox does.
type prepareRecorder struct {
	clusterOutbox
	t       *testing.T
	batches map[uint64][]byte
	sends   *sendRecorder
	named   int
}

func (o *prepareRecorder) SendPrepareOf(k Key, m *vsr.Message, done SendCompletion, token uint64) {
	o.t.Helper()
	batch := o.batches[token]
	switch {
	case done != SendCompletion(o.sends):
		o.t.Fatalf("a prepare named a send of another completion")
	case batch == nil:
		o.t.Fatalf("a prepare named send %d, never made", token)
	case len(m.Body) != len(batch) || &m.Body[0] != &batch[0]:
		o.t.Fatalf("the prepare naming send %d is not its request buffer", token)
	}
	if _, acked := o.sends.acked[token]; acked {
		o.t.Fatalf("a prepare named send %d after its SendDone", token)
	}
	o.named++
	o.SendReplica(k, m)
}

// TestPrimaryNamesTheSendOfEachPrepare: a primary whose outbox is a PrepareOutbox
// gives it each prepare of a batch with the send whose request buffer the body
// is, before that send's SendDone, so that the buffer's owner can lend it.
func TestPrimaryNamesTheSendOfEachPrepare(t *testing.T) {
	c := newTestCluster(t, 1, 3, Config{PartitionsCount: 1})
	rec := newSendRecorder()
	out := &prepareRecorder{clusterOutbox: clusterOutbox{c: c, from: 0}, t: t, batches: map[uint64][]byte{}, sends: rec}
	c.stores[0].prepareOutbox = out
	const sends = 8
	for i := range uint64(sends) {
		batch := makeBatch(t, i*4, 4, 50)
		out.batches[i] = batch
		c.send(batch, 1000+i, rec, i)
		c.settle()
	}
	for i := range uint64(sends) {
		if got, ok := rec.acked[i]; !ok || got.BaseOffset != i*4 {
			t.Fatalf("send %d: acked %v %+v, failed %v", i, ok, got, rec.failed[i])
		}
	}
	if out.named < sends {
		t.Fatalf("%d prepares named their send, want at least %d", out.named, sends)
	}
	if len(c.stepErrs) > 0 {
		t.Fatalf("frames refused: %v", c.stepErrs)
	}
}
