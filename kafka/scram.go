package kafka

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/segmentio/kafka-go/sasl"
)

// scramAlgo is a SCRAM hash (RFC 5802, RFC 7677).
type scramAlgo struct {
	name string
	hash func() hash.Hash
}

var (
	scramSHA256 = scramAlgo{name: "SCRAM-SHA-256", hash: sha256.New}
	scramSHA512 = scramAlgo{name: "SCRAM-SHA-512", hash: sha512.New}
)

// scramMinIterations is Kafka's own lower bound; a server asking for fewer
// is refused rather than given a cheaply crackable proof.
const scramMinIterations = 4096

// scramMechanism is a SCRAM client for kafka-go's sasl.Mechanism, written on
// the standard library so the module needs no further dependency.
type scramMechanism struct {
	algo     scramAlgo
	user     string
	password string
}

func newSCRAM(algo scramAlgo, user, password string) *scramMechanism {
	return &scramMechanism{algo: algo, user: user, password: password}
}

// Name implements sasl.Mechanism.
func (m *scramMechanism) Name() string { return m.algo.name }

// Start implements sasl.Mechanism: it sends the client-first message.
func (m *scramMechanism) Start(context.Context) (sasl.StateMachine, []byte, error) {
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, nil, fmt.Errorf("scram: nonce: %w", err)
	}
	s := &scramSession{m: m, nonce: base64.RawStdEncoding.EncodeToString(raw[:])}
	s.firstBare = "n=" + scramEscape(m.user) + ",r=" + s.nonce
	return s, []byte("n,," + s.firstBare), nil
}

type scramSession struct {
	m          *scramMechanism
	nonce      string
	firstBare  string
	serverSig  []byte
	sentFinal  bool
	authorized bool
}

// Next implements sasl.StateMachine.
func (s *scramSession) Next(_ context.Context, challenge []byte) (bool, []byte, error) {
	if !s.sentFinal {
		final, err := s.clientFinal(string(challenge))
		if err != nil {
			return false, nil, err
		}
		s.sentFinal = true
		return false, []byte(final), nil
	}
	if s.authorized {
		return true, nil, nil
	}
	attrs := scramAttrs(string(challenge))
	if e, ok := attrs["e"]; ok {
		return false, nil, fmt.Errorf("scram: server refused authentication: %s", e)
	}
	v, err := base64.StdEncoding.DecodeString(attrs["v"])
	if err != nil || len(v) == 0 {
		return false, nil, errors.New("scram: malformed server-final message")
	}
	if subtle.ConstantTimeCompare(v, s.serverSig) != 1 {
		return false, nil, errors.New("scram: server signature does not match (wrong server or man in the middle)")
	}
	s.authorized = true
	return true, nil, nil
}

func (s *scramSession) clientFinal(serverFirst string) (string, error) {
	attrs := scramAttrs(serverFirst)
	if e, ok := attrs["e"]; ok {
		return "", fmt.Errorf("scram: server refused authentication: %s", e)
	}
	nonce := attrs["r"]
	if !strings.HasPrefix(nonce, s.nonce) || len(nonce) == len(s.nonce) {
		return "", errors.New("scram: server nonce does not extend ours")
	}
	salt, err := base64.StdEncoding.DecodeString(attrs["s"])
	if err != nil || len(salt) == 0 {
		return "", errors.New("scram: malformed salt in server-first message")
	}
	iters, err := strconv.Atoi(attrs["i"])
	if err != nil || iters < scramMinIterations {
		return "", fmt.Errorf("scram: server asks for %q iterations (at least %d required)", attrs["i"], scramMinIterations)
	}
	h := s.m.algo.hash
	salted, err := pbkdf2.Key(h, s.m.password, salt, iters, h().Size())
	if err != nil {
		return "", fmt.Errorf("scram: %w", err)
	}
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	sum := h()
	sum.Write(clientKey)
	storedKey := sum.Sum(nil)
	withoutProof := "c=biws,r=" + nonce
	authMessage := s.firstBare + "," + serverFirst + "," + withoutProof
	sig := mac(storedKey, authMessage)
	proof := make([]byte, len(clientKey))
	for i := range clientKey {
		proof[i] = clientKey[i] ^ sig[i]
	}
	s.serverSig = mac(mac(salted, "Server Key"), authMessage)
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof), nil
}

// scramEscape escapes a saslname (RFC 5802 section 5.1).
func scramEscape(s string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(s)
}

// scramAttrs parses "k=v,k=v" attributes; the first value of a key wins.
func scramAttrs(msg string) map[string]string {
	out := make(map[string]string)
	for _, part := range strings.Split(msg, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || len(k) != 1 {
			continue
		}
		if _, dup := out[k]; !dup {
			out[k] = v
		}
	}
	return out
}
