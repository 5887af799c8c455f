// Package replica is the replica plane's connection layer: how two nodes of a
// cluster agree to talk (the handshake) before any consensus traffic flows. It is
// pure: frames in, frames to send and verdicts out; no socket, clock or randomness
// inside (the caller passes the nonces), so a test or a simulator drives it byte
// for byte.
//
// The handshake (iggy.apache.org/docs/binary-protocol/cluster, Handshake): a
// replica dials only peers of a strictly greater replica id, so exactly one
// connection exists per pair.
//
//	dialer (lower id)                                acceptor (higher id)
//	  ReplicaHello      cluster, id, nonce_d    ->
//	                                            <-   ReplicaChallenge  status, nonce_a, mac_a
//	  ReplicaFinish     mac_d                   ->
//
// The acceptor checks the command, the cluster id and the directional rule, and
// answers a refusal with a Challenge carrying the status, so the dialer's log says
// why. With cluster.auth disabled the Hello carries no nonce and an Ok Challenge no
// nonce nor MAC: the announced id is trusted. With it enabled a Hello without a
// nonce (AuthRequired) and a Finish whose MAC does not verify (MacMismatch) are
// refused without a frame: those statuses are never sent, only logged. The
// handshake proves cluster membership (one shared secret), not a replica's identity.
package replica

import (
	"fmt"

	"github.com/iggy-shard/iggy-shard/wire"
)

// HandshakeConfig is what one node brings to its handshakes.
type HandshakeConfig struct {
	Cluster      wire.Uint128 // wire.ClusterID of cluster.name
	Self         uint8        // this node's replica id
	ReplicaCount uint8        // the roster's size
	// Auth holds the MAC keys of cluster.auth; nil when auth is disabled.
	Auth *wire.HandshakeAuth
	// TLSExporter binds the MACs to a TLS session (cluster.tls); nil in plaintext.
	TLSExporter *[32]byte
}

// HandshakeError is a refused handshake: the status (sent in a Challenge, or only
// logged for AuthRequired and MacMismatch) and what the log should say.
type HandshakeError struct {
	Status wire.HandshakeStatus
	Reason string
}

func (e *HandshakeError) Error() string {
	return fmt.Sprintf("replica handshake refused (%s): %s", e.Status, e.Reason)
}

// Step is what one received frame yields: a frame to send (nil for none), whether
// the handshake is over, and on failure why (then close the connection after
// sending Send, if any).
type Step struct {
	Send []byte
	Done bool
	Err  error
}

type acceptorState uint8

const (
	awaitingHello acceptorState = iota
	awaitingFinish
	acceptorDone
)

// Acceptor is the accepting side of one inbound replica connection.
type Acceptor struct {
	cfg        HandshakeConfig
	state      acceptorState
	transcript wire.HandshakeTranscript
	out        [wire.HeaderSize]byte
	// Peer is the dialer's replica id once the handshake is Done.
	Peer uint8
}

// NewAcceptor starts the acceptor side; nonce is its fresh random nonce (used only
// with auth).
func NewAcceptor(cfg HandshakeConfig, nonce [wire.HandshakeNonceSize]byte) *Acceptor {
	a := &Acceptor{cfg: cfg}
	a.transcript.AcceptorNonce = nonce
	return a
}

// Receive takes the next frame the dialer sent (256 bytes: handshake frames are
// header-only).
func (a *Acceptor) Receive(frame []byte) Step {
	h, err := handshakeHeader(frame)
	switch {
	case a.state == acceptorDone:
		return Step{Err: &HandshakeError{Status: wire.HandshakeUnknownCommand, Reason: "a frame after the handshake ended"}}
	case err != nil && a.state == awaitingHello:
		return a.refuse(wire.HandshakeUnknownCommand, err.Error(), true)
	case err != nil:
		return a.refuse(wire.HandshakeUnknownCommand, err.Error(), false)
	case a.state == awaitingHello:
		return a.hello(h)
	default:
		return a.finish(h)
	}
}

func (a *Acceptor) hello(h *wire.HandshakeHeader) Step {
	cfg := &a.cfg
	switch {
	case h.Command != wire.CommandReplicaHello:
		return a.refuse(wire.HandshakeUnknownCommand, fmt.Sprintf("first frame is command %d, not ReplicaHello", h.Command), true)
	case h.Cluster != cfg.Cluster:
		return a.refuse(wire.HandshakeClusterMismatch, "the peer belongs to another cluster (cluster.name differs)", true)
	case h.Replica >= cfg.ReplicaCount || h.Replica >= cfg.Self:
		return a.refuse(wire.HandshakeDirectionalRule,
			fmt.Sprintf("replica %d may not dial replica %d of %d (only lower ids dial higher ones)", h.Replica, cfg.Self, cfg.ReplicaCount), true)
	}
	a.Peer = h.Replica
	if cfg.Auth == nil {
		wire.PutReplicaChallenge(a.out[:], cfg.Cluster, cfg.Self, wire.HandshakeOk, &[wire.HandshakeNonceSize]byte{}, &[wire.HandshakeMACSize]byte{})
		a.state = acceptorDone
		return Step{Send: a.out[:], Done: true}
	}
	if !h.HasNonce() {
		// A dialer without auth reads nothing back: no frame, the log says why.
		return a.refuse(wire.HandshakeAuthRequired, "cluster.auth is enabled and the peer sent no nonce (its auth is off)", false)
	}
	a.transcript.Cluster, a.transcript.DialerID, a.transcript.AcceptorID = cfg.Cluster, h.Replica, cfg.Self
	a.transcript.DialerNonce = h.Nonce
	a.transcript.TLSExporter = cfg.TLSExporter
	mac := cfg.Auth.AcceptorMAC(&a.transcript)
	wire.PutReplicaChallenge(a.out[:], cfg.Cluster, cfg.Self, wire.HandshakeOk, &a.transcript.AcceptorNonce, &mac)
	a.state = awaitingFinish
	return Step{Send: a.out[:]}
}

