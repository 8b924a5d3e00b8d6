package store

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// deliver applies a delete outcome to each pending record id.
func deliver(t testing.TB, s *Store, ids ...string) {
	t.Helper()
	outs := make([]Outcome, 0, len(ids))
	for _, id := range ids {
		r, _, err := s.Get(id)
		if err != nil {
			t.Fatalf("Get %q: %v", id, err)
		}
		outs = append(outs, Outcome{Kind: OutcomeDelete, ID: id, Version: r.Version, Attempts: 1, Deliveries: 1, LastStatus: 200})
	}
	res, err := s.Apply(ctxT(t), outs, nil)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	for i, r := range res {
		if r != Applied {
			t.Fatalf("outcome %d: %v", i, r)
		}
	}
}

// archivedRec is a record of topic on endpoint with key.
func archivedRec(id, topic, endpoint, key string) *Record {
	r := rec(id, "payload of "+id)
	r.Topic, r.Endpoint, r.Key = topic, endpoint, key
	return r
}

// searchAll pages through q and returns the IDs found.
func searchAll(t testing.TB, s *Store, q ArchiveQuery) []string {
	t.Helper()
	var ids []string
	for range 10_000 {
		page, err := s.SearchArchive(q)
		if err != nil {
			t.Fatalf("SearchArchive(%+v): %v", q, err)
		}
		for _, a := range page.Records {
			ids = append(ids, a.ID)
		}
		if page.Next == "" {
			return ids
		}
		q.After = page.Next
	}
	t.Fatalf("SearchArchive(%+v) never ended", q)
	return nil
}

func TestDeliveredRecordMovesToArchive(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Archive: true, Now: clk.Now, NoSync: true})
	mustInsert(t, s, archivedRec("a", "order.created", "billing", "cust-1"), rec("b", "x"))
	deliver(t, s, "a")
	if _, state, err := s.Get("a"); err != nil || state != StateDelivered {
		t.Fatalf("Get after delivery: %v %v, want delivered (its tombstone)", state, err)
	}
	if st := mustInsert(t, s, archivedRec("a", "order.created", "billing", "cust-1")); st[0] != Duplicate {
		t.Fatalf("re-enqueue of an archived ID: %v, want duplicate", st[0])
	}
	due, err := s.Due(DueQuery{Now: clk.Now().Add(time.Hour), Limit: 10})
	if err != nil || len(due) != 1 || due[0].ID != "b" {
		t.Fatalf("Due after delivery: %v %v, want only b", due, err)
	}
	page, err := s.SearchArchive(ArchiveQuery{})
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("SearchArchive: %+v %v", page, err)
	}
	a := page.Records[0]
	if a.ID != "a" || a.Topic != "order.created" || a.Key != "cust-1" || string(a.Payload) != "payload of a" ||
		!a.DeliveredAt.Equal(clk.Now()) || a.LastStatus != 200 || a.Attempts != 1 {
		t.Fatalf("archived = %+v", a)
	}
	st, _ := s.Stats()
	if st.Archived != 1 || st.ArchiveBytes == 0 || st.Pending != 1 {
		t.Fatalf("Stats = %+v", st)
	}
}

func TestNoArchiveWithoutTheOption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	s := openAt(t, path, Options{})
	mustInsert(t, s, rec("a", "x"))
	deliver(t, s, "a")
	page, err := s.SearchArchive(ArchiveQuery{})
	if err != nil || len(page.Records) != 0 {
		t.Fatalf("SearchArchive without an archive: %+v %v", page, err)
	}
	if n, err := s.TrimArchive(ctxT(t), time.Now(), 1); n != 0 || err != nil {
		t.Fatalf("TrimArchive without an archive: %d %v", n, err)
	}
	if st, _ := s.Stats(); st.Archived != 0 {
		t.Fatalf("Stats = %+v", st)
	}
}

