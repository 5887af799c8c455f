package partitionhost

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/partitiondir"
)

// A directory opens in the life its contents are of: its record's purge generation
// when the record is of the incarnation, the committed one otherwise.
func TestOpenedLife(t *testing.T) {
	for _, tc := range []struct {
		name      string
		have      partitiondir.Record
		present   bool
		committed uint64
		want      uint64
	}{
		{"no record: the committed generation", partitiondir.Record{}, false, 3, 3},
		{"purge above the snapshot carried out before the stop", partitiondir.Record{Generation: 4, CreatedRevision: 10}, true, 3, 4},
		{"purge committed, not carried out: settle purges it", partitiondir.Record{Generation: 2, CreatedRevision: 10}, true, 3, 2},
		{"record of another incarnation: its leftovers are not its life", partitiondir.Record{Generation: 9, CreatedRevision: 7}, true, 3, 3},
	} {
		got := openedLife(10, tc.committed, tc.have, tc.present)
		if got != (partition.Incarnation{CreatedAtMicros: 10, PurgeGeneration: tc.want}) {
			t.Errorf("%s: %+v, want generation %d", tc.name, got, tc.want)
		}
	}
}
