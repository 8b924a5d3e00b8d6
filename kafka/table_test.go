package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/testkit"
)

// applied collects the records a table's handler applied.
type applied struct {
	mu   sync.Mutex
	recs []string
}

func (a *applied) handler(r TableRecord) error {
	if string(r.Value) == "garbage" {
		return errors.New("not a record of this kind")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, fmt.Sprintf("%d %s=%s", r.Offset, r.Key, r.Value))
	return nil
}

func (a *applied) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.recs)
}

func openTestTable(t *testing.T, brokers []string, a *applied) *Table {
	t.Helper()
	cfg := testConfig(brokers, "events")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tb, err := OpenTable(ctx, cfg, TableConfig{Handlers: map[string]TableHandler{"endpoint/": a.handler}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tb.Close)
	return tb
}

// Every member applies the table's records in offset order: a Put returns
// once the writer's own reader applied it, another member gets it too, and
// a member opened later has read all of them when OpenTable returns.
func TestTableMembersApplyTheSameRecordsInOrder(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	var a, b applied
	ta := openTestTable(t, brokers, &a)
	if got, want := ta.Topic(), "g-events-changelog-endpoints"; got != want {
		t.Fatalf("topic %q, want %q", got, want)
	}
	tb := openTestTable(t, brokers, &b)
	ctx := context.Background()
	for i, tbl := range []*Table{ta, tb, ta} {
		key := fmt.Sprintf("endpoint/e%d", i)
		off, err := tbl.Put(ctx, []byte(key), []byte("v"))
		if err != nil {
			t.Fatal(err)
		}
		if off != int64(i) {
			t.Fatalf("Put %d at offset %d", i, off)
		}
		mine := &a
		if tbl == tb {
			mine = &b
		}
		if got := mine.list(); len(got) != i+1 {
			t.Fatalf("after Put %d its writer applied %v; want it among them (read your writes)", i, got)
		}
	}
	want := []string{"0 endpoint/e0=v", "1 endpoint/e1=v", "2 endpoint/e2=v"}
	testkit.WaitFor(t, 10*time.Second, "the other member to apply every record", func() bool {
		return slices.Equal(a.list(), want) && slices.Equal(b.list(), want)
	})
	var late applied
	openTestTable(t, brokers, &late)
	if got := late.list(); !slices.Equal(got, want) {
		t.Fatalf("a member opened later applied %v when OpenTable returned; want %v", got, want)
	}
}

// A record that does not decode is skipped and counted, and the reader
// goes on; records of kinds no handler knows are counted apart.
func TestTableSkipsRecordsThatDoNotDecode(t *testing.T) {
	c := newCluster(t)
	var a applied
	tbl := openTestTable(t, c.ListenAddrs(), &a)
	ctx := context.Background()
	for _, kv := range [][2]string{{"endpoint/x", "garbage"}, {"state/x", "open"}, {"endpoint/y", "ok"}} {
		if _, err := tbl.Put(ctx, []byte(kv[0]), []byte(kv[1])); err != nil {
			t.Fatal(err)
		}
	}
	st := tbl.Stats()
	if st.Skipped != 1 || st.Unhandled != 1 || st.Records != 2 || st.Applied != 3 {
		t.Fatalf("stats %+v; want 1 skipped, 1 unhandled, 2 handled, applied up to 3", st)
	}
	if got := a.list(); !slices.Equal(got, []string{"2 endpoint/y=ok"}) {
		t.Fatalf("applied %v; want only the record that decodes", got)
	}
}

// A table topic of several partitions has no single order: refused.
func TestTableRefusesATopicOfSeveralPartitions(t *testing.T) {
	c := newCluster(t)
	tr := &kafkago.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	admin := &kafkago.Client{Addr: kafkago.TCP(c.ListenAddrs()...), Transport: tr, Timeout: 5 * time.Second}
	cfg := testConfig(c.ListenAddrs(), "events")
	cfg.EndpointsTopic = "shared"
	if _, err := admin.CreateTopics(context.Background(), &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{{
		Topic: "shared", NumPartitions: 2, ReplicationFactor: 1,
		ConfigEntries: []kafkago.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}}}}}); err != nil {
		t.Fatal(err)
	}
	_, err := OpenTable(context.Background(), cfg, TableConfig{})
	var te *TopicError
	if !errors.As(err, &te) || te.Topic != "shared" {
		t.Fatalf("OpenTable on a topic of 2 partitions: %v; want a *TopicError naming it", err)
	}
}

// Close ends a Put waiting for its record and stops the reader.
func TestTablePutAfterClose(t *testing.T) {
	c := newCluster(t)
	var a applied
	tbl := openTestTable(t, c.ListenAddrs(), &a)
	tbl.Close()
	tbl.Close()
	if _, err := tbl.Put(context.Background(), []byte("endpoint/x"), []byte("v")); !errors.Is(err, ErrTableClosed) {
		t.Fatalf("Put after Close: %v; want ErrTableClosed", err)
	}
}
