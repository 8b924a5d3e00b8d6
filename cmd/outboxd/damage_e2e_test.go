package main

import (
	binenc "encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// eventLeaves returns the page size of the database file and the leaf
// pages of its events bucket in key order, read from bbolt's page layout: a
// 16-byte page header (id, flags, element count, overflow) and, on branch
// pages, 16-byte elements that end with the child's page id.
func eventLeaves(t *testing.T, path string) (pageSize int, leaves []uint64) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	_ = db.View(func(tx *bolt.Tx) error { root = uint64(tx.Bucket([]byte("events")).Root()); return nil })
	pageSize = db.Info().PageSize
	db.Close()
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binenc.LittleEndian
	var walk func(id uint64)
	walk = func(id uint64) {
		p := img[int(id)*pageSize:]
		if le.Uint16(p[8:]) == 0x02 { // a leaf
			leaves = append(leaves, id)
			return
		}
		for i := range int(le.Uint16(p[10:])) {
			walk(le.Uint64(p[16+i*16+8:]))
		}
	}
	walk(root)
	return pageSize, leaves
}

// middleValue returns the offset in leaf page id of the middle of the value
// of its middle element (leaf elements: flags, position from the element,
// key size, value size; 4 bytes each).
func middleValue(t *testing.T, path string, pageSize int, id uint64) int {
	t.Helper()
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binenc.LittleEndian
	p := img[int(id)*pageSize:]
	i := int(le.Uint16(p[10:])) / 2
	e := p[16+i*16:]
	pos, ksize, vsize := int(le.Uint32(e[4:])), int(le.Uint32(e[8:])), int(le.Uint32(e[12:]))
	if vsize < 64 {
		t.Fatalf("page %d: element %d has a %d-byte value; want a record", id, i, vsize)
	}
	return 16 + i*16 + pos + ksize + vsize/2 - 16
}

// damageLines counts the lines of a server log that report damage.
func damageLines(log string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "corrupt") || strings.Contains(line, "damaged") {
			n++
		}
	}
	return n
}

// 32 bytes overwritten in a live leaf of the events bucket of a cleanly
// stopped server's file: check finds it and names the page, inspect says
// the file is damaged, and a server started on it either refuses to start
// naming the damage or, once it meets the damaged page, is not ready (with
// the reason), refuses new events with 503 instead of accepting what it
// cannot deliver, and does not flood its log.
func TestDamagedPageStopsServeFromAcceptingEvents(t *testing.T) {
	dir := t.TempDir()
	// 404 parks the events (no attempt spent): they stay pending and are
	// due again shortly, in the first run and in the second.
	rc := newReceiver(t, func(*http.Request, string) int { return http.StatusNotFound })
	args := []string{"--endpoint", rc.endpoint("orders"), "--interval", "100ms", "--park-interval", "100ms"}
	p := start(t, dir, args...)
	enqueueBatches(t, p, "evt", "orders", 3000, 500)
	p.signal(syscall.SIGTERM, 10*time.Second)
	if code := p.exitCode(); code != 0 {
		t.Fatalf("first run exited %d", code)
	}
	if code, out := run(t, dir, "check", "--db", "outboxd.db"); code != 0 || !strings.Contains(out, "ok: no problems found") {
		t.Fatalf("check of the healthy file: exit %d\n%s", code, out)
	}

	db := filepath.Join(dir, "outboxd.db")
	ps, leaves := eventLeaves(t, db)
	if len(leaves) < 5 {
		t.Fatalf("the events bucket has %d leaves; the test needs a middle one", len(leaves))
	}
	leaf := leaves[len(leaves)/2]
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 32)
	for i := range junk {
		junk[i] = byte(0xA5 + i)
	}
	_, err = f.WriteAt(junk, int64(leaf)*int64(ps)+int64(middleValue(t, db, ps, leaf)))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	code, out := run(t, dir, "check", "--db", "outboxd.db")
	if code != 1 || !strings.Contains(out, "DAMAGED") || !strings.Contains(out, fmt.Sprintf("events, page %d, ID \"evt-", leaf)) ||
		!strings.Contains(out, "what to do") {
		t.Fatalf("check of the damaged file: exit %d, want 1 naming page %d of events\n%s", code, leaf, out)
	}
	code, out = run(t, dir, "inspect", "--db", "outboxd.db", "--limit", "3000")
	if code != 1 || !strings.Contains(out, "outboxd.db is damaged") || !strings.Contains(out, "outboxd check --db outboxd.db") {
		t.Fatalf("inspect of the damaged file: exit %d\n%s", code, out)
	}

	began := time.Now()
	p = startNoWait(t, dir, args...)
	timer := time.NewTimer(20 * time.Second)
	defer timer.Stop()
	select {
	case p.addr = <-p.log.listening:
	case <-p.done:
		// Refusing to start is an answer, if it names the damage.
		if p.exitCode() == 0 || !strings.Contains(p.log.String(), "damaged") {
			t.Fatalf("serve on a damaged file exited %d without saying the file is damaged:\n%s", p.exitCode(), p.log)
		}
		return
	case <-timer.C:
		t.Fatalf("outboxd did not listen within 20s:\n%s", p.log)
	}
	var status string
	waitFor(t, 20*time.Second, "/readyz to say the file is damaged", func() bool {
		code, m := call(t, "GET", p.url("/readyz"), "", "")
		status, _ = m["status"].(string)
		return code == http.StatusServiceUnavailable && strings.Contains(status, "damaged")
	})
	if !strings.Contains(status, "outboxd check") {
		t.Errorf("/readyz says %q; want it to point at outboxd check", status)
	}
	code, m := call(t, "POST", p.url("/v1/events"), "", `{"destination":"orders","payload":{"after":"damage"}}`)
	if msg, _ := m["error"].(string); code != http.StatusServiceUnavailable || !strings.Contains(msg, "damaged") {
		t.Errorf("POST on a damaged store: %d %v, want 503 saying the file is damaged", code, m)
	}
	// Stay a while: still not ready, and the damage is not logged over and
	// over (the report this test comes from saw 20 lines a second).
	observe := time.NewTimer(3 * time.Second)
	defer observe.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for watching := true; watching; {
		select {
		case <-observe.C:
			watching = false
		case <-p.done:
			t.Fatalf("outboxd exited while not ready:\n%s", p.log)
		case <-tick.C:
			if code, _ := call(t, "GET", p.url("/readyz"), "", ""); code != http.StatusServiceUnavailable {
				t.Fatalf("/readyz went back to %d on a damaged file", code)
			}
		}
	}
	elapsed := time.Since(began)
	if n, limit := damageLines(p.log.String()), 3+int(elapsed.Seconds()); n > limit {
		t.Errorf("%d log lines about the damage in %s (at most %d expected)", n, elapsed.Round(time.Millisecond), limit)
	}
	p.signal(syscall.SIGTERM, 10*time.Second)
}
