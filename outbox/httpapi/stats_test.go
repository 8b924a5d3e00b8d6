package httpapi_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// getRaw returns GET path's status and body as sent.
func (e *env) getRaw(t *testing.T, path string) (int, []byte) {
	t.Helper()
	resp, err := e.api.Client().Get(e.api.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func TestStatsExtraFieldsAreTopLevel(t *testing.T) {
	rc := newReceiver(t, func(*http.Request) int { return http.StatusServiceUnavailable })
	var calls atomic.Int64
	logs := &testkit.Buffer{}
	cfg := httpapi.Config{
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		ExtraStats: func() map[string]any {
			n := calls.Add(1)
			return map[string]any{
				"partitions": []int{0, 3},
				"kafka":      map[string]any{"generation": n, "joined": true, "partitions": []any{}},
				"pending":    999,       // a Stats field: ignored
				"broken":     func() {}, // does not encode: left out
				"zeta":       "last in order",
			}
		},
	}
	e := newEnv(t, cfg, map[string]string{"orders": rc.URL})
	if code, m := e.post(t, "/v1/events", []map[string]any{{"destination": "orders"}, {"destination": "orders"}}); code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}

	code, m := e.get(t, "/v1/stats")
	if code != http.StatusOK {
		t.Fatalf("stats: %d %v", code, m)
	}
	if m["pending"] != float64(2) {
		t.Errorf("pending %v, want the outbox's 2: an extra field must not replace a count", m["pending"])
	}
	for _, k := range []string{"dead", "in_flight", "delivered_total", "failed_total", "oldest_pending_age_seconds"} {
		if _, ok := m[k]; !ok {
			t.Errorf("stats without %q: %v", k, m)
		}
	}
	if p, ok := m["partitions"].([]any); !ok || len(p) != 2 || p[0] != float64(0) || p[1] != float64(3) {
		t.Errorf("partitions %v, want [0 3]", m["partitions"])
	}
	if k, ok := m["kafka"].(map[string]any); !ok || k["generation"] != float64(1) || k["joined"] != true {
		t.Errorf("kafka %v, want the extra object as given", m["kafka"])
	}
	if _, ok := m["broken"]; ok {
		t.Errorf("a value that does not encode is in the answer: %v", m)
	}
	if !strings.Contains(logs.String(), "field=broken") {
		t.Errorf("the extra field that does not encode is not logged: %q", logs.String())
	}

	// Every request calls ExtraStats again; the Stats fields come first,
	// then the extra ones in key order.
	code, raw := e.getRaw(t, "/v1/stats")
	if code != http.StatusOK {
		t.Fatalf("stats: %d %s", code, raw)
	}
	if !bytes.HasPrefix(raw, []byte(`{"pending":2,"dead":0,`)) {
		t.Errorf("body %s does not start with the Stats fields", raw)
	}
	kafka := bytes.Index(raw, []byte(`"kafka":{"generation":2,`))
	part := bytes.Index(raw, []byte(`"partitions":[0,3]`))
	zeta := bytes.Index(raw, []byte(`"zeta":"last in order"`))
	age := bytes.Index(raw, []byte(`"oldest_pending_age_seconds"`))
	if age < 0 || kafka < age || part < kafka || zeta < part {
		t.Errorf("body %s: want the extra fields after the Stats fields, in key order, from a new call", raw)
	}
	if bytes.Count(raw, []byte(`"pending"`)) != 1 {
		t.Errorf("body %s has pending twice", raw)
	}
}

func TestStatsWithoutExtraFields(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, httpapi.Config{ExtraStats: func() map[string]any { return nil }}, map[string]string{"orders": rc.URL})
	code, raw := e.getRaw(t, "/v1/stats")
	want := `{"pending":0,"dead":0,"unrouted":0,"unrouted_dropped_total":0,"in_flight":0,"delivered_total":0,"failed_total":0,"oldest_pending_age_seconds":0,"archived":0,` +
		`"backfill":{"running":false,"routed":0,"deliveries":0,"remaining":0}}` + "\n"
	if code != http.StatusOK || string(raw) != want {
		t.Errorf("stats with an empty ExtraStats: %d %s, want 200 %s", code, raw, want)
	}
}

// Add sums every count the stats body carries, so a view over several
// servers never leaves one out: each field of two bodies that all hold 1
// (true for a flag) adds up to 2, except the oldest pending age, which is
// the older one, and a flag, which is true when one of the two is.
func TestStatsBodyAddSumsEveryCount(t *testing.T) {
	one := func() httpapi.StatsBody {
		var b httpapi.StatsBody
		setOnes(t, reflect.ValueOf(&b).Elem())
		return b
	}
	sum := one()
	sum.Add(one())
	checkTwos(t, "", reflect.ValueOf(sum))
}

// setOnes sets every field of the struct v (and of its structs) to 1, or
// true.
func setOnes(t *testing.T, v reflect.Value) {
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Int:
			f.SetInt(1)
		case reflect.Uint64:
			f.SetUint(1)
		case reflect.Float64:
			f.SetFloat(1)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Struct:
			setOnes(t, f)
		default:
			t.Fatalf("field %s of kind %s: teach this test (and Add) how it sums", v.Type().Field(i).Name, f.Kind())
		}
	}
}

// checkTwos checks the fields of the sum of two setOnes bodies.
func checkTwos(t *testing.T, prefix string, v reflect.Value) {
	for i := range v.NumField() {
		name, f := prefix+v.Type().Field(i).Name, v.Field(i)
		want := 2.0
		if name == "OldestPendingAgeSeconds" || f.Kind() == reflect.Bool {
			want = 1
		}
		var got float64
		switch f.Kind() {
		case reflect.Int:
			got = float64(f.Int())
		case reflect.Uint64:
			got = float64(f.Uint())
		case reflect.Float64:
			got = f.Float()
		case reflect.Bool:
			if f.Bool() {
				got = 1
			}
		case reflect.Struct:
			checkTwos(t, name+".", f)
			continue
		}
		if got != want {
			t.Errorf("after Add, %s = %v, want %v", name, got, want)
		}
	}
}
