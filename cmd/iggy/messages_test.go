package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/iggy-shard/iggy-shard/jsonview"
)

// messageTopic makes a stream with a topic of n partitions for a test.
func messageTopic(t *testing.T, e *env, partitions int) string {
	t.Helper()
	s := name("msgs")
	e.ok("stream", "create", s)
	e.ok("topic", "create", s, "t", strconv.Itoa(partitions), "none")
	return s
}

func TestMessageSendAndPoll(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := messageTopic(t, e, 2)

	r := e.ok("message", "send", "-p", "1", "-H", "source:string:cli,retries:uint8:3", s, "t", "hello", "hello world")
	has(t, r, "Executing send messages to topic with ID: t and stream with ID: "+s, "Sent 2 messages to topic with ID: t and stream with ID: "+s)

	r = e.ok("message", "poll", "--first", "-m", "10", "-s", s, "t", "1")
	has(t, r, "Polled messages from topic with ID: t and stream with ID: "+s+" (from partition with ID: 1)",
		"Polled 2 messages of total size ", "Offset  Timestamp", "  hello\n", "  hello world\n",
		"header source (string) = cli", "header retries (uint8) = 3")

	var polled jsonview.Polled
	e.json(&polled, "message", "poll", "--offset", "1", s, "t", "1")
	if polled.PartitionID != 1 || polled.CurrentOffset != 1 || polled.Count != 1 || len(polled.Messages) != 1 {
		t.Fatalf("poll --offset 1: %+v", polled)
	}
	m := polled.Messages[0]
	if string(m.Payload) != "hello world" || m.Header.Offset != 1 || m.Header.PayloadLength != 11 || m.Header.Reserved != 0 {
		t.Fatalf("polled message: %+v", m)
	}
	// User headers come back sorted by key, their values in base64.
	headers, _ := json.Marshal(m.UserHeaders)
	if want := `[{"key":{"kind":"string","value":"cmV0cmllcw=="},"value":{"kind":"uint8","value":"Aw=="}},` +
		`{"key":{"kind":"string","value":"c291cmNl"},"value":{"kind":"string","value":"Y2xp"}}]`; string(headers) != want {
		t.Fatalf("user headers:\n got %s\nwant %s", headers, want)
	}
	// Message ids are u128 written as bare integers.
	var rawPoll struct {
		Messages []struct {
			Header struct {
				ID json.Number `json:"id"`
			} `json:"header"`
		} `json:"messages"`
	}
	r = e.ok("--output", "json", "message", "poll", "--first", s, "t", "1")
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.UseNumber()
	if err := dec.Decode(&rawPoll); err != nil || len(rawPoll.Messages) != 1 || rawPoll.Messages[0].Header.ID == "" {
		t.Fatalf("message id: %v %+v", err, rawPoll)
	}

	// The command's own --output is the global one.
	r = e.ok("message", "poll", "--first", "--output", "json", s, "t", "1")
	if err := jsonUnmarshal(r.stdout, &polled); err != nil || polled.Count != 1 {
		t.Fatalf("poll --output json: %v\n%s", err, r)
	}

	// Raw output: the payloads' bytes and nothing else.
	r = e.ok("message", "poll", "--first", "-m", "2", "--output", "raw", s, "t", "1")
	if r.stdout != "hellohello world" {
		t.Fatalf("raw: %q", r.stdout)
	}
	r = e.ok("message", "poll", "--last", s, "t", "1")
	has(t, r, "  hello world\n")
	if strings.Contains(r.stdout, "  hello\n") {
		t.Fatalf("--last printed the first message:\n%s", r)
	}

	// One message per line of standard input; a key picks one partition.
	e.ok("topic", "create", s, "keyed", "3", "none")
	e.stdin = strings.NewReader("one\r\ntwo\nthree")
	has(t, e.ok("message", "send", "-m", "user-7", s, "keyed"), "Sent 3 messages")
	var sent jsonview.SendConfirmations
	e.stdin = strings.NewReader("four\n")
	e.json(&sent, "message", "send", "-m", "user-7", s, "keyed")
	if len(sent.Confirmations) != 1 || sent.Confirmations[0].BaseOffset != 3 {
		t.Fatalf("send confirmations: %+v", sent)
	}
	keyed := strconv.FormatUint(uint64(sent.Confirmations[0].PartitionID), 10)
	r = e.ok("message", "poll", "--first", "-m", "10", "--output", "raw", s, "keyed", keyed)
	if r.stdout != "onetwothreefour" {
		t.Fatalf("keyed messages on partition %s: %q", keyed, r.stdout)
	}
	e.stdin = strings.NewReader("a\n\nb\n")
	fails(t, e.root("message", "send", s, "t"), exitUsage, "line 2 of the input is empty")
	fails(t, e.root("message", "send", "-p", "9", s, "t", "x"), exitFailed)
	fails(t, e.root("message", "send", s, "nothere", "x"), exitFailed)
	fails(t, e.root("message", "poll", "--first", s, "t", "9"), exitFailed, "partition 9 not found in topic 't' of stream '"+s+"' (3007)")
	e.stdin = strings.NewReader("")
	fails(t, e.root("message", "send", s, "t"), exitUsage, "no messages to send")
}

