package wire

// ClusterMetadata is the GetClusterMetadata reply (apache/iggy
// core/binary_protocol/src/responses/system/get_cluster_metadata.rs):
//
//	[name_len u32][name]
//	[nodes_count u32]
//	nodes_count × ClusterNode:
//	  [name_len u32][name][ip_len u32][ip]
//	  [tcp_port u16][quic_port u16][http_port u16][websocket_port u16]   0 = disabled
//	  [role u8][status u8]
//
// The Go SDK calls it after every login and dials the leader's ip:tcp_port; a
// single-node server must report exactly one node (role leader, status healthy)
// or every login waits 5 s for a leader.
type ClusterMetadata struct {
	Name  []byte
	Nodes []ClusterNode
}

// ClusterNode is one node of ClusterMetadata, 18 + name + ip bytes.
type ClusterNode struct {
	Name []byte
	// IP is the host clients should dial (the advertised address).
	IP            []byte
	TCPPort       uint16
	QUICPort      uint16
	HTTPPort      uint16
	WebSocketPort uint16
	Role          uint8
	Status        uint8
}

// Cluster node roles and statuses. The Go SDK accepts roles 0..1 and statuses 0..4;
// status 5 (unknown) is valid on the wire but fails its decode.
const (
	ClusterRoleLeader   uint8 = 0
	ClusterRoleFollower uint8 = 1

	ClusterNodeHealthy     uint8 = 0
	ClusterNodeStarting    uint8 = 1
	ClusterNodeStopping    uint8 = 2
	ClusterNodeUnreachable uint8 = 3
	ClusterNodeMaintenance uint8 = 4
	ClusterNodeUnknown     uint8 = 5
)

const clusterNodeMinBytes = 18

// EncodedLen is the exact number of bytes Append writes.
func (n *ClusterNode) EncodedLen() int { return clusterNodeMinBytes + len(n.Name) + len(n.IP) }

// Append encodes n onto b.
func (n *ClusterNode) Append(b []byte) []byte {
	b = appendBlock32(b, n.Name)
	b = appendBlock32(b, n.IP)
	b = appendU16(b, n.TCPPort)
	b = appendU16(b, n.QUICPort)
	b = appendU16(b, n.HTTPPort)
	b = appendU16(b, n.WebSocketPort)
	b = appendU8(b, n.Role)
	return appendU8(b, n.Status)
}

func (n *ClusterNode) decodeFrom(d *decoder) {
	n.Name = d.str32()
	n.IP = d.str32()
	n.TCPPort = d.u16()
	n.QUICPort = d.u16()
	n.HTTPPort = d.u16()
	n.WebSocketPort = d.u16()
	n.Role = d.u8()
	n.Status = d.u8()
	if d.err == nil && (n.Role > ClusterRoleFollower || n.Status > ClusterNodeUnknown) {
		d.fail(ErrInvalidCommand)
	}
}

// EncodedLen is the exact number of bytes Append writes.
func (m *ClusterMetadata) EncodedLen() int {
	n := 4 + len(m.Name) + 4
	for i := range m.Nodes {
		n += m.Nodes[i].EncodedLen()
	}
	return n
}

// Append encodes m onto b.
func (m *ClusterMetadata) Append(b []byte) []byte {
	b = appendBlock32(b, m.Name)
	b = appendU32(b, uint32(len(m.Nodes)))
	for i := range m.Nodes {
		b = m.Nodes[i].Append(b)
	}
	return b
}

// Decode reads a GetClusterMetadata body, reusing the capacity of m.Nodes. A role
// other than leader/follower or a status above 5 is malformed.
func (m *ClusterMetadata) Decode(body []byte) error {
	d := newDecoder(body)
	name := d.str32()
	count := d.u32()
	it := newCountedIter[ClusterNode](d, count, clusterNodeMinBytes)
	nodes, err := collect(m.Nodes[:0], it)
	if err != nil {
		return err
	}
	m.Name = name
	m.Nodes = nodes
	return nil
}

// IterClusterNodes walks the nodes of a GetClusterMetadata body without allocating;
// the cluster name is returned alongside.
func IterClusterNodes(body []byte) (name []byte, it ListIter[ClusterNode, *ClusterNode]) {
	d := newDecoder(body)
	name = d.str32()
	count := d.u32()
	return name, newCountedIter[ClusterNode](d, count, clusterNodeMinBytes)
}
