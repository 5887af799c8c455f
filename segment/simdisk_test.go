package segment

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// A completed sync makes durable exactly what reads see, whatever writes and
// truncations (shrinking or growing) came before it: SimDisk applies the writes
// since the last sync to the durable image instead of copying the file.
func TestSimDiskSyncMakesDurableWhatReadsSee(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	d := NewSimDisk(7)
	f, _, err := d.Open("f", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	file := d.file(f)
	run := func(r *Request) {
		r.File = f
		d.Submit(r)
		for d.InFlight() > 0 {
			d.Poll(true)
		}
	}
	for i := range 2000 {
		switch rng.IntN(4) {
		case 0, 1:
			data := make([]byte, 1+rng.IntN(64))
			for j := range data {
				data[j] = byte(rng.Uint32())
			}
			run(&Request{Op: OpWrite, Offset: int64(rng.IntN(len(file.data) + 32)), Data: data, Done: func(*Request) {}})
		case 2:
			run(&Request{Op: OpTruncate, Offset: int64(rng.IntN(len(file.data) + 64)), Done: func(*Request) {}})
		case 3:
			run(&Request{Op: OpSync, Done: func(*Request) {}})
			if !bytes.Equal(file.durable, file.data) {
				t.Fatalf("step %d: after a sync the durable image (%d bytes) differs from what reads see (%d bytes)", i, len(file.durable), len(file.data))
			}
		}
	}
}
