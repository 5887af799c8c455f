package shard

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestRedialBackoffDoublesToTheReconnectPeriod(t *testing.T) {
	const period = 5 * time.Second
	var b redialBackoff
	if !b.ready(0) {
		t.Fatal("a peer never refused is not ready")
	}
	nowNs := int64(time.Hour)
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000}
	for i, w := range want {
		w *= time.Millisecond
		due := b.failed(nowNs, period)
		if due != nowNs+int64(w) {
			t.Fatalf("failure %d: redial after %v, want %v", i, time.Duration(due-nowNs), w)
		}
		if b.ready(due - 1) {
			t.Fatalf("failure %d: ready 1 ns before the delay", i)
		}
		if !b.ready(due) {
			t.Fatalf("failure %d: not ready at the delay", i)
		}
		nowNs = due
	}
	b.connected()
	if !b.ready(nowNs) {
		t.Fatal("not ready once connected")
	}
	if due := b.failed(nowNs, period); due != nowNs+int64(ReplicaRedialDelayMin) {
		t.Fatalf("first failure after a connection: redial after %v, want %v", time.Duration(due-nowNs), ReplicaRedialDelayMin)
	}
	// A reconnect period below the first delay bounds it.
	var short redialBackoff
	if due := short.failed(0, 30*time.Millisecond); due != int64(30*time.Millisecond) {
		t.Fatalf("period 30ms: redial after %v", time.Duration(due))
	}
}

// refusedAddress returns a loopback address that refuses connects until a listener
// binds it. A port closed at once could be taken by any socket of the machine before
// the test's own listener binds it (then a dial meant to be refused connects, or that
// listener's bind fails). So the port stays bound, not listening, until the test
// ends, with SO_REUSEADDR: the runtime's listener (SO_REUSEADDR too) binds it beside,
// and the kernel picks it for no other socket (a bind to port 0, a connect).
func refusedAddress(t *testing.T) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(sa.(*unix.SockaddrInet4).Port)).String()
}

// TestReplicaRefusedDialsBackOff drives shard 0's clock by hand: a peer that refuses
// is dialed again after 100 ms, 200 ms, ... up to ReconnectPeriod and never sooner,
// and a connection starts the delays again.
func TestReplicaRefusedDialsBackOff(t *testing.T) {
	const period = 5 * time.Second
	const cluster = "backoff"
	var clockNs atomic.Int64
	clockNs.Store(int64(time.Second))
	addr := refusedAddress(t)
	n := startReplicaNode(t, 0, replicaNodeOptions{cluster: cluster, secret: testSecret, addresses: []string{"", addr},
		shardCount: 1, clock: clockNs.Load, reconnect: period})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	turn := func(atNs int64) { t.Helper(); turnAt(ctx, t, n.rt, &clockNs, atNs) }
	// settle waits for every dial started to have completed, all but connected of
	// them refused.
	connected := uint64(0)
	settle := func(dials uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for st := n.rt.ReplicaStats(); st.Dials != dials || st.DialsFailed != dials-connected; st = n.rt.ReplicaStats() {
			if time.Now().After(deadline) {
				t.Fatalf("dials %d, failed %d; want %d refused", st.Dials, st.DialsFailed, dials-connected)
			}
			time.Sleep(time.Millisecond)
		}
	}
	dials := uint64(1) // at start
	settle(dials)
	atNs := clockNs.Load()
	redialsAfter := func(delay time.Duration) {
		t.Helper()
		turn(atNs + int64(delay) - 1)
		if got := n.rt.ReplicaStats().Dials; got != dials {
			t.Fatalf("dial %d: redialed before %v", dials, delay)
		}
		turn(atNs + int64(delay))
		if got := n.rt.ReplicaStats().Dials; got != dials+1 {
			t.Fatalf("dial %d: %d dials %v after a refusal, want %d", dials, got, delay, dials+1)
		}
		dials++
		atNs += int64(delay)
	}
	for _, ms := range []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000} {
		redialsAfter(ms * time.Millisecond)
		settle(dials)
	}

	// The peer comes up: the next dial connects, and its loss restarts the delays.
	peer := startReplicaNode(t, 1, replicaNodeOptions{cluster: cluster, secret: testSecret, listen: addr,
		addresses: []string{"", addr}, shardCount: 1})
	redialsAfter(period)
	n.waitFor("replica 1 up", 10*time.Second, func() bool { return n.up[1] })
	connected++
	shutdownCtx, shutdownCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer shutdownCancel()
	if err := peer.rt.Shutdown(shutdownCtx); err != nil {
		t.Fatal(err)
	}
	n.waitFor("replica 1 down", 10*time.Second, func() bool { return !n.up[1] })
	// Down, it is dialed at the next reconnect period (its timer armed at the dial).
	turn(atNs + int64(period))
	if got := n.rt.ReplicaStats().Dials; got != dials+1 {
		t.Fatalf("%d dials a reconnect period after the loss, want %d", got, dials+1)
	}
	dials++
	settle(dials)
	atNs = clockNs.Load()
	redialsAfter(ReplicaRedialDelayMin)
	settle(dials)
	redialsAfter(2 * ReplicaRedialDelayMin)
	settle(dials)
}

