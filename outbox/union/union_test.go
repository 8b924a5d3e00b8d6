package union_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/union"
)

func TestListPagesEveryStoreOnceInIDOrder(t *testing.T) {
	v, all, _ := newView(t, 3)
	// 60 pending events spread unevenly over the stores (runs of IDs in one
	// store, stores without events in a stretch), 12 dead ones.
	rng := rand.New(rand.NewPCG(1, 2))
	var want []string
	for _, id := range ids("ev", 0, 60) {
		put(t, all[rng.IntN(len(all))], false, id)
		want = append(want, id)
	}
	put(t, all[2], false, ids("zz", 0, 5)...) // a tail held by the last store only
	want = append(want, ids("zz", 0, 5)...)
	put(t, all[1], true, ids("dead", 0, 8)...)
	put(t, all[0], true, ids("dead", 8, 12)...)

	for _, limit := range []int{1, 2, 3, 7, 64, 100} {
		if got := listAll(t, v, outbox.ListOptions{Limit: limit}); !slices.Equal(got, want) {
			t.Errorf("pending with limit %d: got %v\nwant %v", limit, got, want)
		}
		if got := listAll(t, v, outbox.ListOptions{State: outbox.StateDead, Limit: limit}); !slices.Equal(got, ids("dead", 0, 12)) {
			t.Errorf("dead with limit %d: got %v", limit, got)
		}
	}
	// A cursor from the middle resumes there, in every store.
	evs, next, err := v.List(context.Background(), outbox.ListOptions{After: "ev-029", Limit: 3})
	if err != nil || len(evs) != 3 || evs[0].ID != "ev-030" || evs[2].ID != "ev-032" || next != "ev-032" {
		t.Errorf("List after ev-029: %v %q %v, want ev-030..ev-032 and next ev-032", evs, next, err)
	}
	// The last page says so.
	evs, next, err = v.List(context.Background(), outbox.ListOptions{After: "zz-002", Limit: 2})
	if err != nil || len(evs) != 2 || next != "" {
		t.Errorf("List of the last 2: %d events, next %q, %v; want 2 and no next", len(evs), next, err)
	}
	// The options reach every store.
	if _, _, err := v.List(context.Background(), outbox.ListOptions{State: outbox.StateDelivered}); !errors.Is(err, outbox.ErrInvalid) {
		t.Errorf("List of delivered events: %v, want ErrInvalid", err)
	}
}

func TestListFiltersByDestinationInEveryStore(t *testing.T) {
	v, all, _ := newView(t, 3)
	ctx := context.Background()
	var want []string
	for i, id := range ids("ev", 0, 30) {
		dest := "orders"
		if i%3 == 1 {
			dest = "billing"
			want = append(want, id)
		}
		if _, err := all[i%2+1].Enqueue(ctx, outbox.Event{ID: id, Destination: dest}); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{1, 4, 100} {
		if got := listAll(t, v, outbox.ListOptions{Destination: "billing", Limit: limit}); !slices.Equal(got, want) {
			t.Errorf("billing with limit %d: got %v, want %v", limit, got, want)
		}
	}
}

func TestListShowsAnIDHeldTwiceOnceFromThePrimary(t *testing.T) {
	v, all, _ := newView(t, 2)
	ctx := context.Background()
	for i, o := range all {
		if _, err := o.Enqueue(ctx, outbox.Event{ID: "same", Key: []string{"primary", "other"}[i], Destination: "orders"}); err != nil {
			t.Fatal(err)
		}
	}
	put(t, all[1], false, "after")
	for _, limit := range []int{1, 100} {
		var keys []string
		opt := outbox.ListOptions{Limit: limit}
		for {
			evs, next, err := v.List(ctx, opt)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				keys = append(keys, ev.ID+"/"+ev.Key)
			}
			if next == "" {
				break
			}
			opt.After = next
		}
		if want := []string{"after/k-after", "same/primary"}; !slices.Equal(keys, want) {
			t.Errorf("limit %d: listed %v, want %v", limit, keys, want)
		}
	}
	if ev, err := v.Get(ctx, "same"); err != nil || ev.Key != "primary" {
		t.Errorf("Get of an ID held twice: %+v %v, want the primary's", ev, err)
	}
}

