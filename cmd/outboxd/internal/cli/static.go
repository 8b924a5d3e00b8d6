package cli

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
)

// staticGroup is what the static-endpoints check reads of a consumer
// group (a *kafka.Group).
type staticGroup interface {
	StaticMismatch(ctx context.Context) ([]string, error)
}

// staticAskEvery is how often the watch asks the group. The group keeps
// its answer for a generation, so the coordinator is asked once per
// generation, and again only while the group rebalances.
const staticAskEvery = time.Second

// staticWatch keeps the reason of the static-endpoints check, learned in
// the background so that /readyz answers at once: the endpoints that the
// members of the group define differently in their settings.
type staticWatch struct {
	g      staticGroup
	log    *slog.Logger
	reason atomic.Pointer[string]
	stop   context.CancelFunc
	done   chan struct{}
}

// watchStatic starts watching g; close stops it.
func watchStatic(g staticGroup, log *slog.Logger) *staticWatch {
	ctx, stop := context.WithCancel(context.Background())
	w := &staticWatch{g: g, log: log, stop: stop, done: make(chan struct{})}
	go w.run(ctx)
	return w
}

func (w *staticWatch) run(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(staticAskEvery)
	defer t.Stop()
	for {
		w.ask(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ask asks the group once; an answer it cannot give (a rebalance, a broker
// that does not answer) leaves the last reason standing.
func (w *staticWatch) ask(ctx context.Context) {
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	differ, err := w.g.StaticMismatch(actx)
	if err != nil {
		w.log.Debug("comparing the static endpoints of the group", "err", err)
		return
	}
	reason := ""
	if len(differ) > 0 {
		reason = "static endpoints defined differently by the members of the group: " + strings.Join(differ, ", ") +
			" (give every instance the same definitions)"
	}
	if old := w.reason.Swap(&reason); old == nil || *old != reason {
		if reason != "" {
			w.log.Warn("static endpoints differ between the members of the group", "endpoints", differ)
		} else if old != nil {
			w.log.Info("static endpoints agree across the group again")
		}
	}
}

// failure is the static-endpoints check: the last reason learned, "" when
// the members agree or nothing was learned yet.
func (w *staticWatch) failure() string {
	if r := w.reason.Load(); r != nil {
		return *r
	}
	return ""
}

// close stops the watch and waits for it.
func (w *staticWatch) close() {
	w.stop()
	<-w.done
}
