package metafiles

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/vsr"
)

// TableSizeFileName records the size of the client table the data directory's
// ops were applied with ([metadata] clients_table_max). The size decides which
// session a full table evicts, and an op of an evicted session is skipped: the
// journal's ops replayed under another size could evict other sessions and skip
// writes that were acknowledged, or apply writes that were refused. So the size
// changes only at a start with nothing to replay; a data directory without the
// record was written with the default.
const TableSizeFileName = "clients_table_max"

func (f *Files) clientsTableMax() int {
	if f.ClientsTableMax > 0 {
		return f.ClientsTableMax
	}
	return vsr.ClientsTableMaxDefault
}

// keepTableSize refuses a start whose table size differs from the one the ops it
// replays were applied with, and records the size in use.
func (f *Files) keepTableSize(rec *metaplane.Recovered) error {
	size := f.clientsTableMax()
	written := vsr.ClientsTableMaxDefault
	raw, err := f.store.ReadFile(TableSizeFileName)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("metadata client table size: %w", err)
	default:
		if written, err = strconv.Atoi(strings.TrimSpace(string(raw))); err != nil || written < 2 {
			return fmt.Errorf("metadata client table size record %q does not read as a size", raw)
		}
	}
	if written == size && err == nil {
		return nil
	}
	if !rec.Fresh && written != size {
		replayed := len(rec.Faulty)
		for i := range rec.Entries {
			if rec.Entries[i].Header.Op > rec.Snapshot.At.Op {
				replayed++
			}
		}
		if replayed > 0 {
			return fmt.Errorf("metadata.clients_table_max = %d, but the %d metadata ops the journal replays were applied with a client table of %d: "+
				"start once with %d (the size changes at a start with no op to replay, after a snapshot)", size, replayed, written, written)
		}
		f.log.Info("metadata client table resized", "setting", "metadata.clients_table_max", "from", written, "to", size)
	}
	if err := f.store.ReplaceFile(TableSizeFileName, []byte(strconv.Itoa(size)+"\n")); err != nil {
		return fmt.Errorf("metadata client table size: %w", err)
	}
	return nil
}
