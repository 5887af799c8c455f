// Package clustertest runs real iggy-shard clusters on one machine and tests and
// measures them from outside, as a user's client sees them: the binary is built once
// per test run, each node is a child process with a TOML file of its own (three
// nodes on 127.0.0.1, free ports for tcp, tcp_replica and metrics, short but valid
// timings), and the nodes are killed with SIGKILL, restarted and compared through
// package client and, for their replicated state, a diagnostic read over HTTP.
//
// The tests: failover with the primary killed, with a backup killed, and with two
// nodes killed in turn, every acknowledged message read back in order exactly once
// from the survivors and the restarted node serving the same bytes; a node with the
// wrong shared secret or another cluster name kept out; a client dialed at a
// follower writing to the leader. The benchmarks: replicated produce throughput and
// batch latency against a single node in the same run, the time from a primary's
// SIGKILL to the first acknowledged write on the new one, and a restarted node's
// catch-up time.
//
// At the end of every test the nodes still running are waited for until each has
// applied the highest op any of them knows committed, and must then hold the same
// replicated state, metadata and client table whole: each node serves its
// digest on /debug/replicated-state (server/statedigest.go).
//
// The package has no code outside its tests.
package clustertest