func TestGetDeleteReplayReachTheStoreHoldingTheID(t *testing.T) {
	v, all, _ := newView(t, 3)
	ctx := context.Background()
	put(t, all[0], false, "p1")
	put(t, all[1], false, "a1")
	put(t, all[2], false, "b1")
	put(t, all[2], true, "b-dead")
	put(t, all[1], true, "a-dead")

	for id, want := range map[string]outbox.State{"p1": outbox.StatePending, "a1": outbox.StatePending, "b1": outbox.StatePending, "b-dead": outbox.StateDead} {
		ev, err := v.Get(ctx, id)
		if err != nil || ev.ID != id || ev.State != want || ev.Key != "k-"+id {
			t.Errorf("Get(%s): %+v %v, want it %v", id, ev, err, want)
		}
	}

	if err := v.Delete(ctx, "b1"); err != nil {
		t.Fatalf("Delete of an event in the last store: %v", err)
	}
	if ev, err := all[2].Get(ctx, "b1"); err != nil || ev.State != outbox.StateDeleted {
		t.Errorf("its store after Delete: %+v %v, want it deleted", ev, err)
	}
	if ev, err := v.Get(ctx, "b1"); err != nil || ev.State != outbox.StateDeleted {
		t.Errorf("Get after Delete: %+v %v, want the tombstone", ev, err)
	}

	if err := v.Replay(ctx, "b-dead"); err != nil {
		t.Fatalf("Replay of a dead event in the last store: %v", err)
	}
	if ev, err := all[2].Get(ctx, "b-dead"); err != nil || ev.State != outbox.StatePending {
		t.Errorf("its store after Replay: %+v %v, want it pending", ev, err)
	}
	if err := v.Replay(ctx, "a1"); !errors.Is(err, outbox.ErrNotDead) {
		t.Errorf("Replay of a pending event: %v, want ErrNotDead", err)
	}

	for name, err := range map[string]error{
		"Get":    func() error { _, err := v.Get(ctx, "nowhere"); return err }(),
		"Delete": v.Delete(ctx, "nowhere"),
		"Replay": v.Replay(ctx, "nowhere"),
	} {
		if !errors.Is(err, outbox.ErrNotFound) {
			t.Errorf("%s of an ID no store holds: %v, want ErrNotFound", name, err)
		}
	}

	n, err := v.ReplayDead(ctx, outbox.ReplayFilter{Rate: 1000})
	if err != nil || n != 1 {
		t.Errorf("ReplayDead: %d %v, want the one dead event left (a-dead)", n, err)
	}
	if ev, _ := all[1].Get(ctx, "a-dead"); ev.State != outbox.StatePending {
		t.Errorf("a-dead after ReplayDead: %v, want pending", ev.State)
	}
}

func TestReplayDeadLimitBoundsTheSum(t *testing.T) {
	v, all, _ := newView(t, 3)
	ctx := context.Background()
	put(t, all[0], true, ids("p", 0, 2)...)
	put(t, all[1], true, ids("a", 0, 2)...)
	put(t, all[2], true, ids("b", 0, 2)...)
	n, err := v.ReplayDead(ctx, outbox.ReplayFilter{Limit: 3, Rate: 1000})
	if err != nil || n != 3 {
		t.Fatalf("ReplayDead with limit 3: %d %v", n, err)
	}
	if s := v.Stats(); s.Dead != 3 || s.Pending != 3 {
		t.Errorf("after replaying 3 of 6: %d dead, %d pending; want 3 and 3", s.Dead, s.Pending)
	}
	n, err = v.ReplayDead(ctx, outbox.ReplayFilter{Rate: 1000})
	if err != nil || n != 3 {
		t.Errorf("ReplayDead of the rest: %d %v, want 3", n, err)
	}
	if _, err := v.ReplayDead(ctx, outbox.ReplayFilter{Rate: -1}); !errors.Is(err, outbox.ErrInvalid) {
		t.Errorf("ReplayDead with a negative rate: %v, want ErrInvalid", err)
	}
}

