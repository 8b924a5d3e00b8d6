package cli

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
	"github.com/outboxd/outbox/outbox/authguard"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// newGuard makes the throttle of wrong tokens that the API, the console's
// login and /metrics share, so that guesses at any of them count for all.
func newGuard(c *config.Config, logger *slog.Logger) *authguard.Guard {
	proxies, err := config.ParseProxies(c.TrustedProxies)
	if err != nil { // Validate refused them already
		proxies = nil
	}
	return authguard.New(authguard.Config{TrustedProxies: proxies, Logger: logger.With("component", "auth")})
}

// authMetrics are outbox_auth_failures_total and
// outbox_auth_delayed_requests, read from g.
func authMetrics(g *authguard.Guard) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "outbox_auth_failures_total",
			Help: "Wrong tokens sent to the HTTP API, the console's login and /metrics.",
		}, func() float64 { return float64(g.Failures()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "outbox_auth_delayed_requests",
			Help: "Answers to wrong tokens held back now.",
		}, func() float64 { return float64(g.Waiting()) }),
	}
}

// metrics serves reg, behind the token unless the metrics_open setting is on.
func (s *server) metrics(reg *prometheus.Registry) http.Handler {
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	})
	if s.cfg.MetricsOpen {
		return h
	}
	cfg := apiConfig(s.cfg, s.log)
	cfg.Guard = s.guard
	return httpapi.Protect(h, cfg)
}

// token prints a new random token: 32 bytes in base64url.
func token(e Env, args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(e.Stderr, "outboxd token: takes no arguments\n")
		return exitUsage
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	fmt.Fprintln(e.Stdout, base64.RawURLEncoding.EncodeToString(b[:]))
	return exitOK
}
