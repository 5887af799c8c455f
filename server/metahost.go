package server

import (
	"crypto/rand"

	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/vsr"
)

// The metadata plane's host (metaplane.Host) on shard 0: its file work goes to
// package metafiles (inline while the plane opens, then on the journal writer), the rest
// to the router once shard 0 serves.

var _ metaplane.Host = (*metaPlane)(nil)

func (m *metaPlane) Persist(rd *vsr.Ready) (bool, error) { return m.files.Persist(rd, m.Persisted) }

// Send sends a Ready's message on the replica plane; before shard 0 serves it is
// lost, and the core retransmits.
func (m *metaPlane) Send(msg *vsr.Message) {
	switch {
	case m.router != nil:
		m.router.sendReplica(msg)
	case m.sendTest != nil:
		m.sendTest(msg)
	}
}

func (m *metaPlane) WriteCheckpoint(cp *metaplane.Checkpoint) (metaplane.CheckpointResult, bool) {
	return m.files.WriteCheckpoint(cp, m.CheckpointWritten)
}

func (m *metaPlane) InstallState(in *metaplane.Install) (bool, error) {
	return m.files.Install(in, m.StateInstalled)
}

func (m *metaPlane) Committed(c *metaplane.Commit) {
	if m.router != nil {
		m.router.published(c)
	}
}

func (m *metaPlane) StateReplaced() {
	if m.router != nil {
		m.router.publishInstalled()
	}
}

func (m *metaPlane) Answer(token uint64, a *metaplane.Answer) {
	if m.router != nil {
		m.router.answered(token, a)
	}
}

// HashPassword hands the work to the password workers; before shard 0 serves,
// and once it stops, there are none.
func (m *metaPlane) HashPassword(id uint64, w *metaplane.PasswordWork) bool {
	if m.router == nil {
		return false
	}
	return m.router.hashPassword(id, w)
}

func (m *metaPlane) Entropy(b []byte) { _, _ = rand.Read(b) }

func (m *metaPlane) Advanced() {
	if m.router != nil && m.clustered {
		m.router.publishLeader()
	}
}
