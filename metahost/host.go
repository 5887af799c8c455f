package metahost

import (
	"crypto/rand"

	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/vsr"
)

// The metadata plane's host (metaplane.Host) on shard 0: its file work goes to
// package metafiles (inline while the plane opens, then on the journal writer), the rest
// to the router once shard 0 serves.

var _ metaplane.Host = (*Plane)(nil)

func (m *Plane) Persist(rd *vsr.Ready) (bool, error) { return m.Files.Persist(rd, m.Persisted) }

// Send sends a Ready's message on the replica plane; before shard 0 serves it is
// lost, and the core retransmits.
func (m *Plane) Send(msg *vsr.Message) {
	switch {
	case m.router != nil:
		m.router.sendReplica(msg)
	case m.SendTest != nil:
		m.SendTest(msg)
	}
}

func (m *Plane) WriteCheckpoint(cp *metaplane.Checkpoint) (metaplane.CheckpointResult, bool) {
	return m.Files.WriteCheckpoint(cp, m.CheckpointWritten)
}

func (m *Plane) InstallState(in *metaplane.Install) (bool, error) {
	return m.Files.Install(in, m.StateInstalled)
}

func (m *Plane) Committed(c *metaplane.Commit) {
	if m.router != nil {
		m.router.published(c)
	}
}

func (m *Plane) StateReplaced() {
	if m.router != nil {
		m.router.publishInstalled()
	}
}

func (m *Plane) Answer(token uint64, a *metaplane.Answer) {
	if m.router != nil {
		m.router.answered(token, a)
	}
}

// HashPassword hands the work to the password workers; before shard 0 serves,
// and once it stops, there are none.
func (m *Plane) HashPassword(id uint64, w *metaplane.PasswordWork) bool {
	if m.router == nil {
		return false
	}
	return m.router.hashPassword(id, w)
}

func (m *Plane) Entropy(b []byte) { _, _ = rand.Read(b) }

func (m *Plane) Advanced() {
	if m.router != nil && m.Clustered {
		m.router.publishLeader()
		m.router.releaseCallers()
	}
}
