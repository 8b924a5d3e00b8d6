package managed

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
)

// KeySize is the size of the key that encrypts the secrets of the
// endpoints a group shares: an AES-256 key.
const KeySize = 32

// KeySetting names the setting of the key file in errors.
const KeySetting = "endpoint_secret_key_file (--endpoint-secret-key-file)"

// ErrKey is matched by every error about the key of the secrets: a key
// file that cannot be read or is not a key, a topic whose secrets need a
// key that is not given, or one that does not decrypt them.
var ErrKey = errors.New("endpoint secret key")

// LoadKey reads the key file at path. It holds the 32 bytes of an AES-256
// key either raw (exactly 32 bytes) or as 64 hexadecimal digits,
// optionally followed by a line break (as `openssl rand -hex 32` writes
// them). The error says which, without quoting the file's content.
func LoadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", KeySetting, ErrKey, err)
	}
	if len(b) == KeySize {
		return b, nil
	}
	text := bytes.TrimRight(b, "\r\n")
	if len(text) == 2*KeySize {
		key := make([]byte, KeySize)
		if _, err := hex.Decode(key, text); err == nil {
			return key, nil
		}
		return nil, fmt.Errorf("%s: %w: %s has 64 characters but they are not all hexadecimal digits", KeySetting, ErrKey, path)
	}
	return nil, fmt.Errorf("%s: %w: %s holds %d bytes; want the 32 bytes of an AES-256 key, raw or as 64 hexadecimal digits (e.g. openssl rand -hex 32)",
		KeySetting, ErrKey, path, len(b))
}

// sealer encrypts and decrypts secrets with AES-GCM, authenticating the
// record key they belong to, so that a sealed value moved to another
// endpoint's record does not open.
type sealer struct{ aead cipher.AEAD }

// newSealer returns the sealer of key, nil when key is nil.
func newSealer(key []byte) (*sealer, error) {
	if key == nil {
		return nil, nil
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("%s: %w: %d bytes, want %d", KeySetting, ErrKey, len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

// seal returns a random nonce followed by plain encrypted and
// authenticated with ad.
func (s *sealer) seal(plain, ad []byte) []byte {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails (it panics if the system's source does)
	return s.aead.Seal(nonce, nonce, plain, ad)
}

// open reverses seal; it fails when sealed was not sealed with this key
// and ad, or was changed.
func (s *sealer) open(sealed, ad []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n+s.aead.Overhead() {
		return nil, errors.New("sealed secrets too short")
	}
	return s.aead.Open(nil, sealed[:n], sealed[n:], ad)
}
