package wire

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Golden vectors are hand-written hex dumps kept under testdata/. The format is made
// for a reader checking bytes against the spec, not for a machine:
//
//	# LOGIN_USER (38): username "iggy", password "iggy"   <- a comment line
//	04                 # username length                  <- hex, then a comment
//	69 67 67 79        # "iggy"
//
//	05 00 00 00        # blank lines are ignored, so fields can be grouped
//
// Every byte is two hex digits; whitespace between bytes is optional ("0400" and
// "04 00" are the same two bytes). Everything from a '#' to the end of the line is a
// comment. A file holds exactly one vector: the concatenation of all its bytes.

// parseGolden turns the text of a golden file into its bytes. It reports a malformed
// line by number, so a typo in a vector is found at once.
func parseGolden(text string) ([]byte, error) {
	var out []byte
	for i, line := range strings.Split(text, "\n") {
		if hash := strings.IndexByte(line, '#'); hash >= 0 {
			line = line[:hash]
		}
		digits := strings.Join(strings.Fields(line), "")
		if digits == "" {
			continue
		}
		b, err := hex.DecodeString(digits)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, b...)
	}
	return out, nil
}

// readGolden returns the bytes of testdata/<name> (name may contain a sub-directory,
// e.g. "requests/login_user.hex"); it fails the test when the file is missing or
// malformed.
func readGolden(tb testing.TB, name string) []byte {
	tb.Helper()
	text, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatalf("golden %s: %v", name, err)
	}
	b, err := parseGolden(string(text))
	if err != nil {
		tb.Fatalf("golden %s: %v", name, err)
	}
	return b
}

// checkGolden fails the test when got differs from the golden vector, printing both
// as hex with the first differing offset.
func checkGolden(tb testing.TB, name string, got []byte) {
	tb.Helper()
	want := readGolden(tb, name)
	if bytes.Equal(got, want) {
		return
	}
	at := 0
	for at < len(got) && at < len(want) && got[at] == want[at] {
		at++
	}
	tb.Errorf("golden %s: differs at byte %d\n got: % x\nwant: % x", name, at, got, want)
}

// goldenFiles lists the golden vectors under testdata/<dir> (sorted), for tests and
// fuzz seeds that walk all of them.
func goldenFiles(tb testing.TB, dir string) []string {
	tb.Helper()
	entries, err := os.ReadDir(filepath.Join("testdata", dir))
	if err != nil {
		tb.Fatalf("golden dir %s: %v", dir, err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".hex") {
			names = append(names, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(names)
	return names
}

func TestParseGolden(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    []byte
		wantErr bool
	}{
		{name: "empty", text: "", want: nil},
		{name: "comments only", text: "# nothing\n\n   # still nothing\n", want: nil},
		{name: "spaced", text: "01 02 03\n", want: []byte{1, 2, 3}},
		{name: "packed", text: "0102\n03", want: []byte{1, 2, 3}},
		{name: "inline comment", text: "04 # len\n69 67 67 79 # iggy\n", want: []byte{4, 'i', 'g', 'g', 'y'}},
		{name: "crlf and tabs", text: "ff\t00\r\nAB\r\n", want: []byte{0xff, 0, 0xab}},
		{name: "odd digits", text: "012\n", wantErr: true},
		{name: "not hex", text: "zz\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseGolden(tt.text)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && !bytes.Equal(got, tt.want) {
				t.Fatalf("got % x, want % x", got, tt.want)
			}
		})
	}
}
