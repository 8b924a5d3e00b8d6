package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

// The readiness checks of /readyz, by name.
const (
	checkStore      = "store"            // every store runs, is healthy and its commits return
	checkPunctuator = "punctuator"       // the local store's delivery punctuation keeps running
	checkShutdown   = "shutdown"         // the server is not stopping
	checkKafka      = "kafka"            // Kafka mode: the instance can take part in its consumer group
	checkRestores   = "restores"         // Kafka group mode: no assigned partition restoring or failed
	checkStatic     = "static-endpoints" // Kafka group mode: the members define the static endpoints alike
)

// knownChecks are the names ?exclude= accepts, in the order the checks run.
// A check that does not apply to the server's mode (kafka without Kafka,
// restores outside group mode) is not run, and excluding it is allowed, so
// that one probe definition fits every instance.
var knownChecks = []string{checkStore, checkPunctuator, checkShutdown, checkKafka, checkRestores, checkStatic}

// readyCheck is one named readiness check: fail returns why it fails, or ""
// when it passes. It must answer at once, even while the disk hangs.
type readyCheck struct {
	name string
	fail func() string
}

// kafkaGroup is what the kafka and restores checks read of a member of a
// consumer group that owns partition stores (a *kafka.Group): a kafka value
// that has these methods runs in group mode.
type kafkaGroup interface {
	Health() kafka.GroupHealth
	Partitions() []kafka.PartitionStatus
}

// kafkaReadiness is what the kafka check reads of single-instance Kafka
// mode (a *kafka.Runner), which cannot tell joining from failing.
type kafkaReadiness interface {
	Ready() bool
}

// readyChecks returns the checks that apply to the server's mode, in the
// order of knownChecks.
func (s *server) readyChecks() []readyCheck {
	checks := []readyCheck{
		{checkStore, s.storeFailure},
		{checkPunctuator, s.punctuatorFailure},
		{checkShutdown, func() string {
			if s.stopping.Load() {
				return "shutting down"
			}
			return ""
		}},
	}
	switch k := s.kafka.(type) {
	case nil:
	case kafkaGroup:
		checks = append(checks,
			readyCheck{checkKafka, func() string { return groupFailure(k.Health()) }},
			readyCheck{checkRestores, func() string { return restoresFailure(k.Partitions()) }})
		if s.static != nil {
			checks = append(checks, readyCheck{checkStatic, s.static.failure})
		}
	case kafkaReadiness:
		checks = append(checks, readyCheck{checkKafka, func() string {
			if !k.Ready() {
				return "Kafka ingest not connected"
			}
			return ""
		}})
	}
	return checks
}

// storeFailure says why the local outbox, or in group mode the store of a
// partition this instance delivers, cannot do its job, or "".
func (s *server) storeFailure() string {
	if !s.o.Ready() {
		return "outbox not running"
	}
	stores := []*outbox.Outbox{s.o}
	if g, ok := s.kafka.(interface{ Stores() []*outbox.Outbox }); ok {
		stores = append(stores, g.Stores()...)
	}
	var why []string
	for _, o := range stores {
		if err := o.Health(); err != nil {
			if errors.Is(err, outbox.ErrDamaged) {
				why = append(why, fmt.Sprintf("%v; verify it with: outboxd check --db %s", err, o.Path()))
			} else if !errors.Is(err, outbox.ErrClosed) {
				why = append(why, err.Error())
			}
			continue
		}
		if running := o.CommitStats().Running; running > commitStallLimit {
			why = append(why, fmt.Sprintf("a store commit has been running for %s; the disk holding %s is not answering",
				running.Round(time.Second), o.Path()))
		}
	}
	return strings.Join(why, "; ")
}

// punctuatorStall is how long the local store's punctuation may go without
// running before the punctuator check fails: it runs every
// delivery.interval (1s by default) whatever is due.
func (s *server) punctuatorStall() time.Duration {
	return max(20*s.o.Config().Interval, 30*time.Second)
}

// watchPunctuator records when the local store's punctuation last ran.
func (s *server) watchPunctuator() {
	s.lastPunct.Store(time.Now().UnixNano())
	s.o.AddHooks(outbox.Hooks{Name: "outboxd-readyz", OnPunctuation: func(time.Duration, int) {
		s.lastPunct.Store(time.Now().UnixNano())
	}})
}

