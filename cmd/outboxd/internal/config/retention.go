package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Retention is how long something is kept: a Go duration ("36h", "90m") or
// a whole number of days ("7d").
type Retention time.Duration

// ParseRetention parses a retention as Retention documents.
func ParseRetention(s string) (Retention, error) {
	t := strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(t, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > int64(time.Duration(1<<62)/(24*time.Hour)) {
			return 0, fmt.Errorf("invalid retention %q (want e.g. 7d, 36h or 90m)", s)
		}
		return Retention(time.Duration(n) * 24 * time.Hour), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("invalid retention %q (want e.g. 7d, 36h or 90m)", s)
	}
	return Retention(d), nil
}

// UnmarshalYAML accepts a duration or a number of days.
func (r *Retention) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a retention such as 7d or 36h", n.Line)
	}
	v, err := ParseRetention(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*r = v
	return nil
}

// MarshalYAML writes the retention as String does.
func (r Retention) MarshalYAML() (any, error) { return r.String(), nil }

// String writes whole days as "7d", anything else as a Go duration.
func (r Retention) String() string {
	d := time.Duration(r)
	if d > 0 && d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}

func retention(f func(*Config) *Retention) func(*Config, string) error {
	return func(c *Config, v string) error {
		r, err := ParseRetention(v)
		if err != nil {
			return err
		}
		*f(c) = r
		return nil
	}
}
