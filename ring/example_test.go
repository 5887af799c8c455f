package ring_test

import (
	"fmt"
	"runtime"

	"github.com/iggy-shard/iggy-shard/ring"
)

// A shard's loop in miniature: the owner thread creates the ring, tracks
// operations in a Table, submits, waits and reaps without allocating.
func Example() {
	runtime.LockOSThread() // SINGLE_ISSUER: this thread owns the ring
	defer runtime.UnlockOSThread()
	r, err := ring.New(ring.DefaultOptions(64))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()

	ops := ring.NewTable[string](64)
	for _, name := range []string{"first", "second"} {
		userData, _ := ops.Add(name)
		sqe, err := r.GetSQE()
		if err != nil {
			fmt.Println(err)
			return
		}
		sqe.PrepareNop()
		sqe.UserData = userData
	}
	if _, err := r.SubmitAndWait(2); err != nil {
		fmt.Println(err)
		return
	}
	var batch [16]ring.CQE
	n := r.ReapCQEs(batch[:])
	for i := range n {
		name, last, ok := ops.Complete(&batch[i])
		fmt.Println(*name, batch[i].Res, last, ok)
	}
	// Output:
	// first 0 true true
	// second 0 true true
}
