package wire

import (
	"crypto/subtle"
	"errors"
	"strconv"

	"lukechampine.com/blake3"
)

// The replica handshake runs on every replica connection before any consensus
// traffic, in three header-only frames (HandshakeHeader, size 256):
//
//	dialer                                   acceptor
//	  ReplicaHello      nonce_d          ->
//	                                     <-  ReplicaChallenge  status, nonce_a, mac_a
//	  ReplicaFinish     mac_d            ->
//
// A reject is a Challenge with a non-zero status and no nonce or MAC. With
// cluster.auth disabled the dialer sends a Hello with a zero nonce and nothing more.
// Each MAC is BLAKE3 in keyed mode, keyed with a subkey derived from the shared
// secret (the raw secret never touches a transcript), over
//
//	"apache-iggy replica-auth v1" | cluster u128 LE | dialer id u8 | acceptor id u8 |
//	nonce_d 32 | nonce_a 32 | mode u8 (0 plaintext, 1 TLS) | TLS exporter 32 (zero
//	in plaintext) | direction u8 (1 dialer's MAC, 2 acceptor's MAC)
//
// Binding both nonces, the ordered replica pair and the direction defeats replay and
// reflection; the TLS exporter binds the MAC to one TLS session, so a relay
// terminating two sessions fails both directions. The handshake authenticates cluster
// membership (one secret for the cluster), not a replica's identity.

const (
	HandshakeNonceSize = 32
	HandshakeMACSize   = 32
	// HandshakeSecretSizeMin is the shortest shared secret a node accepts.
	HandshakeSecretSizeMin = 32

	handshakeDomainTag   = "apache-iggy replica-auth v1"
	handshakeKeyContext  = "apache-iggy replica-auth v1 psk->mac-key"
	handshakeDirDialer   = 1
	handshakeDirAcceptor = 2
)

// HandshakeStatus is the byte at offset 192 of a ReplicaChallenge.
type HandshakeStatus uint8

const (
	HandshakeOk              HandshakeStatus = 0
	HandshakeUnknownCommand  HandshakeStatus = 1 // a frame carried the wrong command for its step
	HandshakeClusterMismatch HandshakeStatus = 2
	HandshakeDirectionalRule HandshakeStatus = 3 // dialer id not strictly below the acceptor's
	// HandshakeAuthRequired and HandshakeMACMismatch are reserved: they name
	// log-only outcomes and are never sent.
	HandshakeAuthRequired HandshakeStatus = 4
	HandshakeMACMismatch  HandshakeStatus = 5
)

var handshakeStatusNames = [...]string{
	"Ok", "UnknownCommand", "ClusterMismatch", "DirectionalRule", "AuthRequired", "MacMismatch",
}

func (s HandshakeStatus) String() string {
	if int(s) < len(handshakeStatusNames) {
		return handshakeStatusNames[s]
	}
	return "HandshakeStatus(" + strconv.Itoa(int(s)) + ")"
}

// Accepted reports whether the status lets a dialer proceed: only Ok does. A dialer
// treats every other byte, unknown ones included, as a rejection.
func (s HandshakeStatus) Accepted() bool { return s == HandshakeOk }

// HandshakeTranscript is what both sides bind into their MACs; it is identical on the
// two peers.
type HandshakeTranscript struct {
	Cluster       Uint128
	DialerID      uint8
	AcceptorID    uint8
	DialerNonce   [HandshakeNonceSize]byte
	AcceptorNonce [HandshakeNonceSize]byte
	// TLSExporter is the session's exporter value (label "iggy replica psk
	// binding", empty context) on a TLS link, nil on a plaintext one.
	TLSExporter *[32]byte
}

// HandshakeLabelTLSExporter is the TLS keying-material exporter label of the channel
// binding.
const HandshakeLabelTLSExporter = "iggy replica psk binding"

// HandshakeAuth holds the MAC subkeys derived from cluster.auth.shared_secret and,
// during a rotation, previous_shared_secret. MACs are always produced with the current
// key; verification also accepts the previous one.
type HandshakeAuth struct {
	key         [32]byte
	previousKey [32]byte
	hasPrevious bool
}

var (
	errHandshakeSecretShort = errors.New("wire: handshake shared secret shorter than 32 bytes")
	errHandshakeSecretSame  = errors.New("wire: handshake previous secret equals the current one")
)

// NewHandshakeAuth derives the MAC subkeys. previousSecret may be empty (no rotation
// window); a non-empty one must also be at least 32 bytes and differ from secret.
func NewHandshakeAuth(secret, previousSecret []byte) (HandshakeAuth, error) {
	var auth HandshakeAuth
	if len(secret) < HandshakeSecretSizeMin {
		return auth, errHandshakeSecretShort
	}
	blake3.DeriveKey(auth.key[:], handshakeKeyContext, secret)
	if len(previousSecret) > 0 {
		if len(previousSecret) < HandshakeSecretSizeMin {
			return HandshakeAuth{}, errHandshakeSecretShort
		}
		if subtle.ConstantTimeCompare(secret, previousSecret) == 1 {
			return HandshakeAuth{}, errHandshakeSecretSame
		}
		blake3.DeriveKey(auth.previousKey[:], handshakeKeyContext, previousSecret)
		auth.hasPrevious = true
	}
	return auth, nil
}

