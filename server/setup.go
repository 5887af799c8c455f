package server

import (
	"time"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/vsr"
)

// setup is what a node runs with: its configuration (package config), and what
// tests and benchmarks change of it beyond what a configuration can say. Start
// runs the zero testHooks: production.
type setup struct {
	config.Config
	testHooks
}

// testHooks are the settings no configuration file reaches.
type testHooks struct {
	// clock (tests) replaces the wall clock and the shards' clock, so that expiries,
	// heartbeats and timeouts are tested by moving it.
	clock func() time.Time
	// quietCommits (tests): shard 0 does not tell the shards of its commits, so
	// their views catch up only when they serve (package metaview).
	quietCommits bool
	// clusterTiming (tests) replaces the consensus timers of the cluster section,
	// below the floors Validate keeps (a 2 s heartbeat timeout), so that a test
	// elects a primary in a fraction of a second.
	clusterTiming *vsr.Timing
	// metaMutation (benchmarks, tests) breaks a rule of the metadata plane
	// (metaplane.Mutation): BenchmarkClusterSessionChurn's baseline ends a closed
	// connection's session locally, without the EndSessions op.
	metaMutation metaplane.Mutation
	// openFilesMax (tests) is the node's budget of open partition files, split
	// over its shards; 0 gives each shard segment.FilesBudget(shards).
	openFilesMax int
	// metaJournalSlots (tests) shrinks the metadata core's header window, so that
	// a replica a few dozen ops behind needs a state transfer.
	metaJournalSlots int
	// metaOldCheckpointRule (tests) takes SnapshotIntervalOps as configured,
	// however far past the metadata journal's window (the rule before
	// metacheckpoint.go), so that a test can produce the data directory of a
	// cluster the old binary wedged.
	metaOldCheckpointRule bool
	// pollPlans (tests, benchmarks) replaces which polls are answered by a
	// plan of file runs (pollPlanConfig).
	pollPlans *partition.PlanConfig
	// callerSessionsMax (tests) caps the sessions of callers' credentials
	// (metahost.RouterConfig.CallerSessionsMax); 0 is the reference's cap.
	callerSessionsMax int
}
