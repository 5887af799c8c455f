package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The binary message file of 'message send --input-file' and 'message poll
// --output-file', the reference's (apache/iggy core/common/src/types/message/
// iggy_message.rs, to_bytes and from_bytes): records back to back, each
//
//	header, 64 bytes little-endian:
//	  0  checksum             u64
//	  8  id                   u128
//	 24  offset               u64
//	 32  timestamp            u64  µs, the server's append time
//	 40  origin_timestamp     u64  µs, the producer's time
//	 48  user_headers_length  u32
//	 52  payload_length       u32
//	 56  reserved             u64
//	then payload_length bytes of payload and user_headers_length bytes of user
//	headers (the TLV block of the protocol).
const fileRecordHeaderSize = 64

// fileRecord is one message of a binary message file.
type fileRecord struct {
	checksum        uint64
	id              wire.Uint128
	offset          uint64
	timestamp       uint64
	originTimestamp uint64
	payload         []byte
	userHeaders     []byte
}

func (r *fileRecord) size() int { return fileRecordHeaderSize + len(r.payload) + len(r.userHeaders) }

// appendFileRecord encodes r.
func appendFileRecord(b []byte, r *fileRecord) []byte {
	le := binary.LittleEndian
	b = le.AppendUint64(b, r.checksum)
	b = le.AppendUint64(b, r.id.Lo)
	b = le.AppendUint64(b, r.id.Hi)
	b = le.AppendUint64(b, r.offset)
	b = le.AppendUint64(b, r.timestamp)
	b = le.AppendUint64(b, r.originTimestamp)
	b = le.AppendUint32(b, uint32(len(r.userHeaders)))
	b = le.AppendUint32(b, uint32(len(r.payload)))
	b = le.AppendUint64(b, 0)
	b = append(b, r.payload...)
	return append(b, r.userHeaders...)
}

// errRecordEnd is a clean end of the file, between records.
var errRecordEnd = errors.New("end of file")

// fileRecordReader reads records one at a time, so a large file is never held
// whole.
type fileRecordReader struct {
	r *bufio.Reader
	// offset is the byte offset of the next record, for the error of a record
	// that does not parse.
	offset int64
}

// next reads a record; errRecordEnd at a clean end, an error naming the offset
// for a record that does not parse (the reference stops reading there too).
func (fr *fileRecordReader) next() (*fileRecord, error) {
	var h [fileRecordHeaderSize]byte
	n, err := io.ReadFull(fr.r, h[:])
	if err == io.EOF {
		return nil, errRecordEnd
	}
	if err != nil {
		return nil, fmt.Errorf("a record header is cut short (%d of %d bytes) at offset %d", n, fileRecordHeaderSize, fr.offset)
	}
	le := binary.LittleEndian
	r := &fileRecord{
		checksum:        le.Uint64(h[0:]),
		id:              wire.Uint128{Lo: le.Uint64(h[8:]), Hi: le.Uint64(h[16:])},
		offset:          le.Uint64(h[24:]),
		timestamp:       le.Uint64(h[32:]),
		originTimestamp: le.Uint64(h[40:]),
	}
	headersLen, payloadLen := le.Uint32(h[48:]), le.Uint32(h[52:])
	if payloadLen == 0 || payloadLen > wire.DefaultMessageSizeMax || headersLen > wire.DefaultMessageSizeMax {
		return nil, fmt.Errorf("the record at offset %d claims %d payload and %d header bytes", fr.offset, payloadLen, headersLen)
	}
	body := make([]byte, int(payloadLen)+int(headersLen))
	if n, err := io.ReadFull(fr.r, body); err != nil {
		return nil, fmt.Errorf("the record at offset %d is cut short (%d of %d bytes)", fr.offset, fileRecordHeaderSize+n, fileRecordHeaderSize+len(body))
	}
	r.payload, r.userHeaders = body[:payloadLen], body[payloadLen:]
	if len(r.userHeaders) == 0 {
		r.userHeaders = nil
	} else if _, err := wire.ValidateUserHeaders(r.userHeaders); err != nil {
		return nil, fmt.Errorf("the record at offset %d has malformed user headers: %v", fr.offset, err)
	}
	fr.offset += int64(r.size())
	return r, nil
}
