package main

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
)

// Payload encryption with --encryption-key, as the reference SDK does it
// (apache/iggy core/common/src/utils/crypto.rs, Aes256GcmEncryptor): the
// key is 32 bytes in standard base64; a payload travels as a random 12-byte nonce
// followed by its AES-256-GCM ciphertext and tag. Headers are not encrypted.

// payloadCipher encrypts payloads on send and decrypts them on poll.
type payloadCipher struct {
	aead cipher.AEAD
}

// newPayloadCipher reads a base64 key; "" is no encryption (nil).
func newPayloadCipher(key string) (*payloadCipher, error) {
	if key == "" {
		return nil, nil
	}
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(raw) != 32 {
		return nil, usageErrorf("Invalid encryption key provided: --encryption-key must be 32 bytes in standard base64")
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &payloadCipher{aead: aead}, nil
}

func (c *payloadCipher) encrypt(payload []byte) ([]byte, error) {
	out := make([]byte, c.aead.NonceSize(), c.aead.NonceSize()+len(payload)+c.aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, err
	}
	return c.aead.Seal(out, out, payload, nil), nil
}

var errCannotDecrypt = errors.New("the payload does not decrypt with --encryption-key (another key, or not encrypted)")

func (c *payloadCipher) decrypt(payload []byte) ([]byte, error) {
	n := c.aead.NonceSize()
	if len(payload) < n+c.aead.Overhead() {
		return nil, errCannotDecrypt
	}
	plain, err := c.aead.Open(nil, payload[:n], payload[n:], nil)
	if err != nil {
		return nil, errCannotDecrypt
	}
	return plain, nil
}

// payloadCipher is the cipher of --encryption-key, or of the active context's
// encryption_key; nil without one.
func (a *app) payloadCipher() (*payloadCipher, error) {
	ctx, err := a.contexts.active()
	if err != nil {
		return nil, err
	}
	return newPayloadCipher(pick(a.flags.set["encryption-key"], a.flags.encryptionKey, ctx.str("encryption_key"), ""))
}
