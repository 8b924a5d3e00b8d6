package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/outboxd/outbox/examples/internal/console"
	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

// relay is one member of the consumer group: a kafka.Group with a store per
// partition it owns in dir, delivering through its own HTTP sink.
type relay struct {
	name string // printed before its lines; "" when the program runs one relay
	dir  string
	g    *kafka.Group
	sink *httpsink.Sink
	// crashed is set by crash (the demo's lost relay), which closed it.
	crashed bool
}

// relaySettings is what every relay of the program is started with.
type relaySettings struct {
	kafka     kafka.Config
	endpoints endpoints
	outbox    outbox.Config // Sink and Hooks are set per relay
	out       *console.Console
	// onDelivery, when set, is told of every delivery attempt (the demo
	// counts who delivered what).
	onDelivery func(relay string, d outbox.DeliveryInfo)
}

// startRelay starts a relay named name (may be "") with its partition
// stores in dir.
func startRelay(ctx context.Context, s relaySettings, name, dir string) (*relay, error) {
	sink, err := httpsink.New(httpsink.Config{Endpoints: s.endpoints})
	if err != nil {
		return nil, err
	}
	who := ""
	if name != "" {
		who = name + " "
	}
	ocfg := s.outbox
	ocfg.Sink = sink
	ocfg.Hooks = outbox.Hooks{
		OnEnqueue: func(n int) {
			s.out.Printf("%s← %d record(s) from %s stored durably in their partition's store", who, n, s.kafka.Topic)
		},
		OnDuplicate: func(n int) {
			s.out.Printf("%s= %d record(s) read again (their offsets were not committed yet): duplicates, dropped", who, n)
		},
		OnDelivery: func(d outbox.DeliveryInfo) {
			s.out.PrintDeliveryBy(name, d)
			if s.onDelivery != nil {
				s.onDelivery(name, d)
			}
		},
	}
	logger := slog.New(&groupLines{out: s.out, who: who})
	g, err := kafka.StartGroup(ctx, s.kafka, kafka.StoreConfig{Dir: dir, Outbox: ocfg}, logger)
	if err != nil {
		_ = sink.Close()
		return nil, err
	}
	return &relay{name: name, dir: dir, g: g, sink: sink}, nil
}

// close hands the relay's partitions over (deliveries in flight finish,
// the stores' changelogs are shipped, the offsets committed) and leaves
// the group. When ctx ends first, what is under way is cancelled, as in a
// crash: nothing is lost, the next owner rebuilds from what was shipped.
func (r *relay) close(ctx context.Context) error {
	err := r.g.Close(ctx)
	_ = r.sink.Close()
	return err
}

// crash stops the relay as abruptly as it can stop in-process: its Group
// is closed with a context that is already cancelled, so deliveries in
// flight are cancelled and the hand-over gives up at once instead of
// shipping what is left, and its directory is deleted, as if its disk were
// lost with it. (Unlike a killed process it still leaves the group at
// once.)
func (r *relay) crash() error {
	r.crashed = true
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.close(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return os.RemoveAll(r.dir)
}

// owned returns the partitions the relay owns and delivers now, and how
// many events their stores hold pending and dead.
func (r *relay) owned() (parts []int, pending, dead int) {
	for _, p := range r.g.Partitions() {
		if p.State == kafka.PartitionActive {
			parts = append(parts, p.Partition)
			pending += p.Pending
			dead += p.Dead
		}
	}
	return parts, pending, dead
}

// shipped reports whether every active store's changelog is shipped up to
// its last entry.
func (r *relay) shipped() bool {
	for _, o := range r.g.Stores() {
		st := o.Stats()
		if st.ShippedLSN < st.LastLSN {
			return false
		}
	}
	return true
}

// deadLetters lists the dead letters of the relay's active stores.
func (r *relay) deadLetters(ctx context.Context) ([]outbox.Event, error) {
	var all []outbox.Event
	for _, o := range r.g.Stores() {
		evs, _, err := o.List(ctx, outbox.ListOptions{State: outbox.StateDead})
		if err != nil && !errors.Is(err, outbox.ErrClosed) {
			return nil, err
		}
		all = append(all, evs...)
	}
	return all, nil
}

// groupLines is the slog handler the relays' Groups log to: it prints what
// the group does with the partitions (assignments, restores, hand-overs)
// and every warning, one line each, and drops the rest.
type groupLines struct {
	out   *console.Console
	who   string
	attrs []slog.Attr
}

func (h *groupLines) Enabled(context.Context, slog.Level) bool { return true }

func (h *groupLines) WithAttrs(as []slog.Attr) slog.Handler {
	return &groupLines{out: h.out, who: h.who, attrs: append(slices.Clip(h.attrs), as...)}
}

func (h *groupLines) WithGroup(string) slog.Handler { return h }

func (h *groupLines) Handle(_ context.Context, r slog.Record) error {
	a := map[string]slog.Value{}
	var rest []string
	add := func(at slog.Attr) {
		a[at.Key] = at.Value.Resolve()
		rest = append(rest, at.Key+"="+at.Value.Resolve().String())
	}
	for _, at := range h.attrs {
		add(at)
	}
	r.Attrs(func(at slog.Attr) bool { add(at); return true })
	switch {
	case r.Message == "kafka: partitions assigned":
		h.out.Printf("%s⇄ generation %s of group %s: partitions %s assigned to this relay",
			h.who, a["generation"], a["group"], a["partitions"])
	case r.Message == "kafka: partition restored":
		h.out.Printf("%s⟲ partition %s restored: mode %s, %s records, took %s",
			h.who, a["partition"], a["mode"], a["records"], a["took"])
	case r.Message == "kafka: partition handed over":
		h.out.Printf("%s⇥ partition %s handed over (changelog entries shipped on the way out: %s)",
			h.who, a["partition"], a["shipped"])
	case r.Level >= slog.LevelWarn:
		h.out.Printf("%s! %s (%s)", h.who, r.Message, strings.Join(rest, " "))
	}
	return nil
}
