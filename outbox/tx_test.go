package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// room is the application's state in the room-leave tests: a JSON value in
// the application's "rooms" bucket.
type room struct {
	Version int      `json:"version"`
	Users   []string `json:"users"`
}

var roomsBucket = []byte("rooms")

func getRoom(b *bolt.Bucket, id string) (room, error) {
	var r room
	v := b.Get([]byte(id))
	if v == nil {
		return r, fmt.Errorf("no room %q", id)
	}
	return r, json.Unmarshal(v, &r)
}

// leave is the seed's room-leave done right: read the room, remove the user,
// write it and enqueue its snapshot in one transaction.
func leave(ctx context.Context, o *outbox.Outbox, roomID, user string) error {
	return o.Update(ctx, func(tx *outbox.Tx) error {
		b := tx.Bucket(roomsBucket)
		r, err := getRoom(b, roomID)
		if err != nil {
			return err
		}
		users := r.Users[:0:0]
		for _, u := range r.Users {
			if u != user {
				users = append(users, u)
			}
		}
		r.Users = users
		r.Version++
		v, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(roomID), v); err != nil {
			return err
		}
		_, err = tx.Enqueue(outbox.Event{
			ID:          fmt.Sprintf("%s-v%d", roomID, r.Version),
			Key:         roomID,
			Destination: "http://127.0.0.1:1/rooms",
			Payload:     v,
		})
		return err
	})
}

