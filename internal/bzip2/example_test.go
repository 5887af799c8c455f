package bzip2_test

import (
	"bytes"
	stdbzip2 "compress/bzip2"
	"fmt"
	"io"
	"strings"

	"github.com/iggy-shard/iggy-shard/internal/bzip2"
)

func ExampleNewWriter() {
	var compressed bytes.Buffer
	z := bzip2.NewWriter(&compressed, 9)
	text := strings.Repeat("partition 1 offset 42 committed\n", 1000)
	if _, err := io.WriteString(z, text); err != nil {
		panic(err)
	}
	if err := z.Close(); err != nil {
		panic(err)
	}

	header := string(compressed.Bytes()[:4])
	back, err := io.ReadAll(stdbzip2.NewReader(&compressed))
	if err != nil {
		panic(err)
	}
	fmt.Println(len(text), "bytes in, header", header, "round trip", string(back) == text)
	// Output: 32000 bytes in, header BZh9 round trip true
}
