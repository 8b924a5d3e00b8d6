package kafka

import (
	"errors"
	"testing"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// A group refuses partition stores that keep delivered events: the
// changelog does not carry the archive, so it would not move with its
// partition. Nothing is contacted before the refusal.
func TestStartGroupRefusesRetain(t *testing.T) {
	sink := newSwitchSink()
	_, err := StartGroup(t.Context(), Config{Brokers: []string{"127.0.0.1:1"}, Topic: "events"},
		StoreConfig{Dir: t.TempDir(), Outbox: outbox.Config{Sink: sink, Retain: time.Hour}}, nil)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "Outbox.Retain" {
		t.Fatalf("StartGroup with Retain: %v, want a *ConfigError for Outbox.Retain", err)
	}
}
