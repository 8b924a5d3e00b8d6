package cli

import (
	"log/slog"
	"strings"
	"testing"
)

// Traces are exported only when the standard variables ask for them;
// what outboxd cannot do is refused naming the variable.
func TestTracesWanted(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
		err  string
	}{
		{env: nil, want: false},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, want: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, want: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, want: false},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, want: false},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, err: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
	} {
		got, err := tracesWanted(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want one naming %s", tc.env, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %v, %v; want %v", tc.env, got, err, tc.want)
		}
	}
}

// With traces asked for, the provider is built (the exporter connects
// lazily) and shut down without a collector.
func TestNewTracerProviderOnAndOff(t *testing.T) {
	tp, stop, err := newTracerProvider(func(string) (string, bool) { return "", false }, nil)
	if err != nil || tp != nil {
		t.Fatalf("off: %v, %v", tp, err)
	}
	stop()
	env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}
	tp, stop, err = newTracerProvider(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, slog.New(slog.DiscardHandler))
	if err != nil || tp == nil {
		t.Fatalf("on: %v, %v", tp, err)
	}
	stop()
}
