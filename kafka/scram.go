package kafka

import (
	"context"
	"errors"
	"strings"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// newSCRAM returns kafka-go's SCRAM client for algo, with the nonce check
// of strictSCRAM. An error (SASLprep refused the name or the password) does
// not quote the credentials.
func newSCRAM(algo scram.Algorithm, user, password string) (sasl.Mechanism, error) {
	m, err := scram.Mechanism(algo, user, password)
	if err != nil {
		return nil, &ConfigError{Field: "SASL.Password",
			Reason: "the username or password is refused by SASLprep (RFC 4013), which SCRAM applies"}
	}
	return strictSCRAM{m}, nil
}

// strictSCRAM is a SCRAM mechanism that also refuses a server-first message
// whose nonce does not extend the client's (RFC 5802 section 5.1): the
// client kafka-go uses (github.com/xdg-go/scram) only checks that the
// server's nonce starts with the client's, so a server that echoes the
// client's nonce back would get a proof for a challenge it did not add to.
type strictSCRAM struct {
	sasl.Mechanism
}

// Start implements sasl.Mechanism.
func (m strictSCRAM) Start(ctx context.Context) (sasl.StateMachine, []byte, error) {
	sm, first, err := m.Mechanism.Start(ctx)
	if err != nil {
		return nil, nil, err
	}
	return &strictSession{StateMachine: sm, nonce: scramAttr(strings.TrimPrefix(string(first), "n,,"), "r")}, first, nil
}

type strictSession struct {
	sasl.StateMachine
	nonce     string // the client's
	seenFirst bool
}

// Next implements sasl.StateMachine.
func (s *strictSession) Next(ctx context.Context, challenge []byte) (bool, []byte, error) {
	if !s.seenFirst {
		s.seenFirst = true
		if r := scramAttr(string(challenge), "r"); s.nonce == "" || r == s.nonce {
			return false, nil, errors.New("scram: server nonce does not extend ours")
		}
	}
	return s.StateMachine.Next(ctx, challenge)
}

// scramAttr returns the value of attribute key of a SCRAM message
// ("k=v,k=v"); the first one wins.
func scramAttr(msg, key string) string {
	for _, part := range strings.Split(msg, ",") {
		if k, v, ok := strings.Cut(part, "="); ok && k == key {
			return v
		}
	}
	return ""
}