func TestArchiveRefusesAnApplicationBucket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AppUpdate(ctxT(t), func(tx *AppTx) error {
		_, err := tx.CreateBucketIfNotExists([]byte("archive_by_key"))
		return err
	}); !errors.Is(err, ErrReservedBucket) {
		t.Fatalf("an application bucket named like the archive's: %v", err)
	}
	_ = s.Close()
	s = openAt(t, path, Options{Archive: true})
	_ = s.Close()
	if s, err = Open(path, Options{}); err != nil {
		t.Fatalf("reopen without the archive: %v", err)
	}
	_ = s.Close()
}

// fillArchive delivers n records at one a second: topics order.created,
// order.paid and invoice.sent in turn, endpoints a and b in turn, keys
// cust-<i%10>.
func fillArchive(t testing.TB, s *Store, clk interface{ Advance(time.Duration) }, n int) {
	t.Helper()
	topics := []string{"order.created", "order.paid", "invoice.sent"}
	for i := range n {
		id := fmt.Sprintf("ev-%05d", i)
		mustInsert(t, s, archivedRec(id, topics[i%3], []string{"a", "b"}[i%2], fmt.Sprintf("cust-%d", i%10)))
		deliver(t, s, id)
		clk.Advance(time.Second)
	}
}

func TestSearchArchivePagesThroughEachIndex(t *testing.T) {
	clk := newClock()
	start := clk.Now()
	s := openTest(t, Options{Archive: true, Now: clk.Now, NoSync: true})
	fillArchive(t, s, clk, 300)
	want := func(keep func(i int) bool) []string {
		var ids []string
		for i := range 300 {
			if keep(i) {
				ids = append(ids, fmt.Sprintf("ev-%05d", i))
			}
		}
		return ids
	}
	at := func(i int) time.Time { return start.Add(time.Duration(i) * time.Second) }
	for _, c := range []struct {
		name string
		q    ArchiveQuery
		keep func(i int) bool
	}{
		{"all", ArchiveQuery{Limit: 7}, func(int) bool { return true }},
		{"time", ArchiveQuery{From: at(50), To: at(60), Limit: 3}, func(i int) bool { return i >= 50 && i < 60 }},
		{"topic", ArchiveQuery{Topic: "order.paid", From: at(100), Limit: 9}, func(i int) bool { return i%3 == 1 && i >= 100 }},
		{"endpoint", ArchiveQuery{Endpoint: "b", To: at(21), Limit: 4}, func(i int) bool { return i%2 == 1 && i < 21 }},
		{"endpoint and topic", ArchiveQuery{Endpoint: "b", Topic: "invoice.sent", Limit: 4}, func(i int) bool { return i%2 == 1 && i%3 == 2 }},
	} {
		if got, w := searchAll(t, s, c.q), want(c.keep); !equalIDs(got, w) {
			t.Errorf("%s: found %d %v, want %d %v", c.name, len(got), got, len(w), w)
		}
	}
	// A prefix range comes field by field: check the set, not the order.
	for _, c := range []struct {
		name string
		q    ArchiveQuery
		keep func(i int) bool
	}{
		{"topic prefix", ArchiveQuery{TopicPrefix: "order.", From: at(90), To: at(200), Limit: 11}, func(i int) bool { return i%3 != 2 && i >= 90 && i < 200 }},
		{"key prefix", ArchiveQuery{KeyPrefix: "cust-3", Limit: 5}, func(i int) bool { return i%10 == 3 }},
		{"key prefix and time", ArchiveQuery{KeyPrefix: "cust-", From: at(295), Limit: 2}, func(i int) bool { return i >= 295 }},
	} {
		got, w := searchAll(t, s, c.q), want(c.keep)
		if !sameSet(got, w) {
			t.Errorf("%s: found %d %v, want %d %v", c.name, len(got), got, len(w), w)
		}
	}
}

