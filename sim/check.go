package sim

import (
	"bytes"
	"fmt"

	"github.com/iggy-shard/iggy-shard/metaplane"
)

func (c *cluster) describe() string {
	s := ""
	for _, nd := range c.nodes {
		for g := range c.groups {
			if core := c.groupCore(nd, g); core != nil {
				s += fmt.Sprintf("r%d g%d %v view %d op %d commit %d/%d; ", nd.id, g, core.Status(), core.View(), core.Op(), core.CommitMin(), core.CommitMax())
				if g != metadataGroupIndex {
					s += fmt.Sprintf("applied %d; ", nd.part.store.SimApplied(partitionKey(g)))
				}
			}
		}
	}
	for _, cl := range c.clients {
		s += fmt.Sprintf("c%d req %d finished %d; ", cl.id, cl.request, cl.finished)
	}
	return s
}

func (c *cluster) finalChecks() {
	gc := c.meta
	want := c.nodes[0].meta.plane.Snapshot()
	for _, nd := range c.nodes {
		p := nd.meta.plane
		core := p.Core()
		for op := uint64(1); op <= core.CommitMin(); op++ {
			h, ok := core.Header(op)
			if !ok {
				continue // older than the journal window
			}
			if committed := gc.committed[op]; h.Checksum != committed {
				c.fail("log equality: replica %d holds %x at committed op %d, the cluster committed %x", nd.id, h.Checksum.Lo, op, committed.Lo)
				return
			}
		}
		// Every replica applied every committed op (done() saw them all at one
		// commit point), so the states are the same bytes: the snapshot, its
		// metadata and its client table.
		if got := p.Snapshot(); !bytes.Equal(got, want) {
			c.fail("replica %d ends with another state than replica 0: %s", nd.id, snapshotDiff(got, want))
			return
		}
	}
	metadataCommit := c.nodes[0].meta.plane.Core().CommitMin()
	for _, cl := range c.clients {
		for request, reply := range cl.replies {
			if reply.refused {
				continue // denied at admission: nothing committed
			}
			if gc.committedRequest[reply.op][0] != uint64(cl.id)+1 || metadataCommit < reply.op {
				c.fail("acknowledged request %d of client %d (op %d) is not in the committed log", request, cl.id, reply.op)
				return
			}
		}
	}
	c.revocationsFinalChecks()
	c.storeFinalChecks()
}

// snapshotDiff says where two snapshots differ: the applied op's head, the
// metadata or the client table, at which byte.
func snapshotDiff(a, b []byte) string {
	pa, errA := metaplane.SplitSnapshot(a)
	pb, errB := metaplane.SplitSnapshot(b)
	if errA != nil || errB != nil {
		return fmt.Sprintf("snapshots that do not split (%v, %v)", errA, errB)
	}
	first := func(x, y []byte) int {
		for i := range min(len(x), len(y)) {
			if x[i] != y[i] {
				return i
			}
		}
		return min(len(x), len(y))
	}
	switch {
	case pa.At != pb.At:
		return fmt.Sprintf("applied %+v and %+v", pa.At, pb.At)
	case !bytes.Equal(pa.MetadataBytes, pb.MetadataBytes):
		return fmt.Sprintf("metadata of %d and %d bytes, first difference at byte %d", len(pa.MetadataBytes), len(pb.MetadataBytes), first(pa.MetadataBytes, pb.MetadataBytes))
	default:
		return fmt.Sprintf("client tables (ICT2) of %d and %d bytes, first difference at byte %d", len(pa.TableICT2), len(pb.TableICT2), first(pa.TableICT2, pb.TableICT2))
	}
}
