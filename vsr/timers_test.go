package vsr

import (
	"fmt"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

type noBodies struct{}

func (noBodies) Body(uint64, wire.Uint128) ([]byte, bool) { return nil, false }

func timersCore(t testing.TB, replica, count uint8, group uint64) *Core {
	t.Helper()
	c, err := NewCore(CoreConfig{
		Config:  Config{Cluster: wire.Uint128{Lo: 7}, ReplicaID: replica, ReplicaCount: count, Group: group},
		Storage: noBodies{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// drain does a core's Ready with nothing to make durable or send anywhere.
func drain(c *Core) {
	for c.HasReady() {
		c.Ready()
		c.Advance()
	}
}

// Thousands of idle groups cost a tick nothing: groups of one replica have no
// deadline and are not in the heap; backups armed far ahead are looked at only
// through the heap's top.
func TestTimersIdleGroupsCostNothing(t *testing.T) {
	timers := NewTimers()
	const idle = 5000
	for i := 0; i < idle; i++ {
		timers.Add(timersCore(t, 0, 1, uint64(i+1)))
	}
	if timers.Len() != 0 {
		t.Fatalf("%d single-replica groups armed", timers.Len())
	}
	for i := 0; i < 100; i++ {
		if due := timers.Tick(); len(due) != 0 {
			t.Fatalf("tick %d: %d groups due", i, len(due))
		}
	}
	if n := timers.Examined(); n != 0 {
		t.Fatalf("ticks over idle groups looked at %d heap entries", n)
	}
	for i := 0; i < idle; i++ {
		timers.Add(timersCore(t, 1, 3, uint64(idle+i+1))) // backups: the heartbeat timeout
	}
	before := timers.Examined()
	const ticks = 200 // well inside the 500-tick heartbeat timeout
	for i := 0; i < ticks; i++ {
		if due := timers.Tick(); len(due) != 0 {
			t.Fatalf("tick %d: %d groups due", i, len(due))
		}
	}
	if n := timers.Examined() - before; n != ticks {
		t.Fatalf("%d ticks over %d armed groups looked at %d heap entries, want one a tick", ticks, idle, n)
	}
}

// A backup's heartbeat timeout fires exactly HeartbeatTimeoutTicks after the last
// frame from its primary's node, whatever group that frame was for.
func TestTimersLivenessFromAnyFrameOfThePrimary(t *testing.T) {
	timers := NewTimers()
	backup := timersCore(t, 1, 3, 5)
	h := timers.Add(backup)
	timeout := TimingDefault.HeartbeatTimeoutTicks
	lastSeen := uint64(0)
	fired := uint64(0)
	for tick := uint64(1); tick <= 3000 && fired == 0; tick++ {
		for _, g := range timers.Tick() {
			if g != h {
				t.Fatalf("group %d due, only %d is registered", g, h)
			}
			timers.Catch(g)
			if backup.Status() != StatusNormal {
				fired = timers.Now()
			}
			drain(backup)
			timers.Rearm(g)
		}
		if tick <= 1200 && tick%100 == 0 {
			timers.NoteLiveness(0) // a frame from node 0, of another group
			lastSeen = tick
		}
		if tick <= 1200 && tick%300 == 0 {
			timers.NoteLiveness(2) // a frame from a node that is not the primary
		}
	}
	if fired == 0 {
		t.Fatal("the heartbeat timeout never fired")
	}
	if fired != lastSeen+timeout {
		t.Fatalf("view change at tick %d, want %d (last frame from the primary at %d)", fired, lastSeen+timeout, lastSeen)
	}
}

// A group is re-armed after each input: a primary's proposal arms its prepare
// retransmission, which fires on time and sends the prepare again.
func TestTimersRearmAfterPropose(t *testing.T) {
	timers := NewTimers()
	primary := timersCore(t, 0, 3, 9)
	h := timers.Add(primary)
	if due, ok := timers.Armed(h); !ok || due != TimingDefault.CommitBroadcastIntervalTicks {
		t.Fatalf("primary armed %v at %d, want the commit broadcast at %d", ok, due, TimingDefault.CommitBroadcastIntervalTicks)
	}
	for i := 0; i < 10; i++ {
		if len(timers.Tick()) != 0 {
			t.Fatal("due too early")
		}
	}
	timers.Catch(h)
	body := []byte("payload")
	if _, err := primary.Propose(Proposal{Operation: wire.OperationSendMessages}, body, 1); err != nil {
		t.Fatal(err)
	}
	drain(primary)
	timers.Rearm(h)
	want := uint64(10) + TimingDefault.PrepareRetransmitIntervalTicks
	if due, ok := timers.Armed(h); !ok || due != want {
		t.Fatalf("armed %v at %d, want the retransmission at %d", ok, due, want)
	}
	for timers.Now() < want-1 {
		if len(timers.Tick()) != 0 {
			t.Fatalf("due at %d, before %d", timers.Now(), want)
		}
	}
	due := timers.Tick()
	if len(due) != 1 || due[0] != h {
		t.Fatalf("at %d: due %v", timers.Now(), due)
	}
	timers.Catch(h)
	if primary.Now() != want {
		t.Fatalf("core clock %d after catch-up, want %d", primary.Now(), want)
	}
	// The retransmission reads the body back from Storage, which holds none here, so
	// it sends nothing; the timer backs off and is armed again.
	drain(primary)
	timers.Rearm(h)
	if next, ok := timers.Armed(h); !ok || next <= want {
		t.Fatalf("after firing: armed %v at %d", ok, next)
	}
}

// Removing groups keeps the heap consistent: the remaining ones fire in order.
func TestTimersRemove(t *testing.T) {
	timers := NewTimers()
	var handles []GroupHandle
	for i := 0; i < 50; i++ {
		c := timersCore(t, 1, 3, uint64(i+1))
		for j := 0; j < i; j++ {
			c.Tick() // stagger the deadlines: group i is due i ticks earlier
		}
		handles = append(handles, timers.Add(c))
	}
	for i := 0; i < 50; i += 2 {
		timers.Remove(handles[i])
	}
	if timers.Len() != 25 {
		t.Fatalf("%d armed, want 25", timers.Len())
	}
	seen := 0
	last := uint64(0)
	for tick := 0; tick < 600 && seen < 25; tick++ {
		for _, h := range timers.Tick() {
			if int(h)%2 == 0 {
				t.Fatalf("removed group %d fired", h)
			}
			if timers.Now() < last {
				t.Fatal("out of order")
			}
			last = timers.Now()
			seen++
		}
	}
	if seen != 25 {
		t.Fatalf("%d groups fired, want 25", seen)
	}
}

func BenchmarkTimersTickIdle(b *testing.B) {
	for _, groups := range []int{10, 10000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			timers := NewTimers()
			for i := 0; i < groups; i++ {
				c := timersCore(b, 1, 3, uint64(i+1))
				timers.Add(c)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Keep every group away from its deadline: the node is heard from.
				if i%100 == 0 {
					timers.NoteLiveness(0)
				}
				for _, h := range timers.Tick() {
					timers.Catch(h)
					timers.Rearm(h)
				}
			}
		})
	}
}

// Catching a group up over many ticks leaves its core as ticking it each time would:
// the same clock, status, deadline and frames to send.
func TestTimersCatchUpEqualsTicking(t *testing.T) {
	for _, ticks := range []uint64{1, 499, 500, 501, 1234, 5000} {
		ticked := timersCore(t, 1, 3, 4)
		caught := timersCore(t, 1, 3, 4)
		timers := NewTimers()
		h := timers.Add(caught)
		tickedFrames, caughtFrames := 0, 0
		for i := uint64(0); i < ticks; i++ {
			ticked.Tick()
			timers.Tick() // the group stays in (or out of) the heap: caught up once, below
		}
		timers.Catch(h)
		for _, c := range []*Core{ticked, caught} {
			n := 0
			for c.HasReady() {
				n += len(c.Ready().Messages)
				c.Advance()
			}
			if c == ticked {
				tickedFrames = n
			} else {
				caughtFrames = n
			}
		}
		if ticked.Now() != caught.Now() || ticked.Status() != caught.Status() || ticked.View() != caught.View() ||
			ticked.NextDeadline() != caught.NextDeadline() {
			t.Fatalf("%d ticks: ticked now %d %v view %d deadline %d; caught up now %d %v view %d deadline %d", ticks,
				ticked.Now(), ticked.Status(), ticked.View(), ticked.NextDeadline(),
				caught.Now(), caught.Status(), caught.View(), caught.NextDeadline())
		}
		// Ticking each time drains nothing in between here either, so the frames of
		// every firing pile up alike.
		if tickedFrames != caughtFrames {
			t.Fatalf("%d ticks: %d frames ticked, %d caught up", ticks, tickedFrames, caughtFrames)
		}
	}
}
