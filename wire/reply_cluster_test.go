package wire

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func TestClusterMetadataRoundTrip(t *testing.T) {
	checkRoundTrip(t, 15, func(r *rand.Rand) *ClusterMetadata {
		m := ClusterMetadata{Name: randName(r)}
		for range r.IntN(4) {
			m.Nodes = append(m.Nodes, ClusterNode{
				Name: randName(r), IP: []byte("192.168.0.1"), TCPPort: uint16(r.Uint32()),
				QUICPort: uint16(r.Uint32()), HTTPPort: uint16(r.Uint32()), WebSocketPort: uint16(r.Uint32()),
				Role: uint8(r.IntN(2)), Status: uint8(r.IntN(6)),
			})
		}
		return &m
	})
}

func TestClusterNodeRoleAndStatusAreChecked(t *testing.T) {
	for _, n := range []ClusterNode{{Role: 2}, {Status: 6}, {Role: 0xff, Status: 0xff}} {
		body := (&ClusterMetadata{Name: []byte("c"), Nodes: []ClusterNode{n}}).Append(nil)
		var m ClusterMetadata
		if err := m.Decode(body); !errors.Is(err, ErrInvalidCommand) {
			t.Fatalf("role %d status %d: err = %v", n.Role, n.Status, err)
		}
	}
	// Status 5 (unknown) is valid on the wire even though the Go SDK refuses it.
	body := (&ClusterMetadata{Name: []byte("c"), Nodes: []ClusterNode{{Status: ClusterNodeUnknown}}}).Append(nil)
	var m ClusterMetadata
	if err := m.Decode(body); err != nil {
		t.Fatal(err)
	}
}

func TestIterClusterNodes(t *testing.T) {
	name, it := IterClusterNodes(readGolden(t, "replies/cluster_metadata.hex"))
	n := 0
	for it.Next() {
		if string(it.Value().Name) != "iggy-node" || it.Value().TCPPort != 8090 {
			t.Fatalf("node %+v", it.Value())
		}
		n++
	}
	if string(name) != "single-node" || n != 1 || it.Err() != nil {
		t.Fatalf("name %q, %d nodes, err %v", name, n, it.Err())
	}
}
