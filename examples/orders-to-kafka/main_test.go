package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/goleak"

	"github.com/outboxd/outbox/examples/internal/runexample"
	"github.com/outboxd/outbox/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { testkit.RemoveBinaries() }))
}

// The demo places its orders and reads them back from the topic, each
// customer's in order.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	runexample.Demo(t, []string{"--demo"}, "placed customer-0-order-3", "every event is on the topic", "6 records on topic orders:",
		"key customer-1 outbox-id customer-1-order-1 value {\"customer\":\"customer-1\",\"number\":1}\n"+
			"  partition 0 offset 1 key customer-1 outbox-id customer-1-order-2")
}

const (
	kills     = 10
	customers = 4
)

// The program is killed (SIGKILL) ten times while it places orders and
// publishes them, then runs once to the end: every order it reported
// placed is on the topic; each customer's orders are there in order, with
// none missing; and the only records there twice are those that may have
// been in flight at a kill (with per-key order, at most one per customer).
func TestKilledWhilePublishingLosesNoPlacedOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bin := testkit.BuildBinary(t, ".")
	dir := t.TempDir()
	args := []string{"--brokers", strings.Join(c.ListenAddrs(), ","), "--dir", dir, "--customers", "4"}
	placed := map[string]bool{}
	for kill := range kills {
		p, lines := testkit.StartLines(t, exec.Command(bin, append(args, "--orders", "0")...))
		n := 0
		for line := range lines {
			if id, ok := strings.CutPrefix(line, "placed "); ok {
				placed[id] = true
				if n++; n == 40+kill*13 { // a different moment each time
					if err := p.Kill(); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if p.ExitCode() != -1 {
			t.Fatalf("run %d: exit code %d, want killed", kill, p.ExitCode())
		}
	}
	last := runexample.Start(t, bin, nil, append(args, "--orders", "1")...)
	if err := last.Wait(); err != nil {
		t.Fatalf("last run: %v\n%s", err, last.Output())
	}
	for _, l := range strings.Split(last.Output(), "\n") {
		if id, ok := strings.CutPrefix(l, "placed "); ok {
			placed[id] = true
		}
	}

	recs, err := topicRecords(context.Background(), c.ListenAddrs(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	next := map[string]int{} // by customer: the order number its next new record must have
	for _, r := range recs {
		if seen[r.ID]++; seen[r.ID] > 1 {
			continue
		}
		var o Order
		if err := json.Unmarshal([]byte(r.Value), &o); err != nil || o.Customer != r.Key {
			t.Fatalf("record %+v: %v", r, err)
		}
		if want := next[o.Customer] + 1; o.Number != want {
			t.Errorf("%s: order %d follows order %d on the topic", o.Customer, o.Number, want-1)
		}
		next[o.Customer] = o.Number
	}
	for id := range placed {
		if seen[id] == 0 {
			t.Errorf("%s was reported placed and is not on the topic", id)
		}
	}
	if dups := len(recs) - len(seen); dups > kills*customers {
		t.Errorf("%d records are repeats; at most %d deliveries can have been in flight at the kills", dups, kills*customers)
	}
	t.Logf("%d orders placed and acknowledged, %d records on the topic, %d of them repeats", len(placed), len(recs), len(recs)-len(seen))
}