func TestClosedStoreIsSkipped(t *testing.T) {
	v, all, _ := newView(t, 3)
	ctx := context.Background()
	put(t, all[0], false, "p1")
	put(t, all[1], false, "a1")
	put(t, all[2], false, "b1", "b2")
	put(t, all[2], true, "b-dead")
	stop(t, all[1]) // handed over while the View still lists it

	if _, err := v.Get(ctx, "a1"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Get of an event in the closed store: %v, want ErrNotFound", err)
	}
	if ev, err := v.Get(ctx, "b1"); err != nil || ev.ID != "b1" {
		t.Errorf("Get past the closed store: %+v %v", ev, err)
	}
	if got := listAll(t, v, outbox.ListOptions{Limit: 1}); !slices.Equal(got, []string{"b1", "b2", "p1"}) {
		t.Errorf("List over a closed store: %v, want b1 b2 p1", got)
	}
	if err := v.Delete(ctx, "b2"); err != nil {
		t.Errorf("Delete past the closed store: %v", err)
	}
	if n, err := v.ReplayDead(ctx, outbox.ReplayFilter{Rate: 1000}); err != nil || n != 1 {
		t.Errorf("ReplayDead over a closed store: %d %v, want 1", n, err)
	}
	if _, err := v.Endpoints(ctx); err != nil {
		t.Errorf("Endpoints over a closed store: %v", err)
	}
	if s := v.Stats(); s.Pending != 3 {
		t.Errorf("Stats over a closed store: %d pending, want 3 (p1, b1, b-dead)", s.Pending)
	}

	// Once every store is closed, the View is too.
	stop(t, all[0])
	stop(t, all[2])
	if _, err := v.Get(ctx, "b1"); !errors.Is(err, outbox.ErrClosed) {
		t.Errorf("Get with every store closed: %v, want ErrClosed", err)
	}
	if _, _, err := v.List(ctx, outbox.ListOptions{}); !errors.Is(err, outbox.ErrClosed) {
		t.Errorf("List with every store closed: %v, want ErrClosed", err)
	}
	if _, err := v.ReplayDead(ctx, outbox.ReplayFilter{}); !errors.Is(err, outbox.ErrClosed) {
		t.Errorf("ReplayDead with every store closed: %v, want ErrClosed", err)
	}
	if _, err := v.Enqueue(ctx, outbox.Event{Destination: "orders"}); !errors.Is(err, outbox.ErrClosed) {
		t.Errorf("Enqueue with the primary closed: %v, want ErrClosed", err)
	}
}

func TestStoresComeAndGo(t *testing.T) {
	v, all, others := newView(t, 3)
	ctx := context.Background()
	put(t, all[1], false, "a1")
	put(t, all[2], false, "b1")
	others.set(all[2])
	if _, err := v.Get(ctx, "a1"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Get of an event in a store that left: %v, want ErrNotFound", err)
	}
	others.set(all[2], all[1], nil, all[0], all[2]) // nil, primary and repeats are left out
	if got := listAll(t, v, outbox.ListOptions{Limit: 1}); !slices.Equal(got, []string{"a1", "b1"}) {
		t.Errorf("List after a store came back: %v", got)
	}
	if s := v.Stats(); s.Pending != 2 {
		t.Errorf("Stats counts %d pending, want 2: a store listed twice counts once", s.Pending)
	}
	if got := listAll(t, union.New(all[0], nil), outbox.ListOptions{Limit: 10}); len(got) != 0 {
		t.Errorf("a View of the primary alone lists %v", got)
	}
}

