package config

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
)

// StaticHashes returns a short hash of each endpoint's definition, by name:
// what an instance of a Kafka group announces to the others
// (kafka.StoreConfig.StaticEndpoints), so that endpoints the instances'
// settings define differently are found. A hash covers everything that
// changes a delivery: the URL, the secrets (by their own hashes: no secret
// is announced), the timeout (delivery.timeout when the endpoint sets
// none), the headers, max_in_flight, allow_private, the rate limit and
// burst, the topics and the filter; not the order of headers, topics or
// filter entries. With no endpoint the map is empty, never nil: an instance
// that defines none says so.
func (c *Config) StaticHashes() map[string]string {
	out := make(map[string]string, len(c.Endpoints))
	for _, e := range c.Endpoints {
		out[e.Name] = c.endpointHash(e)
	}
	return out
}

// endpointHash returns the hash of e's definition: 16 hex digits of the
// SHA-256 of its canonical form, a line per field with quoted values, the
// entries of lists and maps in sorted order.
func (c *Config) endpointHash(e Endpoint) string {
	h := sha256.New()
	line := func(field string, values ...string) {
		fmt.Fprint(h, field)
		for _, v := range values {
			fmt.Fprint(h, " ", strconv.Quote(v))
		}
		fmt.Fprint(h, "\n")
	}
	line("url", e.URL)
	secrets := make([]string, len(e.Secrets))
	for i, s := range e.Secrets {
		sum := sha256.Sum256([]byte(s))
		secrets[i] = hex.EncodeToString(sum[:])
	}
	slices.Sort(secrets)
	line("secrets", secrets...)
	line("timeout", cmp.Or(e.Timeout, c.Delivery.Timeout).String())
	headers := make(map[string]string, len(e.Headers))
	for k, v := range e.Headers {
		headers[http.CanonicalHeaderKey(k)] = v
	}
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		line("header", k, headers[k])
	}
	line("max_in_flight", strconv.Itoa(e.MaxInFlight))
	line("allow_private", strconv.FormatBool(e.AllowPrivate))
	burst := 0
	if e.RateLimit > 0 {
		burst = max(1, e.Burst) // the burst a limit has when none is set
	}
	line("rate_limit", strconv.FormatFloat(e.RateLimit, 'g', -1, 64), strconv.Itoa(burst))
	line("topics", slices.Sorted(slices.Values(e.Topics))...)
	for _, k := range slices.Sorted(maps.Keys(e.Filter)) {
		line("filter", k, e.Filter[k])
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