// Payloads that are not printable text are quoted, so one message stays one line.
func TestPayloadText(t *testing.T) {
	for in, want := range map[string]string{
		"plain text ü":  "plain text ü",
		"two\nlines":    `"two\nlines"`,
		"tab\there":     `"tab\there"`,
		"\xff\xfebytes": "\ufffdbytes",
		"bell\a":        `"bell\a"`,
	} {
		if got := payloadText([]byte(in)); got != want {
			t.Errorf("payloadText(%q) = %s, want %s", in, got, want)
		}
	}
}

// poll --output-file writes the binary message file that send --input-file reads.
func TestMessageFileRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := messageTopic(t, e, 1)
	e.ok("message", "send", "-H", "k:int32:-5", s, "t", "alpha", "beta", "gamma")
	file := filepath.Join(t.TempDir(), "messages.bin")

	r := e.ok("message", "poll", "--first", "-m", "3", "--output-file", file, s, "t", "0")
	has(t, r, "Storing messages to "+file+" binary file", "Stored 3 messages of total size ")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	headerBytes := (1 + 4 + len("k")) + (1 + 4 + 4) // [kind][len][key] [kind][len][int32]
	if want := 3*fileRecordHeaderSize + len("alphabetagamma") + 3*headerBytes; len(data) != want {
		t.Fatalf("file of %d bytes, want %d", len(data), want)
	}

	e.ok("topic", "create", s, "copy", "1", "none")
	r = e.ok("message", "send", "--input-file", file, s, "copy")
	has(t, r, fmt.Sprintf("Created 3 messages using %d bytes from %s", len(data), file), "Sent 3 messages")
	var orig, copied jsonview.Polled
	e.json(&orig, "message", "poll", "--first", "-m", "3", s, "t", "0")
	e.json(&copied, "message", "poll", "--first", "-m", "3", s, "copy", "0")
	for i := range 3 {
		o, c := orig.Messages[i], copied.Messages[i]
		if !bytes.Equal(o.Payload, c.Payload) || o.Header.ID != c.Header.ID || o.Header.OriginTimestamp != c.Header.OriginTimestamp {
			t.Fatalf("message %d: original %+v, copy %+v", i, o, c)
		}
		oh, _ := json.Marshal(o.UserHeaders)
		ch, _ := json.Marshal(c.UserHeaders)
		if string(oh) != string(ch) {
			t.Fatalf("message %d headers: %s vs %s", i, oh, ch)
		}
	}

	// A cut file sends what parsed before the cut, then says where it stopped.
	cut := filepath.Join(t.TempDir(), "cut.bin")
	os.WriteFile(cut, data[:len(data)-3], 0o600)
	r = e.root("message", "send", "--input-file", cut, s, "copy")
	fails(t, r, exitFailed, "failed to parse message from bytes", "is cut short")
}

