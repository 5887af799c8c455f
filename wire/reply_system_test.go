package wire

import (
	"archive/zip"
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

func randClientHeader(r *rand.Rand) ClientHeader {
	return ClientHeader{
		ClientID: r.Uint32(), UserID: r.Uint32(), Transport: uint8(r.Uint32()),
		Address: append([]byte("10.1.2.3:"), randName(r)...), ConsumerGroupsCount: r.Uint32(),
	}
}

func TestSystemRepliesRoundTrip(t *testing.T) {
	t.Run("ClientHeader", func(t *testing.T) {
		checkRoundTrip(t, 13, func(r *rand.Rand) *ClientHeader {
			h := randClientHeader(r)
			return &h
		})
	})
	t.Run("ClientDetails", func(t *testing.T) {
		checkRoundTrip(t, 14, func(r *rand.Rand) *ClientDetails {
			c := ClientDetails{ClientHeader: randClientHeader(r)}
			for range r.IntN(4) {
				c.Groups = append(c.Groups, ClientGroup{StreamID: r.Uint32(), TopicID: r.Uint32(), GroupID: r.Uint32()})
			}
			c.ConsumerGroupsCount = uint32(len(c.Groups))
			return &c
		})
	})
}

func TestClientHeaderAddressMustBeUTF8(t *testing.T) {
	b := (&ClientHeader{Address: []byte("a:1")}).Append(nil)
	b[13] = 0xff
	var h ClientHeader
	if err := h.Decode(b); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("err = %v", err)
	}
}

func TestDecodeEmptyReply(t *testing.T) {
	if err := DecodeEmptyReply(nil); err != nil {
		t.Fatal(err)
	}
	if err := DecodeEmptyReply([]byte{0}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("err = %v", err)
	}
}

// A real (empty and one-entry) ZIP archive decodes; bytes that are not one do not.
func TestSnapshotDecode(t *testing.T) {
	for _, entries := range []int{0, 1} {
		var buf bytes.Buffer
		w := zip.NewWriter(&buf)
		for range entries {
			f, err := w.Create("test.txt")
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte("hello"))
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		var s Snapshot
		if err := s.Decode(buf.Bytes()); err != nil {
			t.Fatalf("%d entries: %v", entries, err)
		}
		if got := s.Append(nil); !bytes.Equal(got, buf.Bytes()) || s.EncodedLen() != buf.Len() {
			t.Fatal("archive not carried verbatim")
		}
	}
	var s Snapshot
	for _, bad := range [][]byte{nil, []byte("PK"), bytes.Repeat([]byte{'x'}, 30)} {
		if err := s.Decode(bad); !errors.Is(err, ErrInvalidCommand) {
			t.Fatalf("%q: err = %v", bad, err)
		}
	}
}
