package httpapi

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

const oneMessage = `{"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":"aGk="}]}`

func TestPartitionWritesAreBounded(t *testing.T) {
	a, f, _ := testAPI(t)
	entered, release := make(chan struct{}, 256), make(chan struct{})
	f.replies[wire.CodeSendMessages] = func(Caller, []byte) ([]byte, error) {
		entered <- struct{}{}
		<-release
		return wire.AppendSendConfirmations(nil, wire.SendConfirmation{}), nil
	}
	var wg sync.WaitGroup
	codes := make(chan int, 256)
	send := func(auth string) {
		defer wg.Done()
		codes <- serve(a, "POST", "/streams/0/topics/0/messages", auth, oneMessage).Code
	}
	// Four credentials at their cap of 32 fill the node's 128.
	var creds []string
	for c := 0; c < 4; c++ {
		creds = append(creds, bearer(t, a, uint32(c)))
		for i := 0; i < 32; i++ {
			wg.Add(1)
			go send(creds[c])
		}
	}
	for i := 0; i < 128; i++ {
		<-entered
	}
	w := serve(a, "POST", "/streams/0/topics/0/messages", creds[0], oneMessage)
	checkAnswer(t, "a 33rd write of one credential", w.Code, w.Body.String(), 429,
		`{"id":429,"code":"too_many_in_flight_writes","reason":"session reached its in-flight write cap; await outstanding writes and retry","field":null}`)
	if w.Header().Get("Retry-After") != "1" {
		t.Fatal("429 without retry-after")
	}
	w = serve(a, "PUT", "/streams/0/topics/0/consumer-offsets", bearer(t, a, 9), `{"offset":1}`)
	checkAnswer(t, "a 129th write", w.Code, w.Body.String(), 503,
		`{"id":503,"code":"server_busy","reason":"shard is at its in-flight write budget; retry with backoff","field":null}`)
	close(release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 201 {
			t.Fatalf("a write within the caps: %d", c)
		}
	}
	if a.writes.total != 0 || len(a.writes.byCredential) != 0 {
		t.Fatalf("the gate holds %d writes (%v) after all ended", a.writes.total, a.writes.byCredential)
	}
	// Freed, the credential writes again.
	if w := serve(a, "POST", "/streams/0/topics/0/messages", creds[0], oneMessage); w.Code != 201 {
		t.Fatalf("after the writes ended: %d", w.Code)
	}
}

func TestPartitionWriteTimeouts(t *testing.T) {
	a, f, _ := testAPI(t)
	a.writes.wait = 20 * time.Millisecond
	silent := func(ctx context.Context) ([]byte, error) { <-ctx.Done(); return nil, ctx.Err() }
	f.replies[wire.CodeSendMessages] = nil
	b := &ctxBackend{fakeBackend: f, silent: silent}
	a.opts.Backend = b
	auth := bearer(t, a, 0)
	w := serve(a, "POST", "/streams/0/topics/0/messages", auth, oneMessage)
	checkAnswer(t, "an unacknowledged produce", w.Code, w.Body.String(), 504,
		`{"id":504,"code":"produce_timeout","reason":"produce was not acknowledged in time; the write may still commit","field":null}`)
	w = serve(a, "DELETE", "/streams/0/topics/0/consumer-offsets/1", auth, "")
	checkAnswer(t, "an unacknowledged offset delete", w.Code, w.Body.String(), 504,
		`{"id":504,"code":"offset_write_timeout","reason":"consumer-offset write was not acknowledged in time; the write may still commit","field":null}`)
}

func TestPartitionReadTimeouts(t *testing.T) {
	a, f, _ := testAPI(t)
	a.readWait = 20 * time.Millisecond
	// Without the read's own bound the owner gives up after a second and the
	// request would be answered as any failure to reach the planes (503).
	silent := func(ctx context.Context) ([]byte, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
			return nil, errors.New("the owner gave up")
		}
	}
	a.opts.Backend = &ctxBackend{fakeBackend: f, silent: silent}
	auth := bearer(t, a, 0)
	const timedOut = `{"id":504,"code":"partition_read_timeout","reason":"the partition owner did not answer the read in time; retry","field":null}`
	for _, target := range []string{
		"/streams/0/topics/0/messages?consumer_id=1&partition_id=0&kind=offset&value=0&count=10",
		"/streams/0/topics/0/messages",
		"/streams/0/topics/0/consumer-offsets?consumer_id=1&partition_id=0",
	} {
		w := serve(a, "GET", target, auth, "")
		checkAnswer(t, "an unanswered GET "+target, w.Code, w.Body.String(), 504, timedOut)
		if w.Header().Get("Retry-After") != "" {
			t.Errorf("GET %s: retry-after %q on a 504", target, w.Header().Get("Retry-After"))
		}
	}
}

// ctxBackend is a fake whose partition writes and reads never answer but by their
// context.
type ctxBackend struct {
	*fakeBackend
	silent func(ctx context.Context) ([]byte, error)
}

func (b *ctxBackend) Do(ctx context.Context, c Caller, code wire.CommandCode, body []byte) ([]byte, error) {
	switch code {
	case wire.CodeSendMessages, wire.CodeStoreConsumerOffset, wire.CodeDeleteConsumerOffset,
		wire.CodePollMessages, wire.CodeGetConsumerOffset:
		return b.silent(ctx)
	}
	return b.fakeBackend.Do(ctx, c, code, body)
}
