package config

import (
	"errors"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/outboxd/outbox/kafka"
)

// KafkaSettingError turns a *kafka.ConfigError in err, which names Go fields
// of kafka.Config ("TLS.CAFile"), into a *SettingError naming outboxd's
// settings ("kafka.tls.ca_file"), in its Reason too. Any other error is
// returned as it is.
func KafkaSettingError(err error) error {
	var ce *kafka.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	names := kafkaNames()
	setting, ok := names.yaml[ce.Field]
	if !ok {
		setting = "kafka"
	}
	return &SettingError{Setting: setting, Reason: names.rewrite(ce.Reason)}
}

// kafkaFieldNames maps the Go field paths of kafka.Config to the YAML paths
// of outboxd's kafka section, read from the yaml tags.
type kafkaFieldNames struct {
	yaml  map[string]string
	field *regexp.Regexp // any Go field path, as a whole word
}

var kafkaNames = sync.OnceValue(func() kafkaFieldNames {
	n := kafkaFieldNames{yaml: map[string]string{}}
	var walk func(t reflect.Type, goPrefix, yamlPrefix string)
	walk = func(t reflect.Type, goPrefix, yamlPrefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || tag == "" || tag == "-" {
				continue
			}
			goPath, yamlPath := goPrefix+f.Name, yamlPrefix+tag
			n.yaml[goPath] = yamlPath
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, goPath+".", yamlPath+".")
			}
		}
	}
	walk(reflect.TypeFor[kafka.Config](), "", "kafka.")
	paths := make([]string, 0, len(n.yaml))
	for p := range n.yaml {
		paths = append(paths, regexp.QuoteMeta(p))
	}
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	n.field = regexp.MustCompile(`\b(` + strings.Join(paths, "|") + `)\b`)
	return n
})

// rewrite replaces the Go field paths in a reason with their YAML paths,
// outside the quoted values it shows (a topic may be called "Topic").
func (n kafkaFieldNames) rewrite(reason string) string {
	var b strings.Builder
	start, inQuote := 0, false
	flush := func(end int) {
		seg := reason[start:end]
		if !inQuote {
			seg = n.field.ReplaceAllStringFunc(seg, func(p string) string { return n.yaml[p] })
		}
		b.WriteString(seg)
		start = end
	}
	for i := 0; i < len(reason); i++ {
		switch {
		case reason[i] == '\\' && inQuote:
			i++ // an escaped character inside a quoted value
		case reason[i] == '"':
			if inQuote {
				flush(i + 1)
			} else {
				flush(i)
			}
			inQuote = !inQuote
		}
	}
	flush(len(reason))
	return b.String()
}
