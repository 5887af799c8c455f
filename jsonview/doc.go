// Package jsonview is Apache Iggy's JSON objects (iggy.apache.org/docs, "HTTP API";
// apache/iggy core/common/src/types/) made from the binary protocol's replies: the
// HTTP API answers with them and the CLI's --output json prints them, so both
// write one rendering.
//
// Field names and order are the reference's (encoding/json writes struct fields in
// order); timestamps and durations are microseconds, sizes byte-size strings
// (ByteSize), u128 message ids bare integers (U128), options
// {"key": {"value": "...", "explicit": bool}}.
package jsonview
