package server

import (
	"log/slog"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metafiles"
	"github.com/iggy-shard/iggy-shard/metahost"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Shard 0's handler drives the metadata host (package metahost) and is its
// Shard0: the seam between the transports' handler and the host.

// metaPlane and metaRouter are the host's plane and router, as the server and
// its tests name them.
type (
	metaPlane  = metahost.Plane
	metaRouter = metahost.Router
)

const (
	serverVersion   = metahost.ServerVersion
	journalSlotsMin = metaplane.JournalSlotsMin
)

// replicaInbound is one replica frame on its way to the shard that steps it:
// retained on the shard that owns the peer's connection, released there.
type replicaInbound struct {
	frame shard.RetainedReplicaFrame
	owner int
}

// openMetaPlane opens the metadata plane of the data directory systemPath.
func openMetaPlane(log *slog.Logger, systemPath string, cfg *setup, nowMicros uint64) (*metaPlane, error) {
	return metahost.OpenOS(log, systemPath, cfg.metaplaneConfig(), nowMicros)
}

// openMetaPlaneOn recovers the plane from store (tests: a simulated disk).
func openMetaPlaneOn(log *slog.Logger, store metafiles.Storage, dir string, cfg *setup, nowMicros uint64) (*metaPlane, error) {
	return metahost.Open(log, store, dir, cfg.metaplaneConfig(), nowMicros)
}

// metaplaneConfig is the plane's configuration of a node's: the checkpoint rule
// (metacheckpoint.go; Start clamped the configured interval with a warning, a
// plane opened directly is clamped silently by metaplane), the root user, and in
// a cluster the replica and its timers.
func (c *setup) metaplaneConfig() metaplane.Config {
	pcfg := metaplane.Config{
		JournalSlots:          c.metaJournalWindow(),
		PipelineDepth:         c.Metadata.PrepareQueueDepth,
		ClientsTableMax:       c.Metadata.ClientsTableMax,
		CheckpointIntervalOps: c.SnapshotIntervalOps,
		OldCheckpointRule:     c.metaOldCheckpointRule,
		RootUsername:          c.RootUsername,
		RootPassword:          c.RootPassword,
		Mutation:              c.metaMutation,
	}
	if cl := &c.Cluster; cl.Enabled {
		pcfg.Clustered = true
		pcfg.Replica = vsr.Config{Cluster: wire.ClusterID(cl.Name), ReplicaID: uint8(cl.ReplicaID), ReplicaCount: uint8(len(cl.Nodes))}
		pcfg.Timing = cl.Timing()
		if c.clusterTiming != nil {
			pcfg.Timing = *c.clusterTiming
		}
	}
	return pcfg
}

// metaJournalWindow is [metadata] journal_slots, unless a test shrinks the window
// (testHooks.metaJournalSlots).
func (c *setup) metaJournalWindow() int {
	if c.metaJournalSlots > 0 || c.Metadata.JournalSlots <= 0 {
		return c.metaJournalSlotsBase()
	}
	return c.Metadata.JournalSlots
}

// callerSessionsCap caps the sessions of callers' credentials: half the client
// table ([metadata] clients_table_max), as the reference's, unless a test sets
// its own.
func (c *setup) callerSessionsCap() int {
	if c.callerSessionsMax > 0 {
		return c.callerSessionsMax
	}
	return c.Metadata.CallerSessionsMax()
}

// newMetaRouter is shard 0's router of the metadata host, h its Shard0.
func (s *Server) newMetaRouter(h *handler) *metaRouter {
	cfg := metahost.RouterConfig{Log: h.log, Stats: s.stats.Of, ObserveFsync: s.journalFsyncs.observe, TickOf: h.consensus.grid.tickAt,
		CallerSessionsMax: s.cfg.callerSessionsCap(), CallerSessions: s.transport.sessions}
	if s.cluster != nil {
		cfg.LastHeardNs = s.cluster.lastHeardNs
	}
	return metahost.NewRouter(h, s.meta, s.viewGenesis, cfg)
}

// Reply implements metahost.Shard0.
func (h *handler) Reply(j *job) { h.reply(j) }

// AnnounceCommit implements metahost.Shard0: every shard's view catches up.
func (h *handler) AnnounceCommit() {
	if h.srv.cfg.quietCommits {
		return
	}
	for i := 0; i < h.srv.shardCount; i++ {
		h.post(i, shard.Message{Kind: msgViewAdvanced})
	}
}

// SendMetaReplica implements metahost.Shard0.
func (h *handler) SendMetaReplica(to uint8, header, body []byte) error {
	return h.shard.SendReplica(to, header, body)
}

// PublishRole implements metahost.Shard0: the metadata group's primary, view
// and status, for every goroutine (clusterState).
func (h *handler) PublishRole(core *vsr.Core) {
	cl := h.srv.cluster
	leader := int32(0)
	if core.Status() == vsr.StatusNormal {
		leader = int32(core.Primary()) + 1
	}
	if old := cl.leader.Swap(leader); old != leader {
		h.log.Info("metadata group", "view", core.View(), "status", core.Status().String(), "primary", core.Primary(),
			"self", core.ReplicaID())
	}
	cl.view.Store(core.View())
	cl.status.Store(uint32(core.Status()))
}

// NowNs implements metahost.Shard0.
func (h *handler) NowNs() int64 { return h.shard.NowNs() }

// NowMicros implements metahost.Shard0.
func (h *handler) NowMicros() uint64 { return h.srv.nowMicros() }

// Wake implements metahost.Shard0.
func (h *handler) Wake() { h.shard.Wake() }

// metaFrameIn steps a frame of the metadata group on shard 0 and gives it back
// to the shard that retained it.
func (h *handler) metaFrameIn(in *replicaInbound) {
	h.meta.StepReplicaFrame(in.frame.Peer, in.frame.Header, in.frame.Body)
	if in.owner == h.index {
		h.releaseInbound(in)
		return
	}
	h.postControl(in.owner, shard.Message{Kind: msgReplicaRelease, Payload: in})
}

// WakeAt implements partitionhost.Shard.
func (h *handler) WakeAt(ns int64) { h.shard.WakeAt(ns) }

// ViewState implements partitionhost.Shard.
func (h *handler) ViewState() *metadata.State { return h.view.State }
