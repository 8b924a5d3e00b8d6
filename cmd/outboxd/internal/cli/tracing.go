package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
)

// tracingShutdownTimeout bounds the flush of the last spans on exit.
const tracingShutdownTimeout = 5 * time.Second

// tracesWanted reports whether the standard OTEL_* variables ask for
// traces to be exported over OTLP: OTEL_TRACES_EXPORTER=otlp, or no
// OTEL_TRACES_EXPORTER and an OTLP endpoint set
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
// OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn it off; an
// exporter other than otlp or none, or an OTLP protocol other than
// http/protobuf, is an error naming the variable.
func tracesWanted(lookup config.Env) (bool, error) {
	getenv := func(name string) string { v, _ := lookup(name); return strings.TrimSpace(v) }
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	want := false
	switch exp := getenv("OTEL_TRACES_EXPORTER"); exp {
	case "":
		want = getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	case "none":
		return false, nil
	case "otlp":
		want = true
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: outboxd exports traces over OTLP only (otlp or none)", exp)
	}
	if !want {
		return false, nil
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(name); p != "" {
			if p != "http/protobuf" {
				return false, fmt.Errorf("%s=%q: outboxd exports OTLP over http/protobuf only", name, p)
			}
			break
		}
	}
	return true, nil
}

// newTracerProvider returns the tracer provider of the process and the
// function that flushes and shuts it down: nil and a no-op when the OTEL_*
// variables ask for no traces (the outbox and the API then use the global
// provider, a no-op). The exporter reads the rest of the standard
// variables itself (endpoint, headers, timeout, compression,
// certificates), the provider its sampler (OTEL_TRACES_SAMPLER) and batch
// settings (OTEL_BSP_*), the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES; service.name defaults to outboxd.
func newTracerProvider(getenv config.Env, logger *slog.Logger) (trace.TracerProvider, func(), error) {
	want, err := tracesWanted(getenv)
	if err != nil || !want {
		return nil, func() {}, err
	}
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "outboxd")),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	shutdown := func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			logger.Warn("flushing traces on exit", "err", err)
		}
	}
	return tp, shutdown, nil
}
