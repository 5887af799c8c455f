package wire

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestPermissionsGolden(t *testing.T) {
	tests := []struct {
		file string
		want Permissions
	}{
		{
			file: "replies/permissions_none.hex",
			want: Permissions{Global: GlobalPermissions{
				ManageServers: true, ReadServers: true, ManageUsers: true, ReadUsers: true,
				ManageStreams: true, ReadStreams: true, ManageTopics: true, ReadTopics: true,
				PollMessages: true, SendMessages: true,
			}},
		},
		{
			file: "replies/permissions_streams.hex",
			want: Permissions{
				Global: GlobalPermissions{ReadServers: true, ReadUsers: true, ReadStreams: true, ReadTopics: true, PollMessages: true},
				Streams: []StreamPermissions{
					{
						StreamID: 0, ManageStream: true, ReadStream: true, ReadTopics: true, PollMessages: true, SendMessages: true,
						Topics: []TopicPermissions{
							{TopicID: 2, ManageTopic: true, ReadTopic: true},
							{TopicID: 7, ReadTopic: true, PollMessages: true, SendMessages: true},
						},
					},
					{StreamID: 5, ReadStream: true, ReadTopics: true, PollMessages: true},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			checkGolden(t, tt.file, tt.want.Append(nil))
			if got, want := tt.want.EncodedLen(), len(readGolden(t, tt.file)); got != want {
				t.Errorf("EncodedLen = %d, golden has %d bytes", got, want)
			}
			var got Permissions
			if err := got.Decode(readGolden(t, tt.file)); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Decode = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPermissionsDecodeMalformed(t *testing.T) {
	valid := readGolden(t, "replies/permissions_streams.hex")
	tests := []struct {
		name string
		body []byte
	}{
		{name: "empty", body: nil},
		{name: "global only, no has_streams", body: valid[:10]},
		{name: "has_streams is 2", body: append(bytes.Clone(valid[:10]), 2)},
		{name: "stream entry cut short", body: valid[:20]},
		{name: "last byte missing", body: valid[:len(valid)-1]},
		{name: "trailing byte", body: append(bytes.Clone(valid), 0)},
		{name: "has_next_topic is 0xff", body: func() []byte {
			b := bytes.Clone(valid)
			b[11+4+6+1+8] = 0xff // first topic's continuation byte
			return b
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := ValidatePermissions(tt.body); !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("ValidatePermissions err = %v", err)
			}
			p := Permissions{Streams: []StreamPermissions{{StreamID: 99}}}
			err := p.Decode(tt.body)
			if !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("Decode err = %v, want %v", err, ErrInvalidCommand)
			}
			if len(p.Streams) != 1 || p.Streams[0].StreamID != 99 {
				t.Fatalf("Decode changed its receiver on error: %+v", p)
			}
		})
	}
}

// Decoders read any non-zero flag as true, so a 0x02 flag decodes and re-encodes as 1.
func TestPermissionsNonZeroFlagIsTrue(t *testing.T) {
	body := []byte{2, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0}
	var p Permissions
	if err := p.Decode(body); err != nil {
		t.Fatal(err)
	}
	if !p.Global.ManageServers || !p.Global.SendMessages || p.Global.ReadServers {
		t.Fatalf("flags = %+v", p.Global)
	}
	if got := p.Append(nil); !bytes.Equal(got, []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}) {
		t.Fatalf("re-encoded % x", got)
	}
}

func randomPermissions(r *rand.Rand) Permissions {
	flag := func() bool { return r.IntN(2) == 1 }
	p := Permissions{Global: GlobalPermissions{
		ManageServers: flag(), ReadServers: flag(), ManageUsers: flag(), ReadUsers: flag(),
		ManageStreams: flag(), ReadStreams: flag(), ManageTopics: flag(), ReadTopics: flag(),
		PollMessages: flag(), SendMessages: flag(),
	}}
	for range r.IntN(4) {
		s := StreamPermissions{
			StreamID: r.Uint32(), ManageStream: flag(), ReadStream: flag(), ManageTopics: flag(),
			ReadTopics: flag(), PollMessages: flag(), SendMessages: flag(),
		}
		for range r.IntN(4) {
			s.Topics = append(s.Topics, TopicPermissions{
				TopicID: r.Uint32(), ManageTopic: flag(), ReadTopic: flag(), PollMessages: flag(), SendMessages: flag(),
			})
		}
		p.Streams = append(p.Streams, s)
	}
	return p
}

func TestPermissionsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		want := randomPermissions(r)
		b := want.Append(nil)
		if len(b) != want.EncodedLen() {
			t.Fatalf("case %d: Append wrote %d bytes, EncodedLen says %d", i, len(b), want.EncodedLen())
		}
		var got Permissions
		if err := got.Decode(b); err != nil {
			t.Fatalf("case %d: Decode: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: round trip\n got %+v\nwant %+v", i, got, want)
		}
	}
}

// Each stream's Topics must be capped, so appending to one cannot clobber the next.
func TestPermissionsDecodedTopicsAreCapped(t *testing.T) {
	var p Permissions
	if err := p.Decode(readGolden(t, "replies/permissions_streams.hex")); err != nil {
		t.Fatal(err)
	}
	if c := cap(p.Streams[0].Topics); c != len(p.Streams[0].Topics) {
		t.Fatalf("cap %d != len %d", c, len(p.Streams[0].Topics))
	}
}

func TestPermissionsAppendDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	p := randomPermissions(r)
	buf := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(100, func() { buf = p.Append(buf[:0]) })
	if allocs != 0 {
		t.Fatalf("Append allocated %v times per run", allocs)
	}
}

func FuzzDecodePermissions(f *testing.F) {
	f.Add(readGolden(f, "replies/permissions_none.hex"))
	f.Add(readGolden(f, "replies/permissions_streams.hex"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		var p Permissions
		err := p.Decode(body)
		if (err == nil) != (ValidatePermissions(body) == nil) {
			t.Fatalf("Decode err %v disagrees with ValidatePermissions", err)
		}
		if err != nil {
			return
		}
		// Every accepted block re-encodes to itself, except that non-zero flags
		// normalise to 1; a second round must then be exact.
		again := p.Append(nil)
		if len(again) != len(body) {
			t.Fatalf("re-encoded %d bytes from a %d-byte block", len(again), len(body))
		}
		var q Permissions
		if err := q.Decode(again); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("second round differs")
		}
	})
}