// --auto-commit stores the offset of the last message printed: when stdout fails
// after two messages, the consumer's offset is the second one's.
func TestPollAutoCommitOnlyPrinted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := messageTopic(t, e, 1)
	e.ok("message", "send", s, "t", "m0", "m1", "m2", "m3", "m4")

	args := []string{"--tcp-server-address", serverAddr, "-t", rootToken, "message", "poll", "--first", "-m", "5",
		"--auto-commit", "-c", "3", "--output", "raw", s, "t", "0"}
	code, stderr := e.exec(&failingWriter{left: 2}, args...)
	if code != exitFailed {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	var o jsonview.ConsumerOffset
	e.json(&o, "consumer-offset", "get", "3", s, "t", "0")
	if o.StoredOffset != 1 {
		t.Fatalf("stored offset %d after printing offsets 0 and 1", o.StoredOffset)
	}
	// --next goes on after it; without --auto-commit nothing is stored.
	r := e.ok("message", "poll", "--next", "-m", "2", "-c", "3", "--output", "raw", s, "t", "0")
	if r.stdout != "m2m3" {
		t.Fatalf("--next after the commit: %q", r.stdout)
	}
	e.json(&o, "consumer-offset", "get", "3", s, "t", "0")
	if o.StoredOffset != 1 {
		t.Fatalf("a poll without --auto-commit stored offset %d", o.StoredOffset)
	}
	e.ok("message", "poll", "--next", "-m", "2", "-c", "3", "-a", s, "t", "0")
	e.json(&o, "consumer-offset", "get", "3", s, "t", "0")
	if o.StoredOffset != 3 {
		t.Fatalf("stored offset %d after printing up to 3", o.StoredOffset)
	}
}

// failingWriter takes left writes, then fails: a closed pipe.
type failingWriter struct{ left int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.left == 0 {
		return 0, errors.New("broken pipe")
	}
	w.left--
	return len(p), nil
}

// --follow prints messages as they arrive, commits what it printed, and Ctrl-C
// ends it with exit status 0.
func TestPollFollow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := messageTopic(t, e, 1)
	e.ok("message", "send", s, "t", "before")

	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	follower := newEnv(t)
	follower.ctx = ctx
	var out syncBuffer
	var wg sync.WaitGroup
	var code int
	var stderr string
	wg.Add(1)
	go func() {
		defer wg.Done()
		code, stderr = follower.exec(&out, "--tcp-server-address", serverAddr, "-t", rootToken, "--output", "json",
			"message", "poll", "--first", "--follow", "--interval", "20ms", "-a", "-c", "9", s, "t", "0")
	}()
	eventually(t, "the first message is printed", func() bool { return strings.Contains(out.String(), `"YmVmb3Jl"`) })
	e.ok("message", "send", s, "t", "during-1", "during-2")
	eventually(t, "the later messages are printed", func() bool { return strings.Count(out.String(), "\n") == 3 })
	interrupt()
	wg.Wait()
	if code != exitOK {
		t.Fatalf("Ctrl-C: exit %d, stderr %s", code, stderr)
	}
	var payloads []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m jsonview.PolledMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("follow prints one JSON message per line: %q: %v", line, err)
		}
		payloads = append(payloads, string(m.Payload))
	}
	if strings.Join(payloads, ",") != "before,during-1,during-2" {
		t.Fatalf("followed payloads: %v", payloads)
	}
	var o jsonview.ConsumerOffset
	e.json(&o, "consumer-offset", "get", "9", s, "t", "0")
	if o.StoredOffset != 2 {
		t.Fatalf("stored offset %d after following to offset 2", o.StoredOffset)
	}
}

// A long send from a file shows its progress on a terminal, and none when stderr
// is a pipe.
func TestSendProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := messageTopic(t, e, 1)
	path := filepath.Join(t.TempDir(), "lines.txt")
	var lines strings.Builder
	for i := range 2500 {
		fmt.Fprintf(&lines, "line %d\n", i)
	}
	os.WriteFile(path, []byte(lines.String()), 0o600)
	for _, terminal := range []bool{true, false} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		e.stdin, e.errTerminal = f, terminal
		r := e.ok("message", "send", s, "t")
		f.Close()
		has(t, r, "Sent 2500 messages")
		if shown := strings.Contains(r.stderr, "\rSending: 1000 messages"); shown != terminal {
			t.Fatalf("terminal %v: progress shown %v:\n%q", terminal, shown, r.stderr)
		}
	}
	var topic jsonview.Topic
	e.json(&topic, "topic", "get", s, "t")
	if topic.MessagesCount != 5000 {
		t.Fatalf("messages after two sends of 2500: %d", topic.MessagesCount)
	}
}

