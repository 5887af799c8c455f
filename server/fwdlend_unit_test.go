package server

import (
	"fmt"
	"testing"

	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// newTestFrameLender is shard index's frameLender with the replica queue faked;
// released counts the frames it gave back, which poisons them as the server's
// tests do (releaseInbound).
func newTestFrameLender(t *testing.T, index int) (*frameLender, *fakeLentSends, map[*replicaInbound]int) {
	h := &handler{index: index}
	sends := &fakeLentSends{t: t}
	released := make(map[*replicaInbound]int)
	l := &h.lender
	l.h = h
	l.sendLent = sends.send
	l.giveBack = func(in *replicaInbound) {
		released[in]++
		poison(in.frame.Body)
	}
	return l, sends, released
}

// receivedPrepare is a large prepare's frame received by shard owner, as the
// shard that steps it holds it, and the forward of it down the chain.
func receivedPrepare(owner, n int) (*replicaInbound, *vsr.Message) {
	in := &replicaInbound{owner: owner}
	in.frame.Body = make([]byte, n)
	for i := range in.frame.Body {
		in.frame.Body[i] = byte(i)
	}
	m := &vsr.Message{To: 2, Body: in.frame.Body}
	m.Header.Command = wire.CommandPrepare
	return in, m
}

// TestFrameLendForwardAndJournal: a received prepare forwarded from its frame
// and lent to the store keeps the frame until the step, the store's loan and
// the send are all done, in every order they end; the frame goes back exactly
// once, after the last, and no one copies it.
func TestFrameLendForwardAndJournal(t *testing.T) {
	const (
		stepEnds = iota
		storeReturns
		sendCompletes
	)
	orders := [][3]int{
		{stepEnds, storeReturns, sendCompletes},
		{stepEnds, sendCompletes, storeReturns},
		{storeReturns, stepEnds, sendCompletes},
		{sendCompletes, stepEnds, storeReturns},
		{sendCompletes, storeReturns, stepEnds},
		{storeReturns, sendCompletes, stepEnds},
	}
	names := [...]string{"step", "store", "send"}
	for _, order := range orders {
		t.Run(fmt.Sprintf("%s-%s-%s", names[order[0]], names[order[1]], names[order[2]]), func(t *testing.T) {
			l, sends, released := newTestFrameLender(t, 0)
			in, m := receivedPrepare(0, prepareLendMinBytes)
			l.in = in // stepPartitionFrame's
			if !l.forward(m) {
				t.Fatal("the forward was not lent")
			}
			loan, ok := l.Lend(m.Body)
			if !ok {
				t.Fatal("the store could not keep a frame a forward holds")
			}
			for i, end := range order {
				if released[in] != 0 {
					t.Fatalf("the frame went back with %d of its 3 users done", i)
				}
				switch end {
				case stepEnds:
					l.endStep()
				case storeReturns:
					l.Return(loan)
				case sendCompletes:
					sends.complete(2)
				}
			}
			if released[in] != 1 {
				t.Fatalf("the frame went back %d times, want once", released[in])
			}
			got := l.LentForwards()
			if got.lent != 1 || got.copied != 0 || got.out != 0 || got.held != 0 {
				t.Fatalf("lent %d, copied %d, out %d, held %d; want 1, 0, 0, 0", got.lent, got.copied, got.out, got.held)
			}
		})
	}
}

// TestFrameLendLateForward: a prepare sent after its step (a Ready whose
// durable work came first sends the journal's body: the frame the store keeps)
// is lent from that frame too, which then outlives the store's loan.
func TestFrameLendLateForward(t *testing.T) {
	l, sends, released := newTestFrameLender(t, 0)
	in, m := receivedPrepare(0, prepareLendMinBytes)
	l.in = in
	loan, ok := l.Lend(m.Body)
	if !ok {
		t.Fatal("the store could not keep the frame")
	}
	l.endStep()
	if !l.forward(m) {
		t.Fatal("the forward from the store's frame was not lent")
	}
	l.Return(loan)
	if released[in] != 0 {
		t.Fatal("the frame went back with its forward out")
	}
	sends.complete(2)
	if released[in] != 1 || l.LentForwards().outlived != 1 {
		t.Fatalf("the frame went back %d times, %d loans outlived; want 1, 1", released[in], l.LentForwards().outlived)
	}
}

// TestFrameLendForwardWithoutLoan: a forward holds the frame past its step when
// the store does not keep it (a duplicate prepare, the store's loans spent); a
// forward refused by the queue is dropped, as a copy would be, and holds
// nothing.
func TestFrameLendForwardWithoutLoan(t *testing.T) {
	l, sends, released := newTestFrameLender(t, 0)
	in, m := receivedPrepare(0, prepareLendMinBytes)
	l.in = in
	if !l.forward(m) {
		t.Fatal("the forward was not lent")
	}
	l.endStep()
	if released[in] != 0 {
		t.Fatal("the frame went back at the end of its step with its forward out")
	}
	sends.complete(2)
	if released[in] != 1 {
		t.Fatalf("the frame went back %d times, want once", released[in])
	}

	sends.refuse = map[uint8]error{2: shard.ErrReplicaPeerDown, 3: shard.ErrReplicaQueueFull}
	refused, mr := receivedPrepare(0, prepareLendMinBytes)
	l.in = refused
	for _, peer := range []uint8{2, 3} {
		mr.To = peer
		if !l.forward(mr) {
			t.Fatalf("a forward to peer %d refused by the queue was copied, want dropped", peer)
		}
	}
	l.endStep()
	if got := l.LentForwards(); released[refused] != 1 || got.out != 0 || got.held != 0 {
		t.Fatalf("refused forwards: frame back %d times, %d out, %d held; want 1, 0, 0", released[refused], got.out, got.held)
	}
}

// TestFrameLendForwardFallsBack: a forward is copied where lending cannot hold:
// a small prepare, a body in no frame held, a frame another shard received (its
// every end would be a post back there), past forwardLendSendsMax.
func TestFrameLendForwardFallsBack(t *testing.T) {
	l, sends, released := newTestFrameLender(t, 0)
	small, ms := receivedPrepare(0, prepareLendMinBytes-1)
	l.in = small
	if l.forward(ms) {
		t.Fatal("a prepare below prepareLendMinBytes was lent")
	}
	l.endStep()
	_, elsewhere := receivedPrepare(0, prepareLendMinBytes)
	if l.forward(elsewhere) {
		t.Fatal("a prepare in no frame held was lent")
	}
	other, mo := receivedPrepare(1, prepareLendMinBytes)
	l.in = other
	if l.forward(mo) {
		t.Fatal("a frame another shard received was lent to a forward")
	}
	l.endStep()
	if released[small] != 1 || released[other] != 1 {
		t.Fatalf("frames not lent went back %d and %d times, want once each", released[small], released[other])
	}

	frames := make([]*replicaInbound, forwardLendSendsMax+1)
	for i := range frames {
		var m *vsr.Message
		frames[i], m = receivedPrepare(0, prepareLendMinBytes)
		l.in = frames[i]
		if lent := l.forward(m); lent != (i < forwardLendSendsMax) {
			t.Fatalf("forward %d lent %v with %d out (bound %d)", i, lent, i, forwardLendSendsMax)
		}
		l.endStep()
	}
	for range forwardLendSendsMax {
		sends.complete(2)
	}
	for i, in := range frames {
		if released[in] != 1 {
			t.Fatalf("frame %d went back %d times", i, released[in])
		}
	}
	if got := l.LentForwards(); got.copied != 3 || got.lent != forwardLendSendsMax || got.held != 0 {
		t.Fatalf("copied %d, lent %d, held %d; want 3, %d, 0", got.copied, got.lent, got.held, forwardLendSendsMax)
	}
}
