package config

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/kafka"
)

// The kinds of endpoint (Endpoint.Kind).
const (
	// KindHTTP endpoints receive events as HTTP requests.
	KindHTTP = "http"
	// KindKafka endpoints are Kafka topics: each event is a record.
	KindKafka = "kafka"
)

// kafkaScheme starts the URL of an endpoint of kind kafka.
const kafkaScheme = "kafka://"

// IsKafka reports whether e is of kind kafka: so declared, or with a
// kafka:// URL and no kind.
func (e Endpoint) IsKafka() bool {
	if e.Kind != "" {
		return e.Kind == KindKafka
	}
	return strings.HasPrefix(strings.ToLower(e.URL), kafkaScheme)
}

// kafkaEndpoint returns the name of the first endpoint of kind kafka, ""
// when there is none.
func (c *Config) kafkaEndpoint() string {
	for _, e := range c.Endpoints {
		if e.IsKafka() {
			return e.Name
		}
	}
	return ""
}

// KafkaTopic returns the topic of an endpoint of kind kafka: its URL
// without kafka://.
func (e Endpoint) KafkaTopic() string {
	return e.URL[min(len(kafkaScheme), len(e.URL)):]
}

// NewSinks builds the sinks of the endpoints: the HTTP sink (always: the
// endpoints managed through the API are added to it) and, when an endpoint
// is of kind kafka, the Kafka sink producing to their topics through the
// brokers of the kafka section. logger may be nil (discard). The error is
// a *SettingError naming the setting.
func (c *Config) NewSinks(logger *slog.Logger) (*httpsink.Sink, *kafka.Sink, error) {
	kcfg, err := c.kafkaSinkConfig(logger)
	if err != nil {
		return nil, nil, err
	}
	scfg, err := c.SinkConfig(logger)
	if err != nil {
		return nil, nil, err
	}
	hs, err := httpsink.New(scfg)
	if err != nil {
		return nil, nil, c.explainHTTP(err)
	}
	if len(kcfg.Topics) == 0 {
		return hs, nil, nil
	}
	ks, err := kafka.NewSink(kcfg)
	if err != nil {
		hs.Close()
		return nil, nil, Explain(err)
	}
	return hs, ks, nil
}

// kafkaSinkConfig checks the endpoints of kind kafka and maps them onto
// the Kafka sink's configuration (no Topics: there are none).
func (c *Config) kafkaSinkConfig(logger *slog.Logger) (kafka.SinkConfig, error) {
	kc := kafka.SinkConfig{Kafka: c.Kafka, Logger: component(logger, "kafkasink")}
	seen := make(map[string]int, len(c.Endpoints))
	for i, e := range c.Endpoints {
		setting := fmt.Sprintf("endpoints[%d]", i)
		if e.Kind != "" && e.Kind != KindHTTP && e.Kind != KindKafka {
			return kc, bad(setting+".kind", "want http or kafka, got %q", e.Kind)
		}
		if j, dup := seen[e.Name]; dup && (e.IsKafka() || c.Endpoints[j].IsKafka()) {
			return kc, bad(setting+".name", "%q is already the name of endpoints[%d]", e.Name, j)
		}
		seen[e.Name] = i
		if !e.IsKafka() {
			continue
		}
		if !endpointName.MatchString(e.Name) {
			return kc, bad(setting+".name", "%q: want 1 to 100 letters, digits, '.', '_' and '-', not starting with '.'", e.Name)
		}
		if err := checkKafkaEndpoint(e); err != nil {
			return kc, bad(setting+err.field, "%s", err.reason)
		}
		if len(c.Kafka.Brokers) == 0 {
			return kc, bad("kafka.brokers", "required by endpoint %s, of kind kafka: the brokers it produces to", e.Name)
		}
		if kc.Topics == nil {
			kc.Topics = map[string]string{}
		}
		kc.Topics[e.Name] = e.KafkaTopic()
	}
	return kc, nil
}

// endpointName is what an endpoint may be named (as httpsink checks for
// the endpoints of kind http).
var endpointName = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$`)

// kafkaTopicName is what Kafka accepts as a topic name.
var kafkaTopicName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

// fieldProblem is a problem with one field of an endpoint.
type fieldProblem struct{ field, reason string }

// checkKafkaEndpoint checks an endpoint of kind kafka: its URL names a
// topic, and it sets none of the settings that only mean something over
// HTTP.
func checkKafkaEndpoint(e Endpoint) *fieldProblem {
	if !strings.HasPrefix(e.URL, kafkaScheme) {
		return &fieldProblem{".url", fmt.Sprintf("an endpoint of kind kafka wants kafka://TOPIC, got %q", e.URL)}
	}
	if t := e.KafkaTopic(); !kafkaTopicName.MatchString(t) || t == "." || t == ".." {
		return &fieldProblem{".url", fmt.Sprintf("%q is not a Kafka topic name (ASCII letters, digits, '.', '_' and '-', at most 249)", t)}
	}
	unused := []struct {
		field string
		set   bool
	}{
		{".secrets", len(e.Secrets) > 0}, {".headers", len(e.Headers) > 0}, {".timeout", e.Timeout != 0},
		{".max_in_flight", e.MaxInFlight != 0}, {".allow_private", e.AllowPrivate},
	}
	for _, u := range unused {
		if u.set {
			return &fieldProblem{u.field, "is for endpoints of kind http; an endpoint of kind kafka takes kafka.produce_timeout and the kafka section's connection settings"}
		}
	}
	return nil
}

// explainHTTP explains an error of httpsink.New, whose endpoint indexes
// count the endpoints of kind http only, with the indexes of the settings.
func (c *Config) explainHTTP(err error) error {
	var he *httpsink.ConfigError
	if !errors.As(err, &he) || !strings.HasPrefix(he.Field, "Endpoints[") {
		return Explain(err)
	}
	n, rest, ok := strings.Cut(strings.TrimPrefix(he.Field, "Endpoints["), "]")
	i, aerr := strconv.Atoi(n)
	if !ok || aerr != nil {
		return Explain(err)
	}
	for j, e := range c.Endpoints {
		if e.IsKafka() {
			continue
		}
		if i == 0 {
			fixed := *he
			fixed.Field = "Endpoints[" + strconv.Itoa(j) + "]" + rest
			fixed.Reason = strings.ReplaceAll(he.Reason, "Endpoints["+n+"]", "Endpoints["+strconv.Itoa(j)+"]")
			return Explain(&fixed)
		}
		i--
	}
	return Explain(err)
}