func equalIDs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameSet(a, b []string) bool {
	seen := map[string]int{}
	for _, id := range a {
		seen[id]++
	}
	for _, id := range b {
		seen[id]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return len(a) == len(b)
}

func TestSearchArchiveReadsOnlyThePageAsked(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Archive: true, Now: clk.Now, NoSync: true})
	fillArchive(t, s, clk, 200)
	page, err := s.SearchArchive(ArchiveQuery{KeyPrefix: "cust-7", Limit: 5})
	if err != nil || len(page.Records) != 5 || page.Next == "" {
		t.Fatalf("page = %+v, %v", page, err)
	}
	// Five index entries and their five records.
	if page.Read != 10 {
		t.Fatalf("a page of 5 read %d keys", page.Read)
	}
	// A filter the index does not decide ends a page at MaxRead.
	page, err = s.SearchArchive(ArchiveQuery{KeyPrefix: "cust-", Topic: "no.such", MaxRead: 40})
	if err != nil || len(page.Records) != 0 || page.Next == "" || page.Read > 41 {
		t.Fatalf("bounded page = %d records, next %q, read %d, %v", len(page.Records), page.Next, page.Read, err)
	}
}

func TestSearchArchiveRefusesBadCursors(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Archive: true, Now: clk.Now, NoSync: true})
	fillArchive(t, s, clk, 10)
	page, err := s.SearchArchive(ArchiveQuery{Endpoint: "a", Limit: 1})
	if err != nil || page.Next == "" {
		t.Fatal(page, err)
	}
	for _, bad := range []ArchiveQuery{
		{After: "not a cursor!"},
		{After: "AQ"},
		{After: page.Next},                // an endpoint cursor for a time search
		{Endpoint: "b", After: page.Next}, // another endpoint's run
	} {
		if _, err := s.SearchArchive(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("SearchArchive(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestTrimArchiveByAgeAndSize(t *testing.T) {
	clk := newClock()
	start := clk.Now()
	s := openTest(t, Options{Archive: true, Now: clk.Now, NoSync: true})
	fillArchive(t, s, clk, 2500)
	n, err := s.TrimArchive(ctxT(t), start.Add(1200*time.Second), 0)
	if err != nil || n != 1200 {
		t.Fatalf("trim by age: %d, %v", n, err)
	}
	ids := searchAll(t, s, ArchiveQuery{Limit: 1000})
	if len(ids) != 1300 || ids[0] != "ev-01200" {
		t.Fatalf("after the age trim: %d left, first %v", len(ids), ids[:1])
	}
	// The indexes lost the entries of the trimmed records too.
	if got := searchAll(t, s, ArchiveQuery{KeyPrefix: "cust-", Limit: 1000}); len(got) != 1300 {
		t.Fatalf("key index after the trim: %d entries", len(got))
	}
	st, _ := s.Stats()
	per := st.ArchiveBytes / int64(st.Archived)
	n, err = s.TrimArchive(ctxT(t), time.Time{}, 100*per)
	if err != nil || n < 1190 || n > 1210 {
		t.Fatalf("trim by size to about 100 records: removed %d, %v", n, err)
	}
	st, _ = s.Stats()
	if st.ArchiveBytes > 100*per+per || st.Archived != 1300-n {
		t.Fatalf("after the size trim: %+v", st)
	}
	if ids := searchAll(t, s, ArchiveQuery{Limit: 1000}); ids[len(ids)-1] != "ev-02499" {
		t.Fatalf("the size trim removed the newest: last is %v", ids[len(ids)-1])
	}
}

func TestIndexKeysSplit(t *testing.T) {
	ak := archiveKey(nil, time.Unix(5, 0), "id\x00x")
	for _, f := range []string{"plain", "a\x00b", "\x00", "z\x00\x01"} {
		k := append(appendEscaped(nil, f), fieldEnd...)
		k = append(k, ak...)
		n, got, ok := splitIndexKey(k)
		if !ok || !bytes.Equal(got, ak) || n != len(appendEscaped(nil, f)) {
			t.Errorf("splitIndexKey(%q) = %d %x %v", f, n, got, ok)
		}
	}
	// Escaped fields keep their order, and a prefix stays a prefix.
	a, b := appendEscaped(nil, "a\x00"), appendEscaped(nil, "a\x00b")
	if !bytes.HasPrefix(b, a) || bytes.Compare(append(appendEscaped(nil, "a"), fieldEnd...), a) >= 0 {
		t.Fatalf("escaping breaks the order: %x %x", a, b)
	}
}

// FuzzDecodeCursor feeds SearchArchive's cursor decoder arbitrary text: it
// returns a cursor whose key splits as its index says, or ErrInvalid.
func FuzzDecodeCursor(f *testing.F) {
	ak := archiveKey(nil, time.Unix(7, 0), "ev-1")
	f.Add(encodeCursor(indexTime, ak))
	f.Add(encodeCursor(indexEndpoint, append(append(appendEscaped(nil, "a\x00"), fieldEnd...), ak...)))
	f.Add(encodeCursor('x', ak))
	f.Add("")
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, s string) {
		index, k, err := decodeCursor(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if index == indexTime {
			if _, _, ok := splitArchiveKey(k); !ok {
				t.Fatalf("accepted a time cursor %x", k)
			}
		} else if _, _, ok := splitIndexKey(k); !ok {
			t.Fatalf("accepted an index cursor %x", k)
		}
		if encodeCursor(index, k) != s {
			t.Fatalf("cursor %q does not encode back", s)
		}
	})
}

// FuzzDecodeArchived feeds the decoder of archived records arbitrary keys
// and values: a record comes back only under its own ID.
func FuzzDecodeArchived(f *testing.F) {
	r := archivedRec("ev-1", "order.created", "a", "k")
	f.Add(archiveKey(nil, time.Unix(7, 0), "ev-1"), EncodeRecord(r))
	f.Add([]byte{1, 2}, []byte{})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		a, err := decodeArchived(k, v)
		if err != nil {
			return
		}
		if _, id, _ := splitArchiveKey(k); a.ID != string(id) {
			t.Fatalf("record %q under key %x", a.ID, k)
		}
	})
}

