package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/store"
)

// TestOutcome walks the status policy table through outcome.
func TestOutcome(t *testing.T) {
	e := &Engine{cfg: Config{
		MaxAttempts: 3, MaxAge: time.Hour, ParkInterval: time.Minute, MaxThrottle: 10 * time.Minute,
		BackoffInitial: time.Second, BackoffMax: time.Minute, BackoffMultiplier: 2,
	}}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := func(attempts int) *store.Record {
		return &store.Record{ID: "e1", Version: 7, Attempts: attempts, CreatedAt: now.Add(-time.Minute), Endpoint: "ep"}
	}
	ep := store.EndpointState{Name: "ep", FailureStreak: 2}

	out, newEP, dead := e.outcome(rec(0), Result{Action: ActionSuccess, Status: 200}, ep, now, now)
	if out == nil || out.Kind != store.OutcomeDelete || out.Version != 7 || dead || newEP.FailureStreak != 0 || newEP.LastStatus != 200 {
		t.Errorf("success: %+v %+v %v", out, newEP, dead)
	}

	out, newEP, dead = e.outcome(rec(0), Result{Action: ActionRetry, Status: 503}, ep, now, now)
	if out == nil || out.Kind != store.OutcomeReschedule || out.Attempts != 1 || !out.NextAttemptAt.After(now) || dead || newEP.FailureStreak != 3 {
		t.Errorf("retry: %+v %+v %v", out, newEP, dead)
	}

	out, _, dead = e.outcome(rec(2), Result{Action: ActionRetry, Err: errors.New("refused")}, ep, now, now)
	if out == nil || out.Kind != store.OutcomeDead || !dead || !strings.HasPrefix(out.Reason, "max attempts (3) reached: refused") {
		t.Errorf("last retry: %+v %v", out, dead)
	}

	out, _, dead = e.outcome(rec(1), Result{Action: ActionPark, Status: 404}, ep, now, now)
	if out == nil || out.Kind != store.OutcomeReschedule || out.Attempts != 1 || !out.NextAttemptAt.Equal(now.Add(time.Minute)) || dead {
		t.Errorf("park: %+v %v", out, dead)
	}

	out, newEP, dead = e.outcome(rec(0), Result{Action: ActionDisable, Status: 410}, ep, now, now)
	if out != nil || dead || !newEP.Disabled || !strings.HasPrefix(newEP.DisabledReason, "disabled by the receiver: status 410") {
		t.Errorf("disable: %+v %+v %v", out, newEP, dead)
	}

	out, newEP, dead = e.outcome(rec(0), Result{Action: ActionThrottle, Status: 429, RetryAfter: time.Hour}, ep, now, now)
	if out == nil || out.Kind != store.OutcomeReschedule || !newEP.NotBefore.Equal(now.Add(10*time.Minute)) || !out.NextAttemptAt.Equal(newEP.NotBefore) || dead {
		t.Errorf("throttle: %+v %+v %v", out, newEP, dead)
	}

	out, _, dead = e.outcome(rec(0), Result{Action: ActionDead, Status: 400, Body: "bad"}, ep, now, now)
	if out == nil || out.Kind != store.OutcomeDead || out.Attempts != 1 || out.Reason != "status 400: bad" || !dead {
		t.Errorf("dead: %+v %v", out, dead)
	}

	if out, newEP, _ := e.outcome(rec(0), Result{Action: actionNone}, ep, now, now); out != nil || newEP != ep {
		t.Errorf("not attempted: %+v %+v", out, newEP)
	}
}
