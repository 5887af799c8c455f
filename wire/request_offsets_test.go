package wire

import (
	"bytes"
	"errors"
	"testing"
)

// The partition writes answer every decode failure with 20, the read with 3 (which
// the server turns into an empty reply).
func TestConsumerOffsetDecodeFailures(t *testing.T) {
	store := readGolden(t, "requests/store_consumer_offset.hex")
	del := readGolden(t, "requests/delete_consumer_offset.hex")
	get := readGolden(t, "requests/get_consumer_offset.hex")
	withLast := func(b []byte, v byte) []byte {
		out := bytes.Clone(b)
		out[len(out)-1] = v
		return out
	}
	tests := []struct {
		name string
		req  requestCodec
		body []byte
		want ErrorCode
	}{
		{"store: ack 2", &StoreConsumerOffset{}, withLast(store, 2), ErrResourceNotFound},
		{"store: no ack", &StoreConsumerOffset{}, store[:len(store)-1], ErrResourceNotFound},
		{"store: consumer kind 3", &StoreConsumerOffset{}, append([]byte{3}, store[1:]...), ErrResourceNotFound},
		{"delete: ack 255", &DeleteConsumerOffset{}, withLast(del, 255), ErrResourceNotFound},
		{"delete: no ack", &DeleteConsumerOffset{}, del[:len(del)-1], ErrResourceNotFound},
		{"delete: empty", &DeleteConsumerOffset{}, nil, ErrResourceNotFound},
		{"get: consumer kind 0", &GetConsumerOffset{}, append([]byte{0}, get[1:]...), ErrInvalidCommand},
		{"get: short", &GetConsumerOffset{}, get[:len(get)-1], ErrInvalidCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.req.Decode(tt.body); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := (&StoreConsumerOffset{Consumer: consumerOne, StreamID: streamOne, TopicID: topicEvents, Ack: 2}).Append(nil); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("Append ack 2: %v", err)
	}
}

func TestConsumerOffsetPartitionFlag(t *testing.T) {
	body := readGolden(t, "requests/get_consumer_offset.hex")
	flagAt := len(body) - OptionalPartitionSizeBytes
	tests := []struct {
		flag  byte
		value []byte
		want  OptionalPartition
	}{
		{0, []byte{0, 0, 0, 0}, OptionalPartition{}},
		{0, []byte{9, 0, 0, 0}, OptionalPartition{}},
		{2, []byte{9, 0, 0, 0}, OptionalPartition{}},
		{1, []byte{9, 0, 0, 0}, SomePartition(9)},
	}
	for _, tt := range tests {
		b := bytes.Clone(body)
		b[flagAt] = tt.flag
		copy(b[flagAt+1:], tt.value)
		var r GetConsumerOffset
		if err := r.Decode(b); err != nil || r.Partition != tt.want {
			t.Errorf("flag %d value % x: %+v, %v; want %+v", tt.flag, tt.value, r.Partition, err, tt.want)
		}
	}
}
