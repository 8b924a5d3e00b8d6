package httpsink

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/outboxd/outbox/outbox"
)

// Policy is the status policy table: it maps the outcome of an attempt to the
// outbox.Action the outbox takes. A status code is looked up by exact code
// first, then by class (1xx to 5xx), then falls back to the default row; a
// transport failure or timeout (no status received) uses the error row.
//
// The zero Policy means DefaultPolicy. A Policy is a value: copying it is
// safe and With returns a changed copy, so one table can be shared freely.
type Policy struct {
	set     bool
	codes   [1000]outbox.Action // exact codes 100..999; 0 = not set
	classes [6]outbox.Action    // index 1..5 for 1xx..5xx; 0 = not set
	def     outbox.Action
	err     outbox.Action
}

// DefaultPolicy returns the table of the design:
//
//	2xx                      success
//	404                      park     (not yet: re-check later, no attempt spent)
//	408, 425, 500, 503       retry
//	429, 502, 504            throttle (the whole endpoint waits)
//	410                      disable
//	3xx, other 4xx           dead
//	other 5xx                retry
//	1xx and unknown codes    retry    (row "default")
//	transport error, timeout retry    (row "error")
func DefaultPolicy() Policy {
	var p Policy
	p.set = true
	p.classes[1] = outbox.ActionRetry
	p.classes[2] = outbox.ActionSuccess
	p.classes[3] = outbox.ActionDead
	p.classes[4] = outbox.ActionDead
	p.classes[5] = outbox.ActionRetry
	p.def = outbox.ActionRetry
	p.err = outbox.ActionRetry
	p.codes[404] = outbox.ActionPark
	p.codes[410] = outbox.ActionDisable
	for _, c := range []int{408, 425, 500, 503} {
		p.codes[c] = outbox.ActionRetry
	}
	for _, c := range []int{429, 502, 504} {
		p.codes[c] = outbox.ActionThrottle
	}
	return p
}

// ParsePolicy returns DefaultPolicy changed by rules, applied in order. A
// rule is "selector=action" where the selector is an exact status code
// ("404"), a class ("4xx"), "default" (codes matched by no other row) or
// "error" (transport failures and timeouts, when no status was received), and
// the action is one of success, retry, park, throttle, disable, dead. An exact
// code always takes precedence over its class, whatever the order of the
// rules. Examples: "404=retry", "4xx=dead", "429=throttle", "error=throttle".
func ParsePolicy(rules ...string) (Policy, error) {
	return DefaultPolicy().With(rules...)
}

// With returns a copy of p changed by rules (see ParsePolicy for their
// syntax). p itself is not modified.
func (p Policy) With(rules ...string) (Policy, error) {
	q := p.orDefault()
	for _, r := range rules {
		if err := q.apply(r); err != nil {
			return p, err
		}
	}
	return q, nil
}

func (p Policy) orDefault() Policy {
	if !p.set {
		return DefaultPolicy()
	}
	return p
}

func (p *Policy) apply(rule string) error {
	sel, act, ok := strings.Cut(strings.TrimSpace(rule), "=")
	sel, act = strings.ToLower(strings.TrimSpace(sel)), strings.TrimSpace(act)
	if !ok || sel == "" || act == "" {
		return &PolicyError{Rule: rule, Reason: `want "selector=action", e.g. "404=retry"`}
	}
	a, ok := outbox.ParseAction(strings.ToLower(act))
	if !ok {
		return &PolicyError{Rule: rule, Reason: fmt.Sprintf("unknown action %q (want success, retry, park, throttle, disable or dead)", act)}
	}
	switch {
	case sel == "default":
		p.def = a
	case sel == "error":
		if a == outbox.ActionSuccess {
			return &PolicyError{Rule: rule, Reason: "a failed attempt cannot count as success"}
		}
		p.err = a
	case len(sel) == 3 && sel[1:] == "xx":
		c := int(sel[0] - '0')
		if c < 1 || c > 5 {
			return &PolicyError{Rule: rule, Reason: fmt.Sprintf("unknown class %q (want 1xx to 5xx)", sel)}
		}
		p.classes[c] = a
	default:
		code, err := strconv.Atoi(sel)
		if err != nil || len(sel) != 3 || code < 100 || code > 999 {
			return &PolicyError{Rule: rule, Reason: fmt.Sprintf("bad selector %q (want a status code 100-999, a class like 4xx, default or error)", sel)}
		}
		p.codes[code] = a
	}
	return nil
}

// Action returns the action for a response with the given status code
// (exact code, then class, then the default row).
func (p Policy) Action(status int) outbox.Action {
	if !p.set {
		// Avoid copying a fresh default table on the hot path of a zero
		// Policy: New always stores a set one, this is for direct callers.
		return DefaultPolicy().Action(status)
	}
	if status >= 100 && status <= 999 {
		if a := p.codes[status]; a != 0 {
			return a
		}
		if c := status / 100; c <= 5 {
			if a := p.classes[c]; a != 0 {
				return a
			}
		}
	}
	return p.def
}

// ErrorAction returns the action for an attempt that received no status: a
// transport failure or a timeout (the "error" row).
func (p Policy) ErrorAction() outbox.Action {
	return p.orDefault().err
}

// Rules returns the table as rules that ParsePolicy accepts and that
// rebuild it exactly: every class, then every exact code in increasing
// order, then default and error.
func (p Policy) Rules() []string {
	p = p.orDefault()
	var out []string
	for c := 1; c <= 5; c++ {
		if a := p.classes[c]; a != 0 {
			out = append(out, fmt.Sprintf("%dxx=%s", c, a))
		}
	}
	for code, a := range p.codes {
		if a != 0 {
			out = append(out, fmt.Sprintf("%d=%s", code, a))
		}
	}
	out = append(out, "default="+p.def.String(), "error="+p.err.String())
	return slices.Clip(out)
}

// String returns the rules joined by commas, for logs and diagnostics.
func (p Policy) String() string {
	return strings.Join(p.Rules(), ",")
}
