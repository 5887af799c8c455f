package metahost

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
// metafiles, which draws them), with the host here (host.go) carrying out
// what the plane asks.

// Plane is shard 0's metadata plane: the plane (package metaplane), its files
// (package metafiles), and the host that carries out what the plane asks (this type's
// metaplane.Host methods, host.go), through the router once shard 0 serves.
type Plane struct {
	*metaplane.Plane
	Files     *metafiles.Files
	log       *slog.Logger
	Clustered bool
	// router is shard 0's router once it serves; nil while the plane opens.
	router *Router
	// SendTest (tests) takes the messages of a plane that has no router.
	SendTest func(msg *vsr.Message)
	// The cluster's tick grid (ticks.go): tickTarget is the grid tick of shard
	// 0's last turn, tickedTo the one the core was ticked to, ticks how many it
	// was given; tickOf maps shard 0's clock to its grid; lastHeardNs are the
	// node's (server/cluster.go), heardNs what the core was told.
	tickTarget, tickedTo, ticks uint64
	tickOf                      func(ns int64) uint64
	lastHeardNs                 []atomic.Int64
	heardNs                     []int64
}

// OpenOS opens the metadata plane of the data directory systemPath, with cfg
// (its Incarnation drawn here), recovering the root user's credentials as the
// files hold them or creating them as cfg says.
func OpenOS(log *slog.Logger, systemPath string, cfg metaplane.Config, nowMicros uint64) (*Plane, error) {
	dir := filepath.Join(systemPath, "metadata")
	store, err := metafiles.NewOSStorage(dir)
	if err != nil {
		return nil, err
	}
	return Open(log, store, dir, cfg, nowMicros)
}

// Open recovers the plane from store: the snapshot, the state record and the
// journal's entries above the snapshot, applied again.
func Open(log *slog.Logger, store metafiles.Storage, dir string, pcfg metaplane.Config, nowMicros uint64) (*Plane, error) {
	m := &Plane{log: log, Clustered: pcfg.Clustered}
	f := metafiles.New(log, dir, store, m.Clustered)
	f.ClientsTableMax = pcfg.ClientsTableMax
	m.Files = f
	pcfg.ServerVersion = ServerVersion
	pcfg.Log = log
	var incarnation [16]byte
	if _, err := io.ReadFull(rand.Reader, incarnation[:]); err != nil {
		return nil, err
	}
	pcfg.Incarnation = wire.Uint128{Lo: binary.LittleEndian.Uint64(incarnation[:8]), Hi: binary.LittleEndian.Uint64(incarnation[8:])}
	rec, err := f.Recover(pcfg.RootUsername, pcfg.RootPassword, nowMicros)
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

// Close closes the plane's journal.
func (m *Plane) Close() error { return m.Files.Close() }
