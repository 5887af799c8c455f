package jsonview

import (
	"math"
	"testing"
)

// The byte-size strings of the HTTP API's JSON: its table (http-api §6.3), and the
// unit edges.
func TestByteSize(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0 B", 1: "1 B", 999: "999 B", 1000: "1 KB", 1024: "1 KiB", 1234: "1.234 KB", 1536: "1.5 KiB", 10000: "10 KB",
		4096000: "4.096 MB", 52342784: "51116 KiB", 1048576: "1 MiB", 1073741824: "1 GiB",
		1001: "1.001 KB", 1000001: "1000.001 KB", 1000000001: "1000000.001 KB", 2048000: "2.048 MB", 1 << 60: "1 EiB", 16e18: "16 EB",
		1<<60 + 1: "1152921504606846.977 KB", 1<<10 + 1: "1.025 KB", 1<<20 + 1: "1048.577 KB", 1<<20 + 1000: "1049.576 KB", 3 << 30: "3 GiB", 3e9: "3 GB",
		math.MaxUint64: "18446744073709551.615 KB",
	} {
		if got := ByteSize(n); got != want {
			t.Errorf("ByteSize(%d) = %q, want %q", n, got, want)
		}
	}
}