// --encryption-key encrypts payloads on send and decrypts them on poll, in the
// reference's layout: a 12-byte nonce, then the AES-256-GCM ciphertext and tag.
func TestEncryptionKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := messageTopic(t, e, 1)
	key := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // "0123456789abcdef0123456789abcdef"
	e.ok("--encryption-key", key, "message", "send", s, "t", "top secret")

	r := e.ok("--encryption-key", key, "message", "poll", "--first", "--output", "raw", s, "t", "0")
	if r.stdout != "top secret" {
		t.Fatalf("decrypted payload: %q", r.stdout)
	}
	var stored jsonview.Polled
	e.json(&stored, "message", "poll", "--first", s, "t", "0")
	sealed := stored.Messages[0].Payload
	if len(sealed) != 12+len("top secret")+16 || bytes.Contains(sealed, []byte("secret")) {
		t.Fatalf("stored payload: %x", sealed)
	}
	c, _ := newPayloadCipher(key)
	if plain, err := c.decrypt(sealed); err != nil || string(plain) != "top secret" {
		t.Fatalf("the stored payload does not open as nonce ‖ ciphertext: %q %v", plain, err)
	}
	var decrypted jsonview.Polled
	e.json(&decrypted, "--encryption-key", key, "message", "poll", "--first", s, "t", "0")
	if string(decrypted.Messages[0].Payload) != "top secret" || decrypted.Messages[0].Header.PayloadLength != len("top secret") {
		t.Fatalf("decrypted JSON: %+v", decrypted.Messages[0])
	}

	other := "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="
	fails(t, e.root("--encryption-key", other, "message", "poll", "--first", s, "t", "0"), exitFailed,
		"message at offset 0: the payload does not decrypt with --encryption-key")
	fails(t, e.root("--encryption-key", "c2hvcnQ=", "message", "send", s, "t", "x"), exitUsage, "Invalid encryption key provided")

	// A context keeps the key, and context show masks it.
	e.raw("context", "create", "enc", "--tcp-server-address", serverAddr, "-t", rootToken)
	path := filepath.Join(e.home, contextsFile)
	data, _ := os.ReadFile(path)
	os.WriteFile(path, append(data, []byte("encryption_key = \""+key+"\"\n")...), 0o600)
	e.raw("context", "use", "enc")
	if r := e.raw("message", "poll", "--first", "--output", "raw", s, "t", "0"); r.stdout != "top secret" {
		t.Fatalf("with the context's key:\n%s", r)
	}
	if r := e.raw("context", "show", "enc"); !strings.Contains(r.stdout, "Encryption Key      ********\n") || strings.Contains(r.stdout, key) {
		t.Fatalf("context show:\n%s", r)
	}
}

// A send goes in batches bounded in messages and in bytes: 2500 small lines are
// three batches, five lines of 300 KB two.
func TestSendBatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := messageTopic(t, e, 1)
	var sent jsonview.SendConfirmations
	e.stdin = strings.NewReader(strings.Repeat("x\n", 2500))
	e.json(&sent, "message", "send", s, "t")
	if len(sent.Confirmations) != 3 || sent.Confirmations[2].BaseOffset != 2000 {
		t.Fatalf("2500 lines: %+v", sent.Confirmations)
	}
	e.stdin = strings.NewReader(strings.Repeat(strings.Repeat("y", 300_000)+"\n", 5))
	e.json(&sent, "message", "send", s, "t")
	if len(sent.Confirmations) != 2 || sent.Confirmations[1].BaseOffset != 2504 {
		t.Fatalf("five lines of 300 KB: %+v", sent.Confirmations)
	}
}
