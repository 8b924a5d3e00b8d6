package config

import (
	"errors"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

// Explain turns the configuration error of a library outboxd configures (a
// *outbox.ConfigError, *httpsink.ConfigError or *kafka.ConfigError in err),
// which names Go fields ("BackoffMax", "Endpoints[0].URL", "TLS.CAFile"),
// into a *SettingError naming outboxd's settings ("delivery.backoff_max",
// "endpoints[0].url", "kafka.tls.ca_file"), in its Reason too; the
// *SettingError unwraps to the library's error. Any other error is returned
// as it is.
func Explain(err error) error {
	var (
		oe *outbox.ConfigError
		he *httpsink.ConfigError
		ke *kafka.ConfigError
	)
	switch {
	case errors.As(err, &ke):
		return kafkaNames().explain(ke.Field, ke.Reason, err)
	case errors.As(err, &he):
		return sinkNames().explain(he.Field, he.Reason, err)
	case errors.As(err, &oe):
		return outboxNames().explain(oe.Field, oe.Reason, err)
	}
	return err
}

// fieldNames maps the Go field paths of one library's Config to the YAML
// paths of outboxd's settings. In a path, "[]" stands for an index: the
// template "Endpoints[].URL" maps "Endpoints[2].URL" to "endpoints[2].url".
type fieldNames struct {
	fallback string            // the setting named for a field not in yaml
	yaml     map[string]string // Go path template -> YAML path template
	field    *regexp.Regexp    // any Go field path, as a whole word
}

// index is one index of a field path: [2] or ["Header-Name"].
var index = regexp.MustCompile(`\[(?:"(?:[^"\\]|\\.)*"|[^\]]*)\]`)

// newFieldNames compiles the names of yaml, a map from Go path templates to
// YAML path templates.
func newFieldNames(fallback string, yaml map[string]string) fieldNames {
	alts := make([]string, 0, len(yaml))
	for p := range yaml {
		alt := strings.ReplaceAll(regexp.QuoteMeta(p), `\[\]`, index.String())
		if !strings.HasSuffix(p, "]") {
			alt += `\b`
		}
		alts = append(alts, alt)
	}
	sort.Slice(alts, func(i, j int) bool { return len(alts[i]) > len(alts[j]) })
	return fieldNames{fallback: fallback, yaml: yaml, field: regexp.MustCompile(`\b(?:` + strings.Join(alts, "|") + `)`)}
}

// sameNames adds to names the fields of the outboxd settings type src that
// the library type lib has by the same Go name (and type kind), mapped to
// their yaml tags under the prefixes. Structs, and slices and maps of
// structs, are walked.
func sameNames(names map[string]string, lib, src reflect.Type, goPrefix, yamlPrefix string) {
	for i := range src.NumField() {
		f := src.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || tag == "" || tag == "-" {
			continue
		}
		lf, ok := lib.FieldByName(f.Name)
		if !ok || lf.Type.Kind() != f.Type.Kind() {
			continue
		}
		goPath, yamlPath := goPrefix+f.Name, yamlPrefix+tag
		names[goPath] = yamlPath
		lt, st := lf.Type, f.Type
		switch st.Kind() {
		case reflect.Slice, reflect.Map:
			goPath, yamlPath = goPath+"[]", yamlPath+"[]"
			names[goPath] = yamlPath
			lt, st = lt.Elem(), st.Elem()
		}
		if st.Kind() == reflect.Struct && lt.Kind() == reflect.Struct {
			sameNames(names, lt, st, goPath+".", yamlPath+".")
		}
	}
}

// kafkaNames: outboxd's kafka section is kafka.Config itself.
var kafkaNames = sync.OnceValue(func() fieldNames {
	names := map[string]string{}
	t := reflect.TypeFor[kafka.Config]()
	sameNames(names, t, t, "", "kafka.")
	return newFieldNames("kafka", names)
})

// sinkNames: httpsink.Config is built from the endpoints, the top-level
// allow_* settings and the delivery settings the sink takes (see
// Config.SinkConfig).
var sinkNames = sync.OnceValue(func() fieldNames {
	names := map[string]string{"PoolSize": "delivery.concurrency", "Policy": "delivery.policy"}
	lib := reflect.TypeFor[httpsink.Config]()
	sameNames(names, lib, reflect.TypeFor[Config](), "", "")
	sameNames(names, lib, reflect.TypeFor[Delivery](), "", "delivery.")
	return newFieldNames("endpoints", names)
})

// outboxNames: outbox.Config is built from the delivery settings and a few
// limits (see Config.OutboxConfig).
var outboxNames = sync.OnceValue(func() fieldNames {
	names := map[string]string{
		"MaxThrottle":          "delivery.max_retry_after",
		"MaxPayloadBytes":      "limits.max_payload_bytes",
		"MaxIDBytes":           "limits.max_id_bytes",
		"MaxCommitBatch":       "limits.max_batch",
		"MaxDeliveriesPerCall": "limits.max_deliveries_per_request",
		// Named otherwise than the settings: an off switch and a size whose
		// zero keeps none (see OutboxConfig).
		"NoAttemptLog":          "delivery.attempt_log",
		"NoAdaptiveConcurrency": "delivery.adaptive_concurrency",
		"AttemptExcerptBytes":   "delivery.attempt_excerpt",

		"Breaker.Threshold":   "delivery.breaker_threshold",
		"Breaker.CoolDown":    "delivery.breaker_cool_down",
		"Breaker.MaxCoolDown": "delivery.breaker_max_cool_down",
		"RateLimits":          "endpoints",
	}
	sameNames(names, reflect.TypeFor[outbox.Config](), reflect.TypeFor[Delivery](), "", "delivery.")
	return newFieldNames("delivery", names)
})

// explain returns the *SettingError for a library's field and reason.
func (n fieldNames) explain(field, reason string, cause error) *SettingError {
	setting, ok := n.setting(field)
	if !ok {
		setting = n.fallback
	}
	return &SettingError{Setting: setting, Reason: n.rewrite(reason), Err: cause}
}

// setting returns the YAML path of a Go field path, with its indices.
func (n fieldNames) setting(field string) (string, bool) {
	indices := index.FindAllString(field, -1)
	tmpl, ok := n.yaml[index.ReplaceAllLiteralString(field, "[]")]
	if !ok {
		return "", false
	}
	var b strings.Builder
	for {
		before, after, found := strings.Cut(tmpl, "[]")
		b.WriteString(before)
		if !found {
			break
		}
		if len(indices) > 0 {
			b.WriteString(indices[0])
			indices = indices[1:]
		} else {
			b.WriteString("[]")
		}
		tmpl = after
	}
	return b.String(), true
}

// rewriteNames replaces the Go field paths in s with their YAML paths,
// except those qualified by a type ("Config.AllowPrivateNetworks"): a reason
// that names the Go API on purpose keeps it.
func (n fieldNames) rewriteNames(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range n.field.FindAllStringIndex(s, -1) {
		if m[0] > 0 && s[m[0]-1] == '.' {
			continue
		}
		if yaml, ok := n.setting(s[m[0]:m[1]]); ok {
			b.WriteString(s[last:m[0]])
			b.WriteString(yaml)
			last = m[1]
		}
	}
	b.WriteString(s[last:])
	return b.String()
}

// rewrite replaces the Go field paths in a reason with their YAML paths,
// outside the quoted values it shows (a topic may be called "Topic").
func (n fieldNames) rewrite(reason string) string {
	var b strings.Builder
	start, inQuote := 0, false
	flush := func(end int) {
		seg := reason[start:end]
		if !inQuote {
			seg = n.rewriteNames(seg)
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
