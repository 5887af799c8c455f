package clustertest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// replicatedStateWait bounds the wait for the nodes to apply the same op at the
// end of a test.
const replicatedStateWait = 30 * time.Second

// replicatedState is what a node's /debug/replicated-state says: the op its
// metadata plane applied, the highest it knows committed, and the digest of its
// replicated state (metadata and client table, whole) as applied.
type replicatedState struct {
	appliedOp, commitOp uint64
	digest              string
}

// replicatedState reads the node's /debug/replicated-state.
func (n *node) replicatedState(ctx context.Context) (replicatedState, error) {
	url := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(n.metricsPort)) + "/debug/replicated-state"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return replicatedState{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return replicatedState{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return replicatedState{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return replicatedState{}, fmt.Errorf("node %d: /debug/replicated-state: %s: %s", n.id, resp.Status, body)
	}
	var st replicatedState
	if _, err := fmt.Sscanf(string(body), "applied_op=%d commit=%d digest=%s", &st.appliedOp, &st.commitOp, &st.digest); err != nil {
		return replicatedState{}, fmt.Errorf("node %d: /debug/replicated-state %q: %v", n.id, body, err)
	}
	return st, nil
}

// awaitSameReplicatedState waits (bounded by ctx) until every node of nodes has
// applied the highest op any of them knows committed, and fails unless they then
// hold the same replicated state.
func awaitSameReplicatedState(ctx context.Context, nodes []*node) error {
	states := make([]replicatedState, len(nodes))
	var lastErr error
	for {
		settled := true
		var commit uint64
		for i, n := range nodes {
			st, err := n.replicatedState(ctx)
			if err != nil {
				lastErr, settled = err, false
				break
			}
			states[i] = st
			commit = max(commit, st.commitOp)
		}
		for _, st := range states {
			if !settled || st.appliedOp != commit {
				settled = false
				break
			}
		}
		if settled {
			for i, st := range states {
				if st.digest != states[0].digest {
					return fmt.Errorf("node %d's replicated state at op %d differs from node %d's (digest %s, node %d %s)",
						nodes[i].id, commit, nodes[0].id, st.digest, nodes[0].id, states[0].digest)
				}
			}
			return nil
		}
		if lastErr == nil {
			lastErr = fmt.Errorf("the nodes applied ops %v, %d is committed", appliedOps(states), commit)
		}
		if !waitCtx(ctx, 50*time.Millisecond) {
			return fmt.Errorf("the nodes never applied the same op: %v", lastErr)
		}
		lastErr = nil
	}
}

func appliedOps(states []replicatedState) []uint64 {
	ops := make([]uint64, len(states))
	for i, st := range states {
		ops[i] = st.appliedOp
	}
	return ops
}