func TestRequeueArchivedRecord(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Archive: true, Now: clk.Now, NoSync: true})
	mustInsert(t, s, archivedRec("a", "order.paid", "billing", "k"), archivedRec("b", "order.paid", "billing", "k"))
	deliver(t, s, "a")
	page, err := s.SearchArchive(ArchiveQuery{})
	if err != nil || len(page.Records) != 1 {
		t.Fatal(page, err)
	}
	a := page.Records[0].Record
	other := a
	other.ID, other.Endpoint, other.Destination = "a-to-crm", "crm", "crm"
	pendingB, _, _ := s.Get("b")
	clk.Advance(time.Minute)
	if stored, err := s.Requeue(ctxT(t), []*Record{&a}, clk.Now(), RequeueOptions{SkipDelivered: true}); err != nil || stored[0] {
		t.Fatalf("a backfill queued a delivered record again: %v %v", stored, err)
	}
	stored, err := s.Requeue(ctxT(t), []*Record{&a, &other, pendingB}, clk.Now(), RequeueOptions{})
	if err != nil || !stored[0] || !stored[1] || stored[2] {
		t.Fatalf("Requeue = %v, %v; want the archived two stored and the pending one skipped", stored, err)
	}
	r, state, err := s.Get("a")
	if err != nil || state != StatePending || r.Attempts != 0 || !r.NextAttemptAt.Equal(clk.Now()) || r.Endpoint != "billing" {
		t.Fatalf("replayed a: %+v %v %v", r, state, err)
	}
	if stored, _ := s.Requeue(ctxT(t), []*Record{&a}, clk.Now(), RequeueOptions{}); stored[0] {
		t.Fatal("a pending delivery was queued twice")
	}
	// Delivered again, it is archived again: the archive keeps both deliveries.
	deliver(t, s, "a")
	if ids := searchAll(t, s, ArchiveQuery{Endpoint: "billing"}); len(ids) != 2 || ids[0] != "a" || ids[1] != "a" {
		t.Fatalf("billing's archive: %v", ids)
	}
}
