package config

import (
	"strings"
	"testing"
)

// An endpoint of kind kafka comes from --endpoint NAME=kafka://TOPIC or
// from the file with kind: kafka; it produces through kafka.brokers,
// without group mode, and the Kafka sink gets its topic.
func TestKafkaEndpoints(t *testing.T) {
	file := writeFile(t, "endpoints:\n  - {name: ledger, kind: kafka, url: 'kafka://ledger-events', topics: ['order.*'], rate_limit: 50}\n"+
		"  - {name: hook, url: 'https://hook.example.com/'}\n")
	cfg, err := load(t, []string{"--config", file, "--endpoint", "audit=kafka://audit.v1", "--kafka-brokers", "127.0.0.1:9092"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs, ks, err := cfg.NewSinks(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	if ks == nil {
		t.Fatal("no Kafka sink")
	}
	defer ks.Close()
	for name, want := range map[string]string{"ledger": "ledger-events", "audit": "audit.v1"} {
		if got, ok := ks.Topic(name); !ok || got != want {
			t.Errorf("%s: topic %q, %v; want %q", name, got, ok, want)
		}
	}
	if got := hs.EndpointNames(); len(got) != 1 || got[0] != "hook" {
		t.Errorf("HTTP sink endpoints %v, want [hook]", got)
	}
	if _, ks, err := (&Config{}).NewSinks(nil); err != nil || ks != nil {
		t.Errorf("no endpoint of kind kafka: %v, %v; want no Kafka sink", ks, err)
	}
}

// What an endpoint of kind kafka cannot be is refused naming the setting;
// an HTTP endpoint's error names its index among all endpoints.
func TestKafkaEndpointsRefused(t *testing.T) {
	cases := []struct {
		name string
		file string
		args []string
		want []string
	}{
		{name: "no brokers", args: []string{"--endpoint", "audit=kafka://audit"},
			want: []string{"kafka.brokers (--kafka-brokers, OUTBOXD_KAFKA_BROKERS)", "required by endpoint audit, of kind kafka"}},
		{name: "bad topic", args: []string{"--endpoint", "audit=kafka://a/b", "--kafka-brokers", "k:9092"}, want: []string{"endpoints[0].url", `"a/b" is not a Kafka topic name`}},
		{name: "kind and url disagree", file: "endpoints:\n  - {name: a, kind: kafka, url: 'https://a.example.com/'}\nkafka: {brokers: ['k:9092']}\n",
			want: []string{"endpoints[0].url", "kafka://TOPIC"}},
		{name: "unknown kind", file: "endpoints:\n  - {name: a, kind: sqs, url: 'https://a.example.com/'}\n", want: []string{"endpoints[0].kind", `"sqs"`}},
		{name: "secret on kafka", args: []string{"--endpoint", "a=kafka://t,secret=whsec_aGVsbG8gd29ybGQgaGVsbG8gd29ybGQ=", "--kafka-brokers", "k:9092"},
			want: []string{"endpoints[0].secrets", "kind http"}},
		{name: "name taken", file: "endpoints:\n  - {name: a, url: 'https://a.example.com/'}\n  - {name: a, url: 'kafka://t'}\nkafka: {brokers: ['k:9092']}\n",
			want: []string{"endpoints[1].name", `"a" is already the name of endpoints[0]`}},
		{name: "http index past a kafka endpoint", file: "endpoints:\n  - {name: k, url: 'kafka://t'}\n  - {name: h, url: 'ftp://h.example.com/'}\nkafka: {brokers: ['k:9092']}\n",
			want: []string{"endpoints[1].url"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if c.file != "" {
				args = append([]string{"--config", writeFile(t, c.file)}, args...)
			}
			_, err := load(t, args, nil)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