func TestStatsSumTheStores(t *testing.T) {
	// Not started: nothing changes the counts in the background.
	all := []*outbox.Outbox{openStore(t, nil), openStore(t, nil), openStore(t, nil)}
	v := union.New(all[0], func() []*outbox.Outbox { return all[1:] })
	put(t, all[0], false, "p1")
	put(t, all[1], false, "a1", "a2")
	put(t, all[1], true, "a-dead")
	put(t, all[2], false, "b1", "b2", "b3")
	put(t, all[2], false, "b1") // a duplicate
	if err := all[2].Delete(context.Background(), "b3"); err != nil {
		t.Fatal(err)
	}

	s := v.Stats()
	var want outbox.Stats
	var commits outbox.CommitStats
	for _, o := range all {
		os := o.Stats()
		want.Pending += os.Pending
		want.Dead += os.Dead
		want.EnqueuedTotal += os.EnqueuedTotal
		want.DuplicatesTotal += os.DuplicatesTotal
		want.Tombstones += os.Tombstones
		want.ChangelogEntries += os.ChangelogEntries
		want.FileSize += os.FileSize
		cs := o.CommitStats()
		commits.Commits += cs.Commits
		commits.Calls += cs.Calls
		commits.Records += cs.Records
	}
	if s.Pending != 5 || s.Dead != 1 || s.DuplicatesTotal != 1 || s.Tombstones != 1 {
		t.Errorf("Stats %+v: want 5 pending, 1 dead, 1 duplicate, 1 tombstone", s)
	}
	if s.Pending != want.Pending || s.Dead != want.Dead || s.EnqueuedTotal != want.EnqueuedTotal ||
		s.DuplicatesTotal != want.DuplicatesTotal || s.Tombstones != want.Tombstones ||
		s.ChangelogEntries != want.ChangelogEntries || s.FileSize != want.FileSize {
		t.Errorf("Stats %+v, want the sums %+v", s, want)
	}
	if p := all[0].Stats(); s.LastLSN != p.LastLSN || s.ShippedLSN != p.ShippedLSN {
		t.Errorf("LSNs %d/%d, want the primary's %d/%d", s.LastLSN, s.ShippedLSN, p.LastLSN, p.ShippedLSN)
	}
	if !s.KeyIndex {
		t.Error("KeyIndex false, but every store keeps its key index")
	}
	if s.OldestPendingAge <= 0 {
		t.Errorf("OldestPendingAge %v, want the oldest store's", s.OldestPendingAge)
	}
	cs := v.CommitStats()
	if cs.Commits != commits.Commits || cs.Calls != commits.Calls || cs.Records != commits.Records || cs.Commits < 3 {
		t.Errorf("CommitStats %+v, want the sums %+v", cs, commits)
	}
	if s.Commits.Commits != cs.Commits {
		t.Errorf("Stats.Commits %+v, want CommitStats %+v", s.Commits, cs)
	}
	if err := v.Health(); err != nil {
		t.Errorf("Health of healthy stores: %v", err)
	}
}

