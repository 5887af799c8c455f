package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/iggy-shard/iggy-shard/shard"
)

// replicatedState is what /debug/replicated-state tells of this node's metadata
// plane: the op it applied, the highest op it knows committed, and the digest of
// its replicated state as applied (metaplane's Plane.Digest: metadata and client
// table, whole, recording no view). Replicas that applied the same op hold the
// same digest; a test outside the process compares them (internal/clustertest).
type replicatedState struct {
	appliedOp, commitOp, digest uint64
}

// replicatedStateTimeout bounds the wait for shard 0's turn.
const replicatedStateTimeout = 2 * time.Second

// replicatedState reads the metadata plane's applied op, commit and digest on
// shard 0. The digest encodes the whole state (a checkpoint's worth of bytes)
// on shard 0's turn: a diagnostic, not a metric to scrape.
func (s *Server) replicatedState(ctx context.Context) (replicatedState, error) {
	var st replicatedState
	read := false
	ctx, cancel := context.WithTimeout(ctx, replicatedStateTimeout)
	defer cancel()
	err := s.rt.Inspect(ctx, func(sh *shard.Shard) {
		if sh.Index() == 0 {
			p := s.meta
			st = replicatedState{appliedOp: p.Applied().Op, commitOp: p.Core().CommitMax(), digest: p.Digest()}
			read = true
		}
	})
	if err == nil && !read {
		err = fmt.Errorf("shard 0 did not answer")
	}
	return st, err
}

// serveReplicatedState answers GET /debug/replicated-state with one line:
// applied_op=N commit=N digest=<16 hex digits>.
func (s *Server) serveReplicatedState(w http.ResponseWriter, r *http.Request) {
	st, err := s.replicatedState(r.Context())
	if err != nil {
		http.Error(w, fmt.Sprintf("replicated state: %v\n", err), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintf(w, "applied_op=%d commit=%d digest=%016x\n", st.appliedOp, st.commitOp, st.digest)
}
