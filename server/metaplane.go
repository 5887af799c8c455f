package server

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"

	"github.com/iggy-shard/iggy-shard/metafiles"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The metadata plane lives on shard 0: package metaplane (admission, proposal,
// apply, checkpoints and installs, sans-IO) over this node's files (package
// metafiles, which draws them), with the host here (metahost.go) carrying out
// what the plane asks.

const (
	serverVersion   = "0.11.0"
	journalSlotsMin = metaplane.JournalSlotsMin
)

// metaPlane is shard 0's metadata plane: the plane (package metaplane), its files
// (package metafiles), and the host that carries out what the plane asks (this type's
// metaplane.Host methods, metahost.go), through the router once shard 0 serves.
type metaPlane struct {
	*metaplane.Plane
	files     *metafiles.Files
	log       *slog.Logger
	clustered bool
	// router is shard 0's router once it serves; nil while the plane opens.
	router *metaRouter
	// sendTest (tests) takes the messages of a plane that has no router.
	sendTest func(msg *vsr.Message)
	// The cluster's tick grid (ticks.go): tickTarget is the grid tick of shard
	// 0's last turn, tickedTo the one the core was ticked to, ticks how many it
	// was given; tickOf maps shard 0's clock to its grid; lastHeardNs are the
	// node's (clusterState), heardNs what the core was told.
	tickTarget, tickedTo, ticks uint64
	tickOf                      func(ns int64) uint64
	lastHeardNs                 []atomic.Int64
	heardNs                     []int64
}

// openMetaPlane opens the metadata plane of the data directory systemPath.
func openMetaPlane(log *slog.Logger, systemPath string, cfg *setup, nowMicros uint64) (*metaPlane, error) {
	dir := filepath.Join(systemPath, "metadata")
	store, err := metafiles.NewOSStorage(dir)
	if err != nil {
		return nil, err
	}
	return openMetaPlaneOn(log, store, dir, cfg, nowMicros)
}

// openMetaPlaneOn recovers the plane from store: the snapshot, the state record
// and the journal's entries above the snapshot, applied again.
func openMetaPlaneOn(log *slog.Logger, store metafiles.Storage, dir string, cfg *setup, nowMicros uint64) (*metaPlane, error) {
	m := &metaPlane{log: log, clustered: cfg.Cluster.Enabled}
	f := metafiles.New(log, dir, store, m.clustered)
	m.files = f
	// The rule (metacheckpoint.go); Start clamped the configured interval with a
	// warning, a plane opened directly is clamped silently (metaplane).
	pcfg := metaplane.Config{
		JournalSlots:          cfg.metaJournalSlotsBase(),
		CheckpointIntervalOps: cfg.SnapshotIntervalOps,
		OldCheckpointRule:     cfg.metaOldCheckpointRule,
		ServerVersion:         serverVersion,
		RootUsername:          cfg.RootUsername,
		RootPassword:          cfg.RootPassword,
		Log:                   log,
		Mutation:              cfg.metaMutation,
	}
	if c := &cfg.Cluster; c.Enabled {
		pcfg.Clustered = true
		pcfg.Replica = vsr.Config{Cluster: wire.ClusterID(c.Name), ReplicaID: uint8(c.ReplicaID), ReplicaCount: uint8(len(c.Nodes))}
		pcfg.Timing = c.Timing()
		if cfg.clusterTiming != nil {
			pcfg.Timing = *cfg.clusterTiming
		}
	}
	var incarnation [16]byte
	if _, err := io.ReadFull(rand.Reader, incarnation[:]); err != nil {
		return nil, err
	}
	pcfg.Incarnation = wire.Uint128{Lo: binary.LittleEndian.Uint64(incarnation[:8]), Hi: binary.LittleEndian.Uint64(incarnation[8:])}
	rec, err := f.Recover(cfg.RootUsername, cfg.RootPassword, nowMicros)
	if err != nil {
		return nil, err
	}
	m.Plane, err = metaplane.Open(pcfg, rec, m)
	if err == nil {
		f.Durable = m.Core().Durable
		err = m.Replay()
	}
	if err != nil {
		f.Close()
		if errors.Is(err, vsr.ErrJournalCorrupt) || errors.Is(err, vsr.ErrBadMessage) {
			return nil, fmt.Errorf("metadata journal %s: %w", filepath.Join(dir, metafiles.JournalFileName), err)
		}
		return nil, fmt.Errorf("metadata %s: %w", dir, err)
	}
	if replayed := m.Core().CommitMax() - rec.Snapshot.At.Op; replayed > 0 || rec.Snapshot.At.Op > 0 {
		log.Info("metadata recovered", "snapshot_op", rec.Snapshot.At.Op, "replayed_ops", replayed, "op", m.Applied().Op)
	}
	return m, nil
}

// close closes the plane's journal.
func (m *metaPlane) close() error { return m.files.Close() }
