package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Env looks up an environment variable; os.LookupEnv in production.
type Env func(key string) (string, bool)

// rawValue is a flag.Value that only records what was given; the values are
// applied after the file and the environment, so that flags win.
type rawValue struct {
	s      *setting
	values []string
}

func (v *rawValue) String() string { return "" }

func (v *rawValue) Set(s string) error {
	if v.s.list {
		v.values = append(v.values, s)
	} else {
		v.values = []string{s}
	}
	return nil
}

func (v *rawValue) IsBoolFlag() bool { return v.s.isBool }

// Loader parses flags and merges the configuration sources.
type Loader struct {
	// FlagSet holds the setting flags and --config; callers may add flags
	// of their own before calling Load.
	FlagSet *flag.FlagSet

	settings []setting
	raws     []*rawValue
	config   *string
}

// NewLoader returns a Loader whose flag set, named name, has --config and the
// flags of the settings whose YAML path is in only (all of them when only is
// empty). Environment variables of every setting are honoured regardless.
func NewLoader(name string, output io.Writer, only ...string) *Loader {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(output)
	l := &Loader{FlagSet: fs, settings: settings()}
	l.config = fs.String("config", "", "YAML configuration `file` (env OUTBOXD_CONFIG)")
	for i := range l.settings {
		s := &l.settings[i]
		if s.flag == "" || (len(only) > 0 && !slices.Contains(only, s.path)) {
			continue
		}
		rv := &rawValue{s: s}
		l.raws = append(l.raws, rv)
		usage := s.usage
		def := defaultOf(s.path)
		if !s.isBool && !strings.Contains(usage, "`") {
			// Durations default to their String form ("0s", never "0"),
			// so a bare number is a count.
			kind := "value"
			if _, err := strconv.Atoi(def); err == nil {
				kind = "n"
			} else if _, err := time.ParseDuration(def); err == nil {
				kind = "duration"
			}
			usage += " (`" + kind + "`)"
		}
		if def != "" && def != "false" && def != "0" && !s.list {
			usage += ", default " + def
		}
		if s.env != "" {
			usage += "; env " + s.env
		}
		fs.Var(rv, s.flag, usage)
	}
	return l
}

// Load parses args, then builds the configuration: defaults, overlaid by the
// file (--config or OUTBOXD_CONFIG), then the environment, then the flags,
// and validates it. It returns flag.ErrHelp when -h was given (usage has
// been printed).
func (l *Loader) Load(args []string, env Env) (Config, error) {
	if err := l.FlagSet.Parse(args); err != nil {
		return Config{}, err
	}
	if l.FlagSet.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q (settings are flags such as --db FILE)", l.FlagSet.Arg(0))
	}
	cfg := Default()
	path := *l.config
	if path == "" {
		path, _ = env("OUTBOXD_CONFIG")
	}
	if path != "" {
		if err := LoadFile(path, &cfg); err != nil {
			return Config{}, err
		}
	}
	for i := range l.settings {
		s := &l.settings[i]
		if s.env == "" {
			continue
		}
		v, ok := env(s.env)
		if !ok {
			continue
		}
		if s.list {
			for _, item := range s.split(v) {
				if err := s.set(&cfg, item); err != nil {
					return Config{}, fmt.Errorf("environment %s: %w", s.env, err)
				}
			}
			continue
		}
		if err := s.set(&cfg, v); err != nil {
			return Config{}, fmt.Errorf("environment %s: %w", s.env, err)
		}
	}
	for _, rv := range l.raws {
		for _, v := range rv.values {
			if err := rv.s.set(&cfg, v); err != nil {
				return Config{}, fmt.Errorf("flag --%s: %w", rv.s.flag, err)
			}
		}
	}
	if err := Validate(&cfg); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// defaultOf returns the default of the setting at a YAML path, as text.
func defaultOf(path string) string {
	b, err := yaml.Marshal(Default())
	if err != nil {
		return ""
	}
	var node any = map[string]any{}
	if yaml.Unmarshal(b, &node) != nil {
		return ""
	}
	for _, part := range strings.Split(path, ".") {
		m, ok := node.(map[string]any)
		if !ok {
			return ""
		}
		node = m[part]
	}
	switch node.(type) {
	case nil, map[string]any, []any:
		return ""
	}
	return fmt.Sprint(node)
}

var unknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)

// LoadFile decodes the YAML file at path over cfg. Unknown settings are
// errors (a typo must not silently fall back to a default).
func LoadFile(path string, cfg *Config) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = strings.ReplaceAll(msg, "unmarshal errors:\n  ", "")
		msg = strings.ReplaceAll(msg, "\n  ", "; ")
		msg = unknownField.ReplaceAllString(msg, "unknown setting $1")
		return fmt.Errorf("config file %s: %s", path, msg)
	}
	return nil
}
