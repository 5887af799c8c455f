//go:build iggypoison

package server

// A build with the iggypoison tag poisons the request frames of sends as they go
// back to the arena, as the server's tests do (leaderlend.go): for running
// another package's cluster tests (internal/clustertest, IGGY_CLUSTERTEST_BIN)
// against such a binary.
func init() { poisonReleasedFrames = true }