func (a *Acceptor) finish(h *wire.HandshakeHeader) Step {
	switch {
	case h.Command != wire.CommandReplicaFinish || h.Cluster != a.cfg.Cluster || h.Replica != a.Peer:
		return a.refuse(wire.HandshakeUnknownCommand, "the frame after the Challenge is not the dialer's ReplicaFinish", false)
	case !a.cfg.Auth.VerifyDialerMAC(&a.transcript, &h.MAC):
		return a.refuse(wire.HandshakeMACMismatch, "the dialer's MAC does not verify (another shared secret?)", false)
	}
	a.state = acceptorDone
	return Step{Done: true}
}

// refuse ends the handshake; with tell, the dialer is waiting for a Challenge and
// gets one carrying the status.
func (a *Acceptor) refuse(status wire.HandshakeStatus, reason string, tell bool) Step {
	a.state = acceptorDone
	step := Step{Err: &HandshakeError{Status: status, Reason: reason}}
	if tell {
		wire.PutReplicaChallenge(a.out[:], a.cfg.Cluster, a.cfg.Self, status, nil, nil)
		step.Send = a.out[:]
	}
	return step
}

// Dialer is the dialing side of one outbound replica connection.
type Dialer struct {
	cfg        HandshakeConfig
	peer       uint8
	transcript wire.HandshakeTranscript
	done       bool
	out        [wire.HeaderSize]byte
}

// NewDialer starts the dialing side towards peer and returns the Hello to send
// first. nonce is the dialer's fresh random nonce (sent only with auth). Dialing a
// peer whose id is not above this node's breaks the directional rule: an error.
func NewDialer(cfg HandshakeConfig, peer uint8, nonce [wire.HandshakeNonceSize]byte) (*Dialer, []byte, error) {
	if peer <= cfg.Self || peer >= cfg.ReplicaCount {
		return nil, nil, fmt.Errorf("replica: replica %d may not dial replica %d of %d (only lower ids dial higher ones)",
			cfg.Self, peer, cfg.ReplicaCount)
	}
	d := &Dialer{cfg: cfg, peer: peer}
	var sent *[wire.HandshakeNonceSize]byte
	if cfg.Auth != nil {
		d.transcript = wire.HandshakeTranscript{Cluster: cfg.Cluster, DialerID: cfg.Self, AcceptorID: peer,
			DialerNonce: nonce, TLSExporter: cfg.TLSExporter}
		sent = &d.transcript.DialerNonce
	}
	wire.PutReplicaHello(d.out[:], cfg.Cluster, cfg.Self, sent)
	return d, d.out[:], nil
}

// Receive takes the acceptor's Challenge: with auth, it verifies the acceptor's MAC
// and returns the Finish to send; the handshake is then Done.
func (d *Dialer) Receive(frame []byte) Step {
	fail := func(status wire.HandshakeStatus, reason string) Step {
		d.done = true
		return Step{Err: &HandshakeError{Status: status, Reason: reason}}
	}
	if d.done {
		return fail(wire.HandshakeUnknownCommand, "a frame after the handshake ended")
	}
	h, err := handshakeHeader(frame)
	switch {
	case err != nil:
		return fail(wire.HandshakeUnknownCommand, err.Error())
	case h.Command != wire.CommandReplicaChallenge:
		return fail(wire.HandshakeUnknownCommand, fmt.Sprintf("the answer to the Hello is command %d, not ReplicaChallenge", h.Command))
	case !h.Status.Accepted():
		return fail(h.Status, "the peer refused the handshake")
	case h.Cluster != d.cfg.Cluster || h.Replica != d.peer:
		return fail(wire.HandshakeClusterMismatch, fmt.Sprintf("the Challenge names cluster %v, replica %d", h.Cluster, h.Replica))
	}
	d.done = true
	if d.cfg.Auth == nil {
		return Step{Done: true}
	}
	d.transcript.AcceptorNonce = h.Nonce
	if !d.cfg.Auth.VerifyAcceptorMAC(&d.transcript, &h.MAC) {
		return Step{Err: &HandshakeError{Status: wire.HandshakeMACMismatch, Reason: "the acceptor's MAC does not verify (another shared secret?)"}}
	}
	mac := d.cfg.Auth.DialerMAC(&d.transcript)
	wire.PutReplicaFinish(d.out[:], d.cfg.Cluster, d.cfg.Self, &mac)
	return Step{Send: d.out[:], Done: true}
}

// handshakeHeader copies a received handshake frame into a header (received bytes
// need not be aligned), checking its size.
func handshakeHeader(frame []byte) (*wire.HandshakeHeader, error) {
	if len(frame) != wire.HeaderSize {
		return nil, fmt.Errorf("a handshake frame of %d bytes, not %d", len(frame), wire.HeaderSize)
	}
	h := new(wire.HandshakeHeader)
	copy(wire.HeaderBytes(h)[:], frame)
	if h.Size != wire.HeaderSize {
		return nil, fmt.Errorf("a handshake frame announcing %d bytes, not %d", h.Size, wire.HeaderSize)
	}
	return h, nil
}
