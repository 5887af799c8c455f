package ring

import (
	"testing"
)

type testOp struct {
	name string
	fd   int
}

func TestTableAddGetRelease(t *testing.T) {
	table := NewTable[testOp](2)
	ud0, ok := table.Add(testOp{name: "a", fd: 3})
	if !ok || ud0 == 0 || ud0&UserDataUntracked != 0 {
		t.Fatalf("Add = %#x, %v", ud0, ok)
	}
	ud1, _ := table.Add(testOp{name: "b", fd: 4})
	if _, ok := table.Add(testOp{}); ok {
		t.Fatal("Add beyond capacity succeeded")
	}
	if op, ok := table.Get(ud1); !ok || op.name != "b" {
		t.Fatalf("Get(%#x) = %+v, %v", ud1, op, ok)
	}
	if !table.Release(ud0) || table.Release(ud0) {
		t.Fatal("Release should succeed once")
	}
	// The slot is reused with a new generation: the old user_data is stale.
	ud2, _ := table.Add(testOp{name: "c"})
	if uint32(ud2) != uint32(ud0) || ud2 == ud0 {
		t.Fatalf("reused slot user_data %#x vs old %#x", ud2, ud0)
	}
	if _, ok := table.Get(ud0); ok {
		t.Fatal("stale user_data found the slot's new owner")
	}
	for _, foreign := range []uint64{0, UserDataUntracked | uint64(uint32(ud2)), 1<<32 | 99, ^uint64(0)} {
		if _, ok := table.Get(foreign); ok {
			t.Fatalf("Get(%#x) found an entry", foreign)
		}
	}
	if table.InUse() != 2 {
		t.Fatalf("InUse = %d", table.InUse())
	}
}

func TestTableCompleteMultishot(t *testing.T) {
	table := NewTable[testOp](4)
	ud, _ := table.Add(testOp{name: "accept"})
	for range 3 {
		op, last, ok := table.Complete(&CQE{UserData: ud, Res: 5, Flags: CQEFMore})
		if !ok || last || op.name != "accept" {
			t.Fatalf("Complete with MORE = %+v, last %v, ok %v", op, last, ok)
		}
	}
	op, last, ok := table.Complete(&CQE{UserData: ud, Res: -125})
	if !ok || !last || op.name != "accept" {
		t.Fatalf("final Complete = %+v, last %v, ok %v", op, last, ok)
	}
	if _, _, ok := table.Complete(&CQE{UserData: ud}); ok {
		t.Fatal("CQE after the last one found the slot")
	}
	if table.InUse() != 0 {
		t.Fatalf("InUse = %d", table.InUse())
	}
}

func TestTableDoesNotAllocate(t *testing.T) {
	table := NewTable[testOp](8)
	cqe := CQE{}
	allocs := testing.AllocsPerRun(1000, func() {
		ud, _ := table.Add(testOp{name: "x", fd: 1})
		table.Get(ud)
		cqe.UserData = ud
		table.Complete(&cqe)
	})
	if allocs != 0 {
		t.Fatalf("table operations allocate %v times", allocs)
	}
}

// FuzzTable drives a Table with arbitrary operations and checks it against a
// map model: live entries are found with their values, stale and foreign
// user_data never are, capacity is respected, nothing panics.
func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 3, 0, 1})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1})
	f.Add([]byte{3, 255, 0, 2, 7, 1, 0})
	f.Fuzz(func(t *testing.T, program []byte) {
		const capacity = 4
		table := NewTable[int](capacity)
		model := map[uint64]int{}
		var issued []uint64 // every user_data ever handed out
		for i, b := range program {
			switch b % 4 {
			case 0: // add
				ud, ok := table.Add(i)
				if ok != (len(model) < capacity) {
					t.Fatalf("step %d: Add ok=%v with %d live", i, ok, len(model))
				}
				if ok {
					if _, dup := model[ud]; dup {
						t.Fatalf("step %d: user_data %#x handed out twice", i, ud)
					}
					model[ud] = i
					issued = append(issued, ud)
				}
			case 1, 2: // release (1) or complete without MORE (2) an issued user_data
				if len(issued) == 0 {
					continue
				}
				ud := issued[int(b/4)%len(issued)]
				_, live := model[ud]
				var ok bool
				if b%4 == 1 {
					ok = table.Release(ud)
				} else {
					var v *int
					v, _, ok = table.Complete(&CQE{UserData: ud})
					if ok && *v != model[ud] {
						t.Fatalf("step %d: Complete value %d, want %d", i, *v, model[ud])
					}
				}
				if ok != live {
					t.Fatalf("step %d: release of %#x ok=%v, live=%v", i, ud, ok, live)
				}
				delete(model, ud)
			case 3: // look up arbitrary user_data built from the program
				ud := uint64(b) << 56
				for j := 0; j < 8 && i+j < len(program); j++ {
					ud |= uint64(program[i+j]) << (8 * j)
				}
				v, ok := table.Get(ud)
				want, live := model[ud]
				if ok != live || (ok && *v != want) {
					t.Fatalf("step %d: Get(%#x) = %v, live=%v", i, ud, ok, live)
				}
			}
			if table.InUse() != len(model) {
				t.Fatalf("step %d: InUse %d, model %d", i, table.InUse(), len(model))
			}
		}
		for ud, want := range model {
			if v, ok := table.Get(ud); !ok || *v != want {
				t.Fatalf("live %#x lost", ud)
			}
		}
	})
}
