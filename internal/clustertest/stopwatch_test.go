package clustertest

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A stall of a node longer than its heartbeat timeout moves the cluster's leader,
// rightly: its backups elect another. A harness that freezes nodes at random
// (SIGSTOP, then SIGCONT) finds bugs that only show under such stalls, and the
// tests that check a leader stays put (a cluster at work must not lose it) cannot
// tell its freezes from a starved node. A stopWatch can: it notes each node it sees
// stopped (state T in /proc/PID/stat), and those tests check the leader only
// while no node was seen so. Nothing in a test stops a node that way.

// stopWatchInterval is how often a stopWatch looks: well within the shortest
// stall that moves a leader (the heartbeat timeout, 2 s).
const stopWatchInterval = 20 * time.Millisecond

// stopWatch notes which of a cluster's nodes it has seen stopped by a signal.
type stopWatch struct {
	mu      sync.Mutex
	stopped map[int]bool
	done    chan struct{}
	wg      sync.WaitGroup
}

// watchStops looks at the processes nodes run now until the test ends (a node
// started again later is not watched).
func (c *cluster) watchStops(nodes []*node) *stopWatch {
	w := &stopWatch{stopped: make(map[int]bool), done: make(chan struct{})}
	pids := make(map[int]int) // node id: pid
	for _, n := range nodes {
		if n.proc != nil && n.running() {
			pids[n.id] = n.proc.cmd.Process.Pid
		}
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(stopWatchInterval)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
			for id, pid := range pids {
				if processStopped(pid) {
					w.mu.Lock()
					w.stopped[id] = true
					w.mu.Unlock()
				}
			}
		}
	}()
	c.t.Cleanup(func() { close(w.done); w.wg.Wait() })
	return w
}

// seen lists the nodes seen stopped ("" for none).
func (w *stopWatch) seen() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]int, 0, len(w.stopped))
	for id := range w.stopped {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return strings.Trim(fmt.Sprint(ids), "[]")
}

// processStopped reports whether the process is stopped by a signal (state T; t
// is a tracing stop).
func processStopped(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'T'
}

// processStopped sees a process stopped by SIGSTOP, and running again after
// SIGCONT.
func TestProcessStopped(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	awaitStopped := func(want bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); processStopped(pid) != want; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d: stopped %v, want %v", pid, !want, want)
			}
		}
	}
	awaitStopped(false)
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	awaitStopped(true)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	awaitStopped(false)
}
