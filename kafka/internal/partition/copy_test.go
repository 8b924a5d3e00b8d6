package partition

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outboxd/outbox/outbox"
)

type nopSink struct{}

func (nopSink) Deliver(context.Context, *outbox.Delivery) outbox.Result {
	return outbox.Result{Action: outbox.ActionRetry}
}

// checkpointEnv returns an Env over a new directory, and writes partition
// 2's store there with one pending event, closed with a checkpoint at
// offset 40.
func checkpointEnv(t testing.TB) (*Env, checkpoint) {
	t.Helper()
	g := &Env{
		Files:       Files{Dir: t.TempDir(), Topic: "in", ChangelogTopic: "in-changelog"},
		StoreConfig: func(int) outbox.Config { return outbox.Config{Sink: nopSink{}, NoSync: true} },
	}
	o, err := outbox.Open(g.Files.Store(2), g.StoreConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Enqueue(context.Background(), outbox.Event{ID: "e1", Destination: "https://example.test/x", Payload: []byte("p")}); err != nil {
		t.Fatal(err)
	}
	cp := checkpoint{Topic: "in", ChangelogTopic: "in-changelog", Partition: 2, Offset: 40, LastLSN: o.Changelog().LastLSN()}
	if err := o.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := writeCheckpoint(g.Files.Checkpoint(2), cp); err != nil {
		t.Fatal(err)
	}
	return g, cp
}

// readEvent reads e1 through ReadCheckpointed, trying once, and returns
// whether it read, the offset and the event's error.
func readEvent(g *Env, p int) (read bool, offset int64, err error) {
	read = g.ReadCheckpointed(p, time.Now(), func(o *outbox.Outbox, off int64) {
		offset = off
		_, err = o.Get(context.Background(), "e1")
	})
	return read, offset, err
}

// A store closed with its checkpoint is read at the checkpoint's offset;
// one without a checkpoint that vouches for it is not read at all.
func TestReadCheckpointedReadsOnlyAStoreItsCheckpointVouchesFor(t *testing.T) {
	g, cp := checkpointEnv(t)
	if read, off, err := readEvent(g, 2); !read || off != 40 || err != nil {
		t.Fatalf("read %v at offset %d: %v, want the event at offset 40", read, off, err)
	}
	if read, _, _ := readEvent(g, 3); read {
		t.Error("partition 3, which has no store, was read")
	}

	cp.LastLSN++ // the store changed after its checkpoint
	if err := writeCheckpoint(g.Files.Checkpoint(2), cp); err != nil {
		t.Fatal(err)
	}
	if read, _, _ := readEvent(g, 2); read {
		t.Error("a store whose last LSN differs from its checkpoint's was read")
	}
	cp.LastLSN--
	cp.ChangelogTopic = "other"
	if err := writeCheckpoint(g.Files.Checkpoint(2), cp); err != nil {
		t.Fatal(err)
	}
	if read, _, _ := readEvent(g, 2); read {
		t.Error("a store checkpointed for another changelog topic was read")
	}
	if err := removeDurably(g.Files.Checkpoint(2)); err != nil {
		t.Fatal(err)
	}
	if read, _, _ := readEvent(g, 2); read {
		t.Error("a store without checkpoint was read")
	}
}

// While a task or standby has the store open, a read of its file reads
// nothing (it waits until its deadline only, for a holder closing it); while a read
// holds the file, an owner opening it waits for the read and then opens it.
func TestReadCheckpointedNeverReadsAStoreInUse(t *testing.T) {
	g, _ := checkpointEnv(t)
	o, err := outbox.Open(g.Files.Store(2), g.StoreConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	if read, _, _ := readEvent(g, 2); read {
		t.Error("the file of a store open for writing was read")
	}
	if err := o.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	var opened *outbox.Outbox
	var openErr error
	done := make(chan struct{})
	read := g.ReadCheckpointed(2, time.Now(), func(*outbox.Outbox, int64) {
		go func() {
			defer close(done)
			opened, openErr = outbox.Open(g.Files.Store(2), g.StoreConfig(2))
		}()
	})
	<-done
	if !read || openErr != nil {
		t.Fatalf("read %v; an owner opening the file during the read: %v", read, openErr)
	}
	if err := opened.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// retire waits for the reads under way, and no read starts after it: a
// read never sees a store its holder closes.
func TestReadableRetireWaitsForReads(t *testing.T) {
	g, _ := checkpointEnv(t)
	o, err := outbox.Open(g.Files.Store(2), g.StoreConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	var r readable
	r.publish(o, func() int64 { return 7 })
	started, release := make(chan struct{}), make(chan struct{})
	var readDone atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		r.read(time.Now(), func(o *outbox.Outbox, off int64) {
			close(started)
			<-release
			if _, err := o.Get(context.Background(), "e1"); err != nil || off != 7 {
				t.Errorf("read at offset %d: %v", off, err)
			}
			readDone.Store(true)
		})
	})
	<-started
	retired, stopped := make(chan bool), make(chan struct{})
	go func() {
		defer close(stopped)
		r.retire()
		retired <- readDone.Load()
		_ = o.Stop(context.Background())
	}()
	close(release)
	if !<-retired {
		t.Error("retire returned before the read under way ended")
	}
	wg.Wait()
	<-stopped
	if r.read(time.Now(), func(*outbox.Outbox, int64) { t.Error("a retired store was read") }) {
		t.Error("read reported a retired store")
	}
	if _, err := o.Get(context.Background(), "e1"); !errors.Is(err, outbox.ErrClosed) {
		t.Errorf("the holder's store after retire and stop: %v, want ErrClosed", err)
	}
}

// A read of a copy whose holder is about to publish its store (it opens
// the file, or reopens it to hand it over) waits for the store and reads
// it, rather than finding nothing; it waits no longer than its deadline,
// and not at all once the holder gives up.
func TestReadableReadWaitsForAnExpectedStore(t *testing.T) {
	g, _ := checkpointEnv(t)
	o, err := outbox.Open(g.Files.Store(2), g.StoreConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Stop(context.Background())
	synctest.Test(t, func(t *testing.T) {
		var r readable
		r.expect()
		var got *outbox.Outbox
		done := make(chan bool)
		go func() { done <- r.read(time.Now().Add(time.Hour), func(o *outbox.Outbox, _ int64) { got = o }) }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("the read returned before the expected store was published")
		default:
		}
		r.publish(o, func() int64 { return 40 })
		if !<-done || got != o {
			t.Fatal("the read did not read the store published while it waited")
		}

		r.retire()
		r.expect()
		go func() { done <- r.read(time.Now().Add(time.Hour), func(*outbox.Outbox, int64) {}) }()
		synctest.Wait()
		r.retire() // the holder gives up: no store comes
		if <-done {
			t.Error("a read reported a store after its holder gave up")
		}

		r.expect()
		start := time.Now()
		if r.read(start.Add(time.Second), func(*outbox.Outbox, int64) {}) {
			t.Error("a read reported a store that was never published")
		}
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("a read waited %s for a store never published; want its deadline, 1s", waited)
		}
		r.retire()
	})
}

// BenchmarkCopyRead measures one read of an event from a copy: from a
// store its holder published, and from a store closed with its checkpoint
// (opened read-only for the read). Compare the two in the same run.
func BenchmarkCopyRead(b *testing.B) {
	for _, how := range []string{"published", "checkpointed"} {
		b.Run(how, func(b *testing.B) {
			g, _ := checkpointEnv(b)
			var r readable
			if how == "published" {
				o, err := outbox.Open(g.Files.Store(2), g.StoreConfig(2))
				if err != nil {
					b.Fatal(err)
				}
				defer o.Stop(context.Background())
				r.publish(o, func() int64 { return 40 })
			}
			read := func(fn ReadFunc) bool {
				if how == "published" {
					return r.read(time.Now(), fn)
				}
				return g.ReadCheckpointed(2, time.Now(), fn)
			}
			for b.Loop() {
				var err error
				if !read(func(o *outbox.Outbox, _ int64) { _, err = o.Get(context.Background(), "e1") }) || err != nil {
					b.Fatalf("no read: %v", err)
				}
			}
		})
	}
}