// DialerMAC is the MAC a dialer sends in ReplicaFinish.
func (a *HandshakeAuth) DialerMAC(t *HandshakeTranscript) [HandshakeMACSize]byte {
	return handshakeMAC(&a.key, handshakeDirDialer, t)
}

// AcceptorMAC is the MAC an acceptor sends in an Ok ReplicaChallenge.
func (a *HandshakeAuth) AcceptorMAC(t *HandshakeTranscript) [HandshakeMACSize]byte {
	return handshakeMAC(&a.key, handshakeDirAcceptor, t)
}

// VerifyDialerMAC checks a ReplicaFinish MAC, in constant time per key.
func (a *HandshakeAuth) VerifyDialerMAC(t *HandshakeTranscript, mac *[HandshakeMACSize]byte) bool {
	return a.verify(handshakeDirDialer, t, mac)
}

// VerifyAcceptorMAC checks a ReplicaChallenge MAC, in constant time per key.
func (a *HandshakeAuth) VerifyAcceptorMAC(t *HandshakeTranscript, mac *[HandshakeMACSize]byte) bool {
	return a.verify(handshakeDirAcceptor, t, mac)
}

func (a *HandshakeAuth) verify(dir uint8, t *HandshakeTranscript, mac *[HandshakeMACSize]byte) bool {
	want := handshakeMAC(&a.key, dir, t)
	if subtle.ConstantTimeCompare(want[:], mac[:]) == 1 {
		return true
	}
	// Trying the retiring key only reveals which cluster key signed, which any
	// holder of the secrets knows anyway.
	if a.hasPrevious {
		want = handshakeMAC(&a.previousKey, dir, t)
		return subtle.ConstantTimeCompare(want[:], mac[:]) == 1
	}
	return false
}

func handshakeMAC(key *[32]byte, dir uint8, t *HandshakeTranscript) [HandshakeMACSize]byte {
	// The transcript is fixed-size, so it is assembled on the stack and hashed in
	// one write.
	var msg [len(handshakeDomainTag) + 16 + 2 + 2*HandshakeNonceSize + 1 + 32 + 1]byte
	n := copy(msg[:], handshakeDomainTag)
	t.Cluster.Put(msg[n:])
	n += 16
	msg[n], msg[n+1] = t.DialerID, t.AcceptorID
	n += 2
	n += copy(msg[n:], t.DialerNonce[:])
	n += copy(msg[n:], t.AcceptorNonce[:])
	if t.TLSExporter != nil {
		msg[n] = 1
		copy(msg[n+1:], t.TLSExporter[:])
	}
	n += 1 + 32
	msg[n] = dir
	h := blake3.New(HandshakeMACSize, key[:])
	h.Write(msg[:])
	var mac [HandshakeMACSize]byte
	h.Sum(mac[:0])
	return mac
}

// PutReplicaHello writes a ReplicaHello into dst[:256]. A zero nonce is the
// unauthenticated announce of a node with cluster.auth disabled.
func PutReplicaHello(dst []byte, cluster Uint128, replica uint8, nonce *[HandshakeNonceSize]byte) {
	h := handshakeFrame(CommandReplicaHello, cluster, replica)
	if nonce != nil {
		h.Nonce = *nonce
	}
	PutHeader(dst, &h)
}

// PutReplicaChallenge writes a ReplicaChallenge into dst[:256]. An Ok challenge
// carries the acceptor's nonce and MAC; a reject carries only its status.
func PutReplicaChallenge(dst []byte, cluster Uint128, replica uint8, status HandshakeStatus,
	nonce *[HandshakeNonceSize]byte, mac *[HandshakeMACSize]byte,
) {
	h := handshakeFrame(CommandReplicaChallenge, cluster, replica)
	h.Status = status
	if status == HandshakeOk {
		h.Nonce = *nonce
		h.MAC = *mac
	}
	PutHeader(dst, &h)
}

// PutReplicaFinish writes a ReplicaFinish carrying the dialer's MAC into dst[:256].
func PutReplicaFinish(dst []byte, cluster Uint128, replica uint8, mac *[HandshakeMACSize]byte) {
	h := handshakeFrame(CommandReplicaFinish, cluster, replica)
	h.MAC = *mac
	PutHeader(dst, &h)
}

func handshakeFrame(command Command, cluster Uint128, replica uint8) HandshakeHeader {
	var h HandshakeHeader
	h.Size = HeaderSize
	h.Command = command
	h.Cluster = cluster
	h.Replica = replica
	return h
}

// HasNonce reports whether a ReplicaHello opens the authenticated handshake (a
// non-zero nonce) rather than the unauthenticated announce.
func (h *HandshakeHeader) HasNonce() bool { return !allZero(h.Nonce[:]) }
