package wire

import "encoding/binary"

// DecodeEmptyReply checks a body that must be empty: Ping, Logout, and the payload of
// every framed write that returns nothing.
func DecodeEmptyReply(body []byte) error {
	if len(body) != 0 {
		return ErrInvalidCommand
	}
	return nil
}

// The transport byte of a ClientHeader.
const (
	ClientTransportTCP       uint8 = 1 // also TCP-TLS
	ClientTransportQUIC      uint8 = 2
	ClientTransportHTTP      uint8 = 3
	ClientTransportWebSocket uint8 = 4
)

// ClientTransportName is the name the reference shows for a ClientHeader's
// transport byte ("TCP", "QUIC", "HTTP", "WebSocket"), "Unknown" for another.
func ClientTransportName(t uint8) string {
	switch t {
	case ClientTransportTCP:
		return "TCP"
	case ClientTransportQUIC:
		return "QUIC"
	case ClientTransportHTTP:
		return "HTTP"
	case ClientTransportWebSocket:
		return "WebSocket"
	}
	return "Unknown"
}

// ClientUserIDNone is a ClientHeader's user id for a connection that is not logged in.
const ClientUserIDNone uint32 = 0xFFFFFFFF

// ClientHeader is one connection in GetClients and the head of ClientDetails
// (apache/iggy core/binary_protocol/src/responses/clients/), 17 + A bytes:
//
//	+-----------+---------+-----------+-------------+---------+-----------------------+
//	| client_id | user_id | transport | address_len | address | consumer_groups_count |
//	| u32       | u32     | u8        | u32 (A)     | A bytes | u32 (G)               |
//	+-----------+---------+-----------+-------------+---------+-----------------------+
//
// GetClients reports G but never the group entries; ClientDetails carries them.
type ClientHeader struct {
	ClientID  uint32
	UserID    uint32
	Transport uint8
	// Address is the peer's ip:port.
	Address             []byte
	ConsumerGroupsCount uint32
}

// EncodedLen is the exact number of bytes Append writes.
func (h *ClientHeader) EncodedLen() int { return 17 + len(h.Address) }

// Append encodes h onto b.
func (h *ClientHeader) Append(b []byte) []byte {
	b = appendU32(b, h.ClientID)
	b = appendU32(b, h.UserID)
	b = appendU8(b, h.Transport)
	b = appendBlock32(b, h.Address)
	return appendU32(b, h.ConsumerGroupsCount)
}

func (h *ClientHeader) decodeFrom(d *decoder) {
	h.ClientID = d.u32()
	h.UserID = d.u32()
	h.Transport = d.u8()
	h.Address = d.str32()
	h.ConsumerGroupsCount = d.u32()
}

// Decode reads a body that holds exactly one ClientHeader.
func (h *ClientHeader) Decode(body []byte) error { return decodeExact(h, body) }

// IterClients walks a GetClients body: ClientHeaders back to back, no count.
func IterClients(body []byte) ListIter[ClientHeader, *ClientHeader] {
	return newUncountedIter[ClientHeader](body)
}

// AppendClients decodes a GetClients body onto dst.
func AppendClients(dst []ClientHeader, body []byte) ([]ClientHeader, error) {
	return collect(dst, IterClients(body))
}

// AppendClientsReply encodes a GetClients body: the headers, without group entries.
func AppendClientsReply(b []byte, clients []ClientHeader) []byte {
	for i := range clients {
		b = clients[i].Append(b)
	}
	return b
}

// ClientGroup is one consumer group a connection's client id is a member of.
type ClientGroup struct {
	StreamID uint32
	TopicID  uint32
	GroupID  uint32
}

const clientGroupNumBytes = 12

// ClientDetails is the GetMe and GetClient reply: a ClientHeader followed by exactly
// ConsumerGroupsCount 12-byte group entries.
type ClientDetails struct {
	ClientHeader
	Groups []ClientGroup
}

// EncodedLen is the exact number of bytes Append writes.
func (c *ClientDetails) EncodedLen() int {
	return c.ClientHeader.EncodedLen() + clientGroupNumBytes*len(c.Groups)
}

// Append encodes c onto b. It panics when ConsumerGroupsCount disagrees with Groups.
func (c *ClientDetails) Append(b []byte) []byte {
	if int(c.ConsumerGroupsCount) != len(c.Groups) {
		panic("wire: ClientDetails.ConsumerGroupsCount != len(Groups)")
	}
	b = c.ClientHeader.Append(b)
	for _, g := range c.Groups {
		b = appendU32(b, g.StreamID)
		b = appendU32(b, g.TopicID)
		b = appendU32(b, g.GroupID)
	}
	return b
}

// Decode reads a GetMe or GetClient body, reusing the capacity of c.Groups. An empty
// body is GetClient's "no connection has that id" and decodes as ErrClientNotFound.
func (c *ClientDetails) Decode(body []byte) error {
	if len(body) == 0 {
		return ErrClientNotFound
	}
	d := newDecoder(body)
	var h ClientHeader
	h.decodeFrom(&d)
	if !d.countFits(h.ConsumerGroupsCount, clientGroupNumBytes) {
		return d.err
	}
	raw := d.take(clientGroupNumBytes * int(h.ConsumerGroupsCount))
	if err := d.end(); err != nil {
		return err
	}
	groups := growLen(c.Groups[:0], int(h.ConsumerGroupsCount))
	for i := range groups {
		e := raw[clientGroupNumBytes*i:]
		groups[i] = ClientGroup{
			StreamID: binary.LittleEndian.Uint32(e),
			TopicID:  binary.LittleEndian.Uint32(e[4:]),
			GroupID:  binary.LittleEndian.Uint32(e[8:]),
		}
	}
	c.ClientHeader = h
	c.Groups = groups
	return nil
}

// Snapshot is the GetSnapshot reply: a complete ZIP archive, unframed.
type Snapshot struct {
	Archive []byte
}

// zipEndOfCentralDirectoryBytes is the smallest ZIP archive: an end-of-central-
// directory record and nothing else.
const zipEndOfCentralDirectoryBytes = 22

// EncodedLen is the exact number of bytes Append writes.
func (s *Snapshot) EncodedLen() int { return len(s.Archive) }

// Append encodes s onto b.
func (s *Snapshot) Append(b []byte) []byte { return append(b, s.Archive...) }

// Decode reads a GetSnapshot body. A successful snapshot is never empty; the body
// must at least look like a ZIP archive (starting "PK", long enough for an
// end-of-central-directory record). The archive's contents are not inspected here.
func (s *Snapshot) Decode(body []byte) error {
	if len(body) < zipEndOfCentralDirectoryBytes || body[0] != 'P' || body[1] != 'K' {
		return ErrInvalidCommand
	}
	s.Archive = body
	return nil
}
