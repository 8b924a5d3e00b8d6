package kafka

import (
	"context"
	"errors"
	"testing"
)

// StandbyReplicas is checked: a count out of range, or standbys asked of a
// Runner (one outbox, no partition stores to keep warm), is an error naming
// the field, and nothing starts.
func TestStandbyReplicasAreCheckedAndForGroupsOnly(t *testing.T) {
	cfg := testConfig([]string{"127.0.0.1:1"}, "in")
	for _, n := range []int{-1, MaxStandbyReplicas + 1} {
		cfg.StandbyReplicas = n
		var ce *ConfigError
		if err := cfg.Validate(); !errors.As(err, &ce) || ce.Field != "StandbyReplicas" {
			t.Errorf("StandbyReplicas %d: %v, want an error naming StandbyReplicas", n, err)
		}
	}
	cfg.StandbyReplicas = 1
	o := openOutbox(t, dbPath(t, "runner"), newRecorder("r"), nil)
	r, err := Start(context.Background(), o, cfg, nil)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "StandbyReplicas" {
		if r != nil {
			closeRunner(t, r)
		}
		t.Errorf("Start with standby replicas: %v, want an error naming StandbyReplicas", err)
	}
}