// Must show 1: 1,000 concurrent leaves of a room of 1,000 users lose no
// update: the room ends empty, every leave's snapshot is pending, and the
// last snapshot delivered (per-key order) shows nobody.
func TestUpdateRoomLeave(t *testing.T) {
	const n = 1000
	var mu sync.Mutex
	var delivered []room
	sink := sinkFunc(func(_ context.Context, d *outbox.Delivery) outbox.Result {
		var r room
		if err := json.Unmarshal(d.Payload, &r); err != nil {
			return outbox.Result{Action: outbox.ActionDead, Err: err}
		}
		mu.Lock()
		delivered = append(delivered, r)
		mu.Unlock()
		return outbox.Result{Action: outbox.ActionSuccess}
	})
	cfg := testConfig(sink)
	cfg.Ordered = true
	o, _ := open(t, cfg)
	ctx := context.Background()

	users := make([]string, n)
	for i := range users {
		users[i] = "user-" + strconv.Itoa(i)
	}
	err := o.Update(ctx, func(tx *outbox.Tx) error {
		b, err := tx.CreateBucketIfNotExists(roomsBucket)
		if err != nil {
			return err
		}
		v, _ := json.Marshal(room{Users: users})
		return b.Put([]byte("room-1"), v)
	})
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, u := range users {
		wg.Go(func() {
			if err := leave(ctx, o, "room-1", u); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	var final room
	if err := o.View(ctx, func(tx *outbox.ViewTx) error {
		var err error
		final, err = getRoom(tx.Bucket(roomsBucket), "room-1")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(final.Users) != 0 || final.Version != n {
		t.Fatalf("room after %d leaves: %d users, version %d; want 0 users, version %d", n, len(final.Users), final.Version, n)
	}
	if st := o.Stats(); st.Pending != n {
		t.Fatalf("pending snapshots: %d, want %d", st.Pending, n)
	}

	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "every snapshot delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) == n
	})
	mu.Lock()
	defer mu.Unlock()
	for i, r := range delivered {
		if r.Version != i+1 || len(r.Users) != n-i-1 {
			t.Fatalf("delivery %d: version %d with %d users; want version %d with %d", i, r.Version, len(r.Users), i+1, n-i-1)
		}
	}
	if last := delivered[n-1]; len(last.Users) != 0 {
		t.Fatalf("last snapshot delivered shows %d users", len(last.Users))
	}
}

var appBucket = []byte("app")

// visible reports whether the application's key k and the event with ID k
// are stored.
func visible(t *testing.T, o *outbox.Outbox, k string) (write, event bool) {
	t.Helper()
	if err := o.View(context.Background(), func(tx *outbox.ViewTx) error {
		if b := tx.Bucket(appBucket); b != nil {
			write = b.Get([]byte(k)) != nil
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, err := o.Get(context.Background(), k)
	switch {
	case err == nil:
		event = true
	case !errors.Is(err, outbox.ErrNotFound):
		t.Fatal(err)
	}
	return write, event
}

// writeAndEnqueue writes the application's key k and enqueues the event k.
func writeAndEnqueue(tx *outbox.Tx, k string) error {
	b, err := tx.CreateBucketIfNotExists(appBucket)
	if err != nil {
		return err
	}
	if err := b.Put([]byte(k), []byte("v-"+k)); err != nil {
		return err
	}
	_, err = tx.Enqueue(outbox.Event{ID: k, Destination: "http://127.0.0.1:1/x", Payload: []byte(k)})
	return err
}

// Must show 3: an Update that fails, panics or is cancelled before it
// commits leaves neither its writes nor its events, and does not disturb
// the Updates that share its commit.
func TestUpdateAllOrNothing(t *testing.T) {
	o, _ := open(t, testConfig(nopSink))
	ctx := context.Background()

	err := o.Update(ctx, func(tx *outbox.Tx) error {
		if err := writeAndEnqueue(tx, "failed"); err != nil {
			return err
		}
		return errTest
	})
	if err != errTest {
		t.Fatalf("fn's error: Update returned %v, want it as it is", err)
	}
	if w, e := visible(t, o, "failed"); w || e {
		t.Fatalf("after fn's error: write stored %v, event stored %v", w, e)
	}

	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want fn's panic", p)
			}
		}()
		_ = o.Update(ctx, func(tx *outbox.Tx) error {
			if err := writeAndEnqueue(tx, "panicked"); err != nil {
				return err
			}
			panic("boom")
		})
		t.Fatal("Update returned after fn panicked")
	}()
	if w, e := visible(t, o, "panicked"); w || e {
		t.Fatalf("after fn's panic: write stored %v, event stored %v", w, e)
	}

	cctx, cancel := context.WithCancel(ctx)
	err = o.Update(cctx, func(tx *outbox.Tx) error {
		if err := writeAndEnqueue(tx, "cancelled"); err != nil {
			return err
		}
		cancel() // before the commit starts
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Update: %v, want context.Canceled", err)
	}
	if w, e := visible(t, o, "cancelled"); w || e {
		t.Fatalf("after ctx ended: write stored %v, event stored %v", w, e)
	}

	// Failing and succeeding Updates sharing commits: each good one is
	// stored whole, each bad one not at all.
	var wg sync.WaitGroup
	const n = 64
	for i := range n {
		wg.Go(func() {
			k := fmt.Sprintf("mixed-%02d", i)
			defer func() {
				if p := recover(); p != nil && i%3 != 2 {
					t.Errorf("%s: unexpected panic %v", k, p)
				}
			}()
			err := o.Update(ctx, func(tx *outbox.Tx) error {
				if err := writeAndEnqueue(tx, k); err != nil {
					return err
				}
				switch i % 3 {
				case 1:
					return errTest
				case 2:
					panic(k)
				}
				return nil
			})
			if want := map[int]error{0: nil, 1: errTest}[i%3]; err != want {
				t.Errorf("%s: Update returned %v, want %v", k, err, want)
			}
		})
	}
	wg.Wait()
	for i := range n {
		k := fmt.Sprintf("mixed-%02d", i)
		w, e := visible(t, o, k)
		if good := i%3 == 0; w != good || e != good {
			t.Errorf("%s: write stored %v, event stored %v, want both %v", k, w, e, good)
		}
	}
	if st := o.Stats(); st.Pending != (n+2)/3 {
		t.Errorf("pending: %d, want %d", st.Pending, (n+2)/3)
	}
}

// Must show 4: the outbox's own buckets are not the application's, and a
// stopped or read-only outbox takes no Update.
func TestUpdateReservedAndClosed(t *testing.T) {
	o, path := open(t, testConfig(nopSink))
	ctx := context.Background()
	for _, name := range []string{"events", "changelog", "meta", "tombstones", "attempts"} {
		err := o.Update(ctx, func(tx *outbox.Tx) error {
			if err := writeAndEnqueue(tx, "r-"+name); err != nil {
				return err
			}
			if b := tx.Bucket([]byte(name)); b != nil {
				t.Errorf("Bucket(%q) gave the outbox's bucket", name)
			}
			return nil // ignoring it does not help: the Update fails
		})
		if !errors.Is(err, outbox.ErrReservedBucket) {
			t.Errorf("Bucket(%q): Update returned %v, want ErrReservedBucket", name, err)
		}
		if w, e := visible(t, o, "r-"+name); w || e {
			t.Errorf("Bucket(%q): write stored %v, event stored %v", name, w, e)
		}
		err = o.Update(ctx, func(tx *outbox.Tx) error {
			_, err := tx.CreateBucketIfNotExists([]byte(name))
			return err
		})
		if !errors.Is(err, outbox.ErrReservedBucket) {
			t.Errorf("CreateBucketIfNotExists(%q): %v, want ErrReservedBucket", name, err)
		}
		err = o.Update(ctx, func(tx *outbox.Tx) error { return tx.DeleteBucket([]byte(name)) })
		if !errors.Is(err, outbox.ErrReservedBucket) {
			t.Errorf("DeleteBucket(%q): %v, want ErrReservedBucket", name, err)
		}
		err = o.View(ctx, func(tx *outbox.ViewTx) error { tx.Bucket([]byte(name)); return nil })
		if !errors.Is(err, outbox.ErrReservedBucket) {
			t.Errorf("View Bucket(%q): %v, want ErrReservedBucket", name, err)
		}
	}
	if err := o.Update(ctx, func(tx *outbox.Tx) error { return writeAndEnqueue(tx, "kept") }); err != nil {
		t.Fatal(err)
	}
	stop(t, o)
	err := o.Update(ctx, func(tx *outbox.Tx) error { return writeAndEnqueue(tx, "late") })
	if !errors.Is(err, outbox.ErrClosed) {
		t.Fatalf("Update after Stop: %v, want ErrClosed", err)
	}
	if err := o.View(ctx, func(*outbox.ViewTx) error { return nil }); !errors.Is(err, outbox.ErrClosed) {
		t.Fatalf("View after Stop: %v, want ErrClosed", err)
	}

	ro, err := outbox.Open(path, outbox.Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, ro)
	err = ro.Update(ctx, func(tx *outbox.Tx) error { return writeAndEnqueue(tx, "ro") })
	if !errors.Is(err, outbox.ErrReadOnly) {
		t.Fatalf("Update on a read-only outbox: %v, want ErrReadOnly", err)
	}
	if w, e := visible(t, ro, "kept"); !w || !e {
		t.Fatalf("read-only View of a committed Update: write %v, event %v", w, e)
	}
}

// Upsert in a transaction coalesces like Outbox.Upsert, and commits with the
// application's write.
func TestUpdateUpsert(t *testing.T) {
	o, _ := open(t, testConfig(nopSink))
	ctx := context.Background()
	for i := range 3 {
		err := o.Update(ctx, func(tx *outbox.Tx) error {
			b, err := tx.CreateBucketIfNotExists(appBucket)
			if err != nil {
				return err
			}
			if err := b.Put([]byte("state"), []byte(strconv.Itoa(i))); err != nil {
				return err
			}
			_, err = tx.Upsert("k", func(cur *outbox.Event) (outbox.Event, error) {
				return outbox.Event{Destination: "http://127.0.0.1:1/x", Payload: []byte(strconv.Itoa(i))}, nil
			})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	evs, _, err := o.List(ctx, outbox.ListOptions{State: outbox.StatePending})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || string(evs[0].Payload) != "2" {
		t.Fatalf("pending after 3 upserts: %+v, want one event with payload 2", evs)
	}
}

// The child process of TestUpdateKillRestart: Updates in a loop until it is
// killed, each writing the application's key k and enqueueing the event k.
const (
	txChildEnv     = "OUTBOX_TEST_TX_CHILD"
	txChildFromEnv = "OUTBOX_TEST_TX_FROM"
)

func runTxChild() int {
	from, _ := strconv.Atoi(os.Getenv(txChildFromEnv))
	o, err := outbox.Open(os.Getenv(childDBEnv), outbox.Config{Sink: nopSink}) // fsync on
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	var out sync.Mutex
	for w := range 4 {
		go func() {
			for i := from + w; ; i += 4 {
				k := fmt.Sprintf("k-%08d", i)
				err := o.Update(context.Background(), func(tx *outbox.Tx) error { return writeAndEnqueue(tx, k) })
				if err != nil {
					fmt.Fprintln(os.Stderr, "update:", err)
					os.Exit(3)
				}
				out.Lock()
				fmt.Printf("ok %s\n", k)
				out.Unlock()
			}
		}()
	}
	select {} // until killed
}

// Must show 2: a process doing Updates is SIGKILLed 20 times; after each
// restart every application write has its event and every event its write,
// and every Update that returned nil is there whole.
func TestUpdateKillRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	db := filepath.Join(t.TempDir(), "outbox.db")
	acked := map[string]bool{}
	const gens = 20
	for g := range gens {
		cmd := testkit.TestBinary(txChildEnv+"=1", childDBEnv+"="+db,
			txChildFromEnv+"="+strconv.Itoa(g*1_000_000))
		p, lines := testkit.StartLines(t, cmd)
		killAfter := 1 + (g*37)%200
		n := 0
		for line := range lines {
			if k, ok := strings.CutPrefix(line, "ok "); ok {
				acked[k] = true
				if n++; n == killAfter {
					if err := p.Kill(); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if n < killAfter {
			t.Fatalf("generation %d exited before it was killed: %v", g, p.Err())
		}
		_ = p.Err()

		o, err := outbox.Open(db, testConfig(nopSink))
		if err != nil {
			t.Fatalf("generation %d: reopen: %v", g, err)
		}
		writes := map[string]bool{}
		if err := o.View(context.Background(), func(tx *outbox.ViewTx) error {
			return tx.Bucket(appBucket).ForEach(func(k, v []byte) error {
				if string(v) != "v-"+string(k) {
					return fmt.Errorf("key %s holds %q", k, v)
				}
				writes[string(k)] = true
				return nil
			})
		}); err != nil {
			t.Fatal(err)
		}
		events := map[string]bool{}
		for after := ""; ; {
			page, next, err := o.List(context.Background(), outbox.ListOptions{After: after, Limit: outbox.MaxListLimit})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page {
				if string(e.Payload) != e.ID {
					t.Errorf("event %s has payload %q", e.ID, e.Payload)
				}
				events[e.ID] = true
			}
			if next == "" {
				break
			}
			after = next
		}
		stop(t, o)
		for k := range writes {
			if !events[k] {
				t.Errorf("generation %d: write %s has no event", g, k)
			}
		}
		for k := range events {
			if !writes[k] {
				t.Errorf("generation %d: event %s has no write", g, k)
			}
		}
		for k := range acked {
			if !writes[k] {
				t.Errorf("generation %d: Update of %s returned nil but its write is gone", g, k)
			}
		}
		if t.Failed() {
			return
		}
		t.Logf("generation %d: %d Updates acknowledged, %d stored", g, len(acked), len(writes))
	}
}

// The application's buckets are the file's too: Check reads their pages and
// calls the file healthy, Compact keeps them with everything in them, and the
// changelog carries the outbox's events only.
func TestUpdateAppBucketsSurviveCheckAndCompact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	o, err := outbox.Open(path, testConfig(nopSink))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 500
	for i := range n {
		err := o.Update(ctx, func(tx *outbox.Tx) error {
			if err := writeAndEnqueue(tx, fmt.Sprintf("k-%04d", i)); err != nil {
				return err
			}
			nested, err := tx.Bucket(appBucket).CreateBucketIfNotExists([]byte("nested"))
			if err != nil {
				return err
			}
			return nested.Put([]byte(strconv.Itoa(i)), []byte("x"))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	entries, err := o.Changelog().Entries(0, 10*n)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != n {
		t.Errorf("changelog: %d entries, want the %d enqueues", len(entries), n)
	}
	for _, e := range entries {
		if e.Op != outbox.OpEnqueue || !strings.HasPrefix(e.ID, "k-") {
			t.Errorf("changelog entry %+v is not one of the events", e)
		}
	}
	stop(t, o)

	checkHealthy := func(when string) {
		t.Helper()
		rep, err := outbox.Check(path, outbox.CheckOptions{})
		if err != nil {
			t.Fatalf("Check %s: %v", when, err)
		}
		found := false
		for _, b := range rep.Buckets {
			found = found || b.Name == string(appBucket) && !b.Damaged
		}
		if !found || len(rep.Problems) != 0 {
			t.Fatalf("Check %s: application bucket reported %v, problems %v", when, found, rep.Problems)
		}
	}
	checkHealthy("before Compact")
	if err := outbox.Compact(path); err != nil {
		t.Fatal(err)
	}
	checkHealthy("after Compact")

	o, err = outbox.Open(path, testConfig(nopSink))
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, o)
	if st := o.Stats(); st.Pending != n {
		t.Errorf("pending after Compact: %d, want %d", st.Pending, n)
	}
	keys, nestedKeys := 0, 0
	if err := o.View(ctx, func(tx *outbox.ViewTx) error {
		b := tx.Bucket(appBucket)
		nestedKeys = b.Bucket([]byte("nested")).Stats().KeyN
		return b.ForEach(func(k, v []byte) error {
			if v != nil {
				if string(v) != "v-"+string(k) {
					return fmt.Errorf("key %s holds %q", k, v)
				}
				keys++
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if keys != n || nestedKeys != n {
		t.Fatalf("after Compact: %d application keys and %d nested, want %d of each", keys, nestedKeys, n)
	}
}
