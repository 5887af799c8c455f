package httpapi

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Partition writes over HTTP (produce, consumer-offset store and delete) hold a
// request open until the partition commits, so they are bounded as the reference
// bounds them (apache/iggy core/server/src/http/admission.rs): at most 32 awaited per
// credential (then 429), at most 128 on this node (then 503 server_busy), each waited
// for at most 10 s (then 504: the write may still commit).
const (
	partitionWritesPerCredentialMax = 32
	partitionWritesMax              = 128
	partitionWriteWait              = 10 * time.Second
)

var (
	errTooManyInFlight = &apiError{status: http.StatusTooManyRequests, ID: 429, Code: "too_many_in_flight_writes",
		Reason: "session reached its in-flight write cap; await outstanding writes and retry", retryAfter: true}
	errServerBusy = &apiError{status: http.StatusServiceUnavailable, ID: 503, Code: "server_busy",
		Reason: "shard is at its in-flight write budget; retry with backoff", retryAfter: true}
	errProduceTimeout = &apiError{status: http.StatusGatewayTimeout, ID: 504, Code: "produce_timeout",
		Reason: "produce was not acknowledged in time; the write may still commit"}
	errOffsetWriteTimeout = &apiError{status: http.StatusGatewayTimeout, ID: 504, Code: "offset_write_timeout",
		Reason: "consumer-offset write was not acknowledged in time; the write may still commit"}
	errPartitionReadTimeout = &apiError{status: http.StatusGatewayTimeout, ID: 504, Code: "partition_read_timeout",
		Reason: "the partition owner did not answer the read in time; retry"}
)

// partitionReadWait bounds a partition read (a poll, a consumer-offset read) as the
// reference bounds one (apache/iggy's PARTITION_READ_TIMEOUT, beside IggyShard::partition_read):
// 10 s, long enough for a poll walking many small segments on a loaded host, and
// under the SDKs' 30 s request deadline, so the client hears 504 rather than its
// own timeout.
const partitionReadWait = 10 * time.Second

// writeGate counts the partition writes awaited, per credential and in all.
type writeGate struct {
	mu           sync.Mutex
	total        int
	byCredential map[string]int
	wait         time.Duration
}

func newWriteGate() *writeGate {
	return &writeGate{byCredential: map[string]int{}, wait: partitionWriteWait}
}

func (g *writeGate) enter(credential string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byCredential[credential] >= partitionWritesPerCredentialMax {
		return errTooManyInFlight
	}
	if g.total >= partitionWritesMax {
		return errServerBusy
	}
	g.total++
	g.byCredential[credential]++
	return nil
}

func (g *writeGate) leave(credential string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total--
	if g.byCredential[credential]--; g.byCredential[credential] == 0 {
		delete(g.byCredential, credential)
	}
}

// partitionWrite runs one awaited partition write through the gate; timeout is
// the answer when the commit does not come within the wait.
func (rc *reqCtx) partitionWrite(code wire.CommandCode, body []byte, timeout *apiError) ([]byte, error) {
	g := rc.api.writes
	if err := g.enter(rc.caller.Credential); err != nil {
		return nil, err
	}
	defer g.leave(rc.caller.Credential)
	ctx, cancel := context.WithTimeout(rc.r.Context(), g.wait)
	defer cancel()
	reply, err := rc.api.opts.Backend.Do(ctx, rc.caller, code, body)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && rc.r.Context().Err() == nil {
		return nil, timeout
	}
	return reply, err
}

// partitionRead runs one partition read, bounded by the API's read wait: an owner
// that does not answer in time is answered 504 partition_read_timeout (a read
// changes nothing, so the client may simply retry).
func (rc *reqCtx) partitionRead(code wire.CommandCode, req appender) ([]byte, error) {
	body, err := req.Append(nil)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(rc.r.Context(), rc.api.readWait)
	defer cancel()
	reply, err := rc.api.opts.Backend.Do(ctx, rc.caller, code, body)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && rc.r.Context().Err() == nil {
		return nil, errPartitionReadTimeout
	}
	return reply, err
}
