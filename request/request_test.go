package request

import (
	"context"
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// TestRefused: a job's answer is a refusal when it is an eviction, a status, or
// a committed rejection in the result section of a result-framed reply.
func TestRefused(t *testing.T) {
	rejection := wire.AppendResultRejection(nil, wire.ErrStreamNameAlreadyExists)
	for _, tc := range []struct {
		name             string
		job              Job
		evicted, refused bool
	}{
		{"eviction", Job{Kind: KindLogin, Out: Outcome{Evict: wire.EvictionInvalidCredentials}}, true, false},
		{"status", Job{Kind: KindRead, Out: Outcome{Status: wire.ErrUnauthorized}}, false, true},
		{"committed rejection", Job{Kind: KindWrite, Out: Outcome{Reply: rejection}}, false, true},
		{"rejection in a raw frame", Job{Kind: KindWrite, Out: Outcome{RawFrame: true, Reply: append(make([]byte, wire.HeaderSize), rejection...)}}, false, true},
		{"success", Job{Kind: KindWrite, Out: Outcome{Reply: wire.AppendResultSuccess(nil)}}, false, false},
		{"a read's reply is no result section", Job{Kind: KindRead, Out: Outcome{Reply: rejection}}, false, false},
	} {
		if evicted, refused := tc.job.Refused(); evicted != tc.evicted || refused != tc.refused {
			t.Errorf("%s: evicted %v refused %v, want %v %v", tc.name, evicted, refused, tc.evicted, tc.refused)
		}
	}
}

// TestCallWait: a call's wait ends with its answer, its context's error, or
// ErrStopped when the server stopped without answering it.
func TestCallWait(t *testing.T) {
	c := NewCall(Caller{}, wire.CodePing, nil)
	c.Finish([]byte("reply"), nil)
	if reply, err := c.Wait(context.Background(), nil); err != nil || string(reply) != "reply" {
		t.Fatalf("an answered call: %q, %v", reply, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewCall(Caller{}, wire.CodePing, nil).Wait(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a call whose context ended: %v", err)
	}
	stopped := make(chan struct{})
	close(stopped)
	if _, err := NewCall(Caller{}, wire.CodePing, nil).Wait(context.Background(), stopped); !errors.Is(err, ErrStopped) {
		t.Fatalf("a call of a stopped server: %v", err)
	}
	answered := NewCall(Caller{}, wire.CodePing, nil)
	answered.Finish(nil, wire.ErrUnauthenticated)
	if _, err := answered.Wait(context.Background(), stopped); !errors.Is(err, wire.ErrUnauthenticated) {
		t.Fatalf("a call answered as the server stopped: %v", err)
	}
}