// punctuatorFailure says why the local store's punctuation is not
// running, or "". While the store cannot commit, the punctuation pauses by
// design: the store check reports that.
func (s *server) punctuatorFailure() string {
	last := s.lastPunct.Load()
	if last == 0 || s.o.Health() != nil {
		return ""
	}
	if since := time.Since(time.Unix(0, last)); since > s.punctuatorStall() {
		return fmt.Sprintf("the delivery punctuation last ran %s ago (it runs every %s)",
			since.Round(time.Second), s.o.Config().Interval)
	}
	return ""
}

// groupFailure says why the instance cannot take part in its consumer
// group, or "". Joining and rebalancing are not failures: a restarted
// instance is ready while it joins, instead of waiting out a session
// timeout; the partitions it is then assigned are the restores check's.
func groupFailure(h kafka.GroupHealth) string {
	if h.Err != nil {
		return "cannot take part in the consumer group: " + h.Err.Error()
	}
	return ""
}

// restoresFailure names the assigned partitions whose store is restoring
// or whose restore failed, or returns "".
func restoresFailure(ps []kafka.PartitionStatus) string {
	var restoring, failed []string
	for _, p := range ps {
		switch p.State {
		case kafka.PartitionRestoring:
			r := p.Restore
			if r.Mode == "" {
				restoring = append(restoring, fmt.Sprintf("partition %d restoring (not started)", p.Partition))
			} else {
				restoring = append(restoring, fmt.Sprintf("partition %d restoring (%s: %d records applied, %d offsets left)",
					p.Partition, r.Mode, r.Records, r.Remaining))
			}
		case kafka.PartitionFailed:
			msg := fmt.Sprintf("partition %d restore failed", p.Partition)
			if p.Error != "" {
				msg += ": " + p.Error
			}
			failed = append(failed, msg)
		}
	}
	return strings.Join(append(failed, restoring...), "; ")
}

// checkResult is one check in the answer of /readyz.
type checkResult struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Reason string `json:"reason"`
}

// readyAnswer is the answer of /readyz. Checks lists every check run with
// ?verbose, else only those that failed (none when ready).
type readyAnswer struct {
	Status string        `json:"status"`
	Checks []checkResult `json:"checks,omitempty"`
}

// readyz answers GET /readyz: 200 when every check run passes, 503 naming
// those that failed, 400 for a query it cannot follow.
func readyz(checks []readyCheck) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		verbose, err := verboseParam(q)
		if err != nil {
			writeReady(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		excluded, err := excludeParam(q)
		if err != nil {
			writeReady(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		var all []checkResult
		var reasons []string
		for _, c := range checks {
			if excluded[c.name] {
				continue
			}
			reason := c.fail()
			all = append(all, checkResult{Name: c.name, OK: reason == "", Reason: reason})
			if reason != "" {
				reasons = append(reasons, c.name+": "+reason)
			}
		}
		ans := readyAnswer{Status: "ready"}
		code := http.StatusOK
		if len(reasons) > 0 {
			ans.Status = "not ready: " + strings.Join(reasons, "; ")
			code = http.StatusServiceUnavailable
		}
		if verbose {
			ans.Checks = all
		} else {
			for _, c := range all {
				if !c.OK {
					ans.Checks = append(ans.Checks, c)
				}
			}
		}
		writeReady(w, code, ans)
	}
}

// verboseParam reads ?verbose: present without a value, or a boolean
// (1, true, 0, false, ...).
func verboseParam(q url.Values) (bool, error) {
	vs, ok := q["verbose"]
	if !ok {
		return false, nil
	}
	v := vs[len(vs)-1]
	if v == "" {
		return true, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("verbose: %q is not a boolean (use ?verbose, verbose=1 or verbose=true)", v)
	}
	return b, nil
}

// excludeParam reads ?exclude=: check names, repeated or comma-separated.
func excludeParam(q url.Values) (map[string]bool, error) {
	out := map[string]bool{}
	for _, v := range q["exclude"] {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			if !slices.Contains(knownChecks, name) {
				return nil, fmt.Errorf("exclude: unknown check %q; the checks are %s", name, strings.Join(knownChecks, ", "))
			}
			out[name] = true
		}
	}
	return out, nil
}

func writeReady(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only the types above are encoded; they always marshal.
		code, b = http.StatusInternalServerError, []byte(`{"error":"internal error encoding the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