func TestEndpointsMergeAndEnableReachesEveryStore(t *testing.T) {
	ctx := context.Background()
	retrying, disabling, throttling := newSink(), newSink(), newSink()
	disabling.set(func(*outbox.Delivery) outbox.Result {
		return outbox.Result{Action: outbox.ActionDisable, Status: 410, Body: "gone"}
	})
	throttling.set(func(*outbox.Delivery) outbox.Result {
		return outbox.Result{Action: outbox.ActionThrottle, Status: 429, RetryAfter: 30 * time.Minute}
	})
	all := []*outbox.Outbox{openStore(t, retrying), openStore(t, disabling), openStore(t, throttling)}
	v := union.New(all[0], func() []*outbox.Outbox { return all[1:] })
	put(t, all[0], false, "p1", "p2") // two failures: the longest streak
	put(t, all[1], false, "a1")
	put(t, all[2], false, "b1")
	endpoint := func(o *outbox.Outbox) outbox.EndpointState {
		eps, err := o.Endpoints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range eps {
			if e.Name == "orders" {
				return e
			}
		}
		return outbox.EndpointState{}
	}
	testkit.WaitFor(t, settle, "the endpoint states", func() bool {
		return endpoint(all[0]).FailureStreak == 2 && endpoint(all[1]).Disabled && endpoint(all[2]).FailureStreak == 1
	})
	want := outbox.EndpointState{
		Name:           "orders",
		Disabled:       true,
		DisabledReason: endpoint(all[1]).DisabledReason,
		DisabledAt:     endpoint(all[1]).DisabledAt,
		ThrottledUntil: endpoint(all[2]).ThrottledUntil,
		FailureStreak:  3,
		LastStatus:     503,
	}
	for _, o := range all {
		// Each store delivers on its own: the limits add up and the
		// slowest store's latencies stand for all.
		e := endpoint(o)
		want.InFlightLimit += e.InFlightLimit
		want.LatencyP50, want.LatencyP99 = max(want.LatencyP50, e.LatencyP50), max(want.LatencyP99, e.LatencyP99)
	}
	eps, err := v.Endpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) == 1 {
		// The rate of deliveries started is the stores' sum, and decays
		// while the test looks: only that it is there is checked.
		if eps[0].Rate <= 0 {
			t.Errorf("Rate %v, want the recent rate of the stores' attempts", eps[0].Rate)
		}
		eps[0].Rate = 0
	}
	if len(eps) != 1 || eps[0] != want {
		t.Fatalf("Endpoints %+v, want %+v", eps, want)
	}
	if want.DisabledReason == "" || want.ThrottledUntil.Before(time.Now().Add(20*time.Minute)) {
		t.Fatalf("the stores' states are not what the test needs: %+v", want)
	}
	if s := v.Stats(); s.EndpointsDisabled != 1 || s.EndpointsThrottled != 1 {
		t.Errorf("Stats: %d disabled, %d throttled, want 1 and 1", s.EndpointsDisabled, s.EndpointsThrottled)
	}

	// Enabling reaches every store: the disabled one delivers again, the
	// throttled one at once instead of in half an hour.
	for _, s := range []*sink{retrying, disabling, throttling} {
		s.set(func(*outbox.Delivery) outbox.Result { return outbox.Result{Action: outbox.ActionSuccess, Status: 204} })
	}
	if err := v.EnableEndpoint(ctx, "orders"); err != nil {
		t.Fatalf("EnableEndpoint: %v", err)
	}
	testkit.WaitFor(t, settle, "every event delivered after EnableEndpoint", func() bool {
		for _, id := range []string{"a1", "b1"} {
			if ev, err := v.Get(ctx, id); err != nil || ev.State != outbox.StateDelivered {
				return false
			}
		}
		return true
	})
	eps, err = v.Endpoints(ctx)
	if err != nil || len(eps) != 1 || eps[0].Disabled || eps[0].ThrottledUntil.After(time.Now()) {
		t.Errorf("Endpoints after enabling: %+v %v", eps, err)
	}
	if err := v.EnableEndpoint(ctx, "nowhere"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("EnableEndpoint of an endpoint no store knows: %v, want ErrNotFound", err)
	}
}

// A store stops a filtered List after scanning some 10,000 events that do
// not match and answers with a cursor: the merged page must not go past it,
// or the next page would miss what that store holds just after it.
func TestListDoesNotSkipPastAStoreThatStoppedScanning(t *testing.T) {
	ctx := context.Background()
	primary, partition := openStore(t, nil), openStore(t, nil) // not started: nothing is delivered
	v := union.New(primary, func() []*outbox.Outbox { return []*outbox.Outbox{partition} })
	const filler = 10_050 // more than the store scans for one page of 1
	batch := make([]outbox.Event, 0, 1000)
	for i := range filler {
		batch = append(batch, outbox.Event{ID: fmt.Sprintf("m-%05d", i), Destination: "orders"})
		if len(batch) == cap(batch) || i == filler-1 {
			if _, err := partition.Enqueue(ctx, batch...); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	for o, id := range map[*outbox.Outbox]string{partition: "m-99999", primary: "n-1"} {
		if _, err := o.Enqueue(ctx, outbox.Event{ID: id, Destination: "billing"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := listAll(t, v, outbox.ListOptions{Destination: "billing", Limit: 1}); !slices.Equal(got, []string{"m-99999", "n-1"}) {
		t.Errorf("billing events, one a page: %v, want m-99999 n-1", got)
	}
}