// TestReplicaEndedDialsBackOff: a dial made by ReplicaConfig.Dial (the TLS plane's)
// that ends in failure (EndReplicaDial) is redialed after the same growing delays.
func TestReplicaEndedDialsBackOff(t *testing.T) {
	const period = 5 * time.Second
	var clockNs atomic.Int64
	clockNs.Store(int64(time.Second))
	var calls atomic.Uint64
	var rt atomic.Pointer[Runtime]
	started := make(chan struct{})
	dial := func(peer uint8, _ netip.AddrPort) {
		calls.Add(1)
		go func() {
			<-started
			rt.Load().EndReplicaDial(peer)
		}()
	}
	n := startReplicaNode(t, 0, replicaNodeOptions{cluster: "ended", secret: testSecret,
		addresses: []string{"", refusedAddress(t)}, shardCount: 1, clock: clockNs.Load, reconnect: period, dial: dial})
	rt.Store(n.rt)
	close(started)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// settle waits for the dials to number dials, all ended, and returns once shard 0
	// has taken in every EndReplicaDial. Start returns before shard 0's first turn,
	// so the first dial (at startup) may come after the test's first look.
	settle := func(dials uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for calls.Load() != dials || n.rt.replica.dialEnds.Load() != dials {
			if time.Now().After(deadline) {
				t.Fatalf("%d dials, %d ended; want %d ended", calls.Load(), n.rt.replica.dialEnds.Load(), dials)
			}
			time.Sleep(time.Millisecond)
		}
		n.rt.WakeAll()
		for range 2 {
			if err := n.rt.Inspect(ctx, func(*Shard) {}); err != nil {
				t.Fatal(err)
			}
		}
	}
	turn := func(atNs int64) { t.Helper(); turnAt(ctx, t, n.rt, &clockNs, atNs) }
	settle(1)
	atNs := clockNs.Load()
	for i, ms := range []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000} {
		delay := ms * time.Millisecond
		turn(atNs + int64(delay) - 1)
		if got := calls.Load(); got != uint64(i+1) {
			t.Fatalf("dial %d: redialed before %v", i+1, delay)
		}
		turn(atNs + int64(delay))
		if got := calls.Load(); got != uint64(i+2) {
			t.Fatalf("dial %d: %d dials %v after a failure, want %d", i+1, got, delay, i+2)
		}
		settle(uint64(i + 2))
		atNs += int64(delay)
	}
}

// turnAt moves the clock of rt's Config.Clock to atNs and returns once shard 0 has
// taken a whole turn at it, its timers fired. An Inspect's fn runs before the timers
// of its turn fire, and the first may be served by a turn that began before the
// clock moved: the second is served by a turn that began after it, the third by a
// turn that began after that one ended.
func turnAt(ctx context.Context, t *testing.T, rt *Runtime, clockNs *atomic.Int64, atNs int64) {
	t.Helper()
	clockNs.Store(atNs)
	rt.WakeAll()
	for range 3 {
		if err := rt.Inspect(ctx, func(*Shard) {}); err != nil {
			t.Fatal(err)
		}
	}
}
