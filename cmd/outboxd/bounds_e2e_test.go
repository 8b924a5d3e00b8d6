package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// headersJSON returns a JSON object of n headers named X-H000... (6 bytes)
// with values of valueBytes.
func headersJSON(n, valueBytes int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"X-H%03d": %q`, i, strings.Repeat("v", valueBytes))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Every bound of a managed endpoint's definition, over the API: at the
// limit the definition is accepted and in force, just over it the answer
// is a 400 naming the limit and the endpoint keeps its definition; so do
// names of dots and hosts private by name or number. Rates of /retry and
// /dead/replay are bounded alike.
func TestEndpointBoundsOverTheAPI(t *testing.T) {
	p := start(t, t.TempDir()) // the address guard is on
	const hook = "https://example.com/hook"
	if code, body := call(t, "POST", p.url("/v1/endpoints/billing"), "", `{"url": "`+hook+`"}`); code != http.StatusCreated {
		t.Fatalf("POST billing: %d %v", code, body)
	}
	definition := func() string {
		t.Helper()
		code, body := call(t, "GET", p.url("/v1/endpoints/billing"), "", "")
		if code != http.StatusOK {
			t.Fatalf("GET billing: %d %v", code, body)
		}
		b, _ := json.Marshal(body)
		return string(b)
	}
	spec := func(fields string) string { return `{"url": "` + hook + `", ` + fields + `}` }
	longURL := func(n int) string { return hook + "?" + strings.Repeat("q", n-len(hook)-1) }
	floor := strconv.FormatFloat(1.0/86400, 'g', -1, 64)
	for _, tc := range []struct {
		name, at, over, limit string
	}{
		{"headers", spec(`"headers": ` + headersJSON(64, 1)), spec(`"headers": ` + headersJSON(65, 1)), "headers: 65 headers; at most 64"},
		{"header bytes", spec(`"headers": ` + headersJSON(8, 1018)), spec(`"headers": ` + headersJSON(8, 1019)), "headers: 8200 bytes of names and values; at most 8192"},
		{"url", `{"url": "` + longURL(2048) + `"}`, `{"url": "` + longURL(2049) + `"}`, "url: 2049 bytes long; at most 2048"},
		{"shortest timeout", spec(`"timeout": "1s"`), spec(`"timeout": "999ms"`), "timeout: 999ms is out of range: from 1s to 15m0s"},
		{"longest timeout", spec(`"timeout": "15m"`), spec(`"timeout": "15m0.001s"`), "timeout: 15m0.001s is out of range: from 1s to 15m0s"},
		{"1ns timeout", spec(`"timeout": "10s"`), spec(`"timeout": "1ns"`), "timeout: 1ns is out of range"},
		{"100000h timeout", spec(`"timeout": "10s"`), spec(`"timeout": "100000h"`), "timeout: 100000h0m0s is out of range"},
		{"lowest rate", spec(`"rate": ` + floor), spec(`"rate": 1e-300`), "rate: 1e-300 is out of range: from 1/86400 (one per day) to 1000000 per second"},
		{"highest rate", spec(`"rate": 1000000`), spec(`"rate": 1000001`), "rate: 1.000001e+06 is out of range: from 1/86400 (one per day) to 1000000 per second"},
	} {
		if code, body := call(t, "PUT", p.url("/v1/endpoints/billing"), "", tc.at); code != http.StatusOK {
			t.Errorf("%s at the limit: %d %v; want 200", tc.name, code, body)
			continue
		}
		before := definition()
		code, body := call(t, "PUT", p.url("/v1/endpoints/billing"), "", tc.over)
		if msg, _ := body["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, tc.limit) {
			t.Errorf("%s just over the limit: %d %v; want 400 naming %q", tc.name, code, body, tc.limit)
		}
		if after := definition(); after != before {
			t.Errorf("%s: the definition changed after a refused replacement:\n%s\nwant:\n%s", tc.name, after, before)
		}
	}

	for _, tc := range []struct{ path, body, want string }{
		{"/v1/endpoints/%2e", `{"url": "` + hook + `"}`, `name: "." starts with a dot`},
		{"/v1/endpoints/%2e%2e", `{"url": "` + hook + `"}`, `name: ".." starts with a dot`},
		{"/v1/endpoints/%2e%2e%2e%2e", `{"url": "` + hook + `"}`, `name: "...." starts with a dot`},
		{"/v1/endpoints/.hidden", `{"url": "` + hook + `"}`, `name: ".hidden" starts with a dot`},
	} {
		code, body := call(t, "POST", p.url(tc.path), "", tc.body)
		if msg, _ := body["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
			t.Errorf("POST %s: %d %v; want 400 naming %q", tc.path, code, body, tc.want)
		}
	}
	for _, host := range []string{"localhost", "LOCALHOST.", "foo.localhost", "127.1", "2130706433", "0x7f000001", "017700000001", "0", "0x7f.1", "10.1", "169.254.169.254"} {
		code, body := call(t, "POST", p.url("/v1/endpoints/private"), "", `{"url": "http://`+host+`:8080/hook"}`)
		if msg, _ := body["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, "url: ") || !strings.Contains(msg, "allow-private") {
			t.Errorf("POST an endpoint on %s: %d %v; want 400 naming the url and how to allow it", host, code, body)
		}
	}
	if code, body := call(t, "GET", p.url("/v1/endpoints?limit=1000"), "", ""); code != http.StatusOK || len(body["endpoints"].([]any)) != 1 {
		t.Errorf("the endpoints after refused creations: %d %v; want billing alone", code, body)
	}

	for _, tc := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/v1/endpoints/billing/retry", `{"rate": 1e-300}`, http.StatusBadRequest, "rate: 1e-300 is out of range: from 1/86400 (one per day) to 1000000 per second"},
		{"/v1/endpoints/billing/retry", `{"rate": 1000001}`, http.StatusBadRequest, "rate: 1.000001e+06 is out of range"},
		{"/v1/endpoints/billing/retry", `{"rate": ` + floor + `}`, http.StatusAccepted, ""},
		{"/v1/endpoints/billing/retry", `{"rate": 1000000}`, http.StatusAccepted, ""},
		{"/v1/dead/replay", `{"rate": 1e-300}`, http.StatusBadRequest, "rate: 1e-300 is out of range: from 1/86400 (one per day) to 1000000 per second"},
		{"/v1/dead/replay", `{"rate": 1000000}`, http.StatusAccepted, ""},
		{"/v1/events", `[{"id": "e1", "destination": ".."}]`, http.StatusBadRequest, `destination: ".." starts with a dot`},
		{"/v1/events", `[{"id": "e2", "destination": ".billing"}]`, http.StatusBadRequest, `destination: ".billing" starts with a dot`},
	} {
		code, body := call(t, "POST", p.url(tc.path), "", tc.body)
		if msg, _ := body["error"].(string); code != tc.code || !strings.Contains(msg, tc.want) {
			t.Errorf("POST %s %s: %d %v; want %d naming %q", tc.path, tc.body, code, body, tc.code, tc.want)
		}
	}
}

// The settings' endpoints are held to the same bounds: serve refuses to
// start, naming the setting.
func TestEndpointBoundsInTheSettings(t *testing.T) {
	dir := t.TempDir()
	file := func(name, yaml string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	var many strings.Builder
	for i := range 65 {
		fmt.Fprintf(&many, "      X-H%03d: v\n", i)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--endpoint", "local=http://localhost:8080/hook"}, []string{"endpoints[0].url", "loopback by name", "allow-private"}},
		{[]string{"--endpoint", "local=http://0x7f000001/hook"}, []string{"endpoints[0].url", "127.0.0.1", "allow-private"}},
		{[]string{"--endpoint", "..=https://example.com/hook"}, []string{"endpoints[0].name", `".." starts with a dot`}},
		{[]string{"--endpoint", "a=https://example.com/hook,timeout=1ns"}, []string{"endpoints[0].timeout", "1ns is out of range: from 1s to 15m0s"}},
		{[]string{"--endpoint", "a=https://example.com/hook,timeout=100000h"}, []string{"endpoints[0].timeout", "out of range"}},
		{[]string{"--endpoint", "a=https://example.com/hook,rate=1e-300"}, []string{"rate: 1e-300 is out of range: from 1/86400 (one per day) to 1000000 per second"}},
		{[]string{"--timeout", "16m"}, []string{"delivery.timeout", "16m0s is out of range"}},
		{[]string{"--config", file("headers.yaml", "endpoints:\n  - name: a\n    url: https://example.com/hook\n    headers:\n"+many.String())},
			[]string{"endpoints[0].headers", "65 headers; at most 64"}},
		{[]string{"--config", file("url.yaml", "endpoints:\n  - {name: a, url: 'https://example.com/"+strings.Repeat("p", 2100)+"'}\n")},
			[]string{"endpoints[0].url", "at most 2048"}},
	} {
		code, out := run(t, dir, append([]string{"serve"}, tc.args...)...)
		for _, want := range tc.want {
			if code != 2 || !strings.Contains(out, want) {
				t.Errorf("serve %v: exit %d, %q; want a start-up error naming %q", tc.args, code, out, want)
			}
		}
	}
}
