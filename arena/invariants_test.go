package arena

import (
	"fmt"
	"math/bits"
)

// checkInvariants verifies that each class's free stack and in-use bitmap agree: the
// free indices are distinct, in range and not marked in use, and the bitmap marks
// exactly the others. Tests call it after every step; it is O(buffers).
func (a *Arena) checkInvariants() error {
	for ci := range a.classes {
		c := &a.classes[ci]
		count := len(c.free)
		if c.freeCount < 0 || c.freeCount > count {
			return fmt.Errorf("class %d: free count %d outside [0, %d]", ci, c.freeCount, count)
		}
		seen := make([]bool, count)
		for _, index := range c.free[:c.freeCount] {
			if int(index) >= count || seen[index] {
				return fmt.Errorf("class %d: free index %d out of range or twice on the stack", ci, index)
			}
			seen[index] = true
			if c.inUse[index/64]&(1<<(index%64)) != 0 {
				return fmt.Errorf("class %d: buffer %d both free and in use", ci, index)
			}
		}
		marked := 0
		for w, word := range c.inUse {
			marked += bits.OnesCount64(word)
			if last := len(c.inUse) - 1; w == last && count%64 != 0 && word>>(count%64) != 0 {
				return fmt.Errorf("class %d: bits beyond buffer %d marked", ci, count-1)
			}
		}
		if marked != count-c.freeCount {
			return fmt.Errorf("class %d: %d buffers marked in use, %d not on the free stack", ci, marked, count-c.freeCount)
		}
		if c.highWaterCount < count-c.freeCount || c.highWaterCount > count {
			return fmt.Errorf("class %d: high water %d, in use %d of %d", ci, c.highWaterCount, count-c.freeCount, count)
		}
	}
	return nil
}
