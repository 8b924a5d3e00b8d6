package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/store"
)

// runCLI runs the command line args and returns its exit code, stdout and
// stderr.
func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = Main(Env{Args: args, Getenv: func(string) (string, bool) { return "", false }, Stdout: &out, Stderr: &errOut, Exit: func(int) {}})
	return code, out.String(), errOut.String()
}

// storeWith returns the path of a closed database file holding n pending
// events.
func storeWith(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outboxd.db")
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]*store.Record, n)
	for i := range recs {
		recs[i] = &store.Record{ID: fmt.Sprintf("evt-%05d", i), Destination: "orders", Method: "POST",
			Payload: []byte(strings.Repeat("p", 300)), CreatedAt: time.Now()}
	}
	if _, err := st.Insert(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckHealthyFileExitsZero(t *testing.T) {
	path := storeWith(t, 500)
	code, out, errOut := runCLI("check", "--db", path)
	if code != exitOK || !strings.Contains(out, "ok: no problems found") || !strings.Contains(out, "events") {
		t.Fatalf("check: %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI("check", "--db", path, "--json")
	var v struct {
		OK       bool `json:"ok"`
		Buckets  []struct{ Name string }
		Problems []any `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != exitOK || !v.OK || len(v.Buckets) != 12 || len(v.Problems) != 0 {
		t.Fatalf("check --json: %d %v\n%s", code, err, out)
	}
}

// A middle leaf of the events bucket with 32 bytes overwritten: the check
// exits 1 and says what is damaged, where, and what to do.
func TestCheckDamagedFileSaysWhatAndWhere(t *testing.T) {
	path := storeWith(t, 3000)
	ps, leaves := testkit.LeafPages(t, path, "events")
	leaf := leaves[len(leaves)/2]
	testkit.Overwrite(t, path, ps, leaf, ps/2, testkit.Junk(32))

	code, out, errOut := runCLI("check", "--db", path)
	for _, want := range []string{"DAMAGED", fmt.Sprintf("events, page %d, ID \"evt-", leaf), "checksum mismatch",
		"what to do", "backup", "outboxd restore --from-kafka"} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q", want)
		}
	}
	if code != exitError || t.Failed() {
		t.Fatalf("check of a damaged file: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI("check", "--db", path, "--json")
	var v struct {
		OK       bool `json:"ok"`
		Problems []struct {
			Bucket string `json:"bucket"`
			Page   uint64 `json:"page"`
			Key    string `json:"key"`
			What   string `json:"what"`
		} `json:"problems"`
		Advice []string `json:"advice"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != exitError || v.OK || len(v.Problems) == 0 || len(v.Advice) == 0 {
		t.Fatalf("check --json: %d %v\n%s", code, err, out)
	}
	if p := v.Problems[0]; p.Bucket != "events" || p.Page != leaf || !strings.HasPrefix(p.Key, `ID "evt-`) {
		t.Errorf("first problem %+v, want one in events on page %d naming the ID", p, leaf)
	}
}

func TestCheckRefusesLockedFileAndBadUsage(t *testing.T) {
	path := storeWith(t, 1)
	st, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("check", "--db", path)
	st.Close()
	if code != exitError || !strings.Contains(errOut, "is in use") {
		t.Errorf("check of a file a server holds: %d %q", code, errOut)
	}
	if code, _, errOut := runCLI("check", "--db", filepath.Join(t.TempDir(), "none.db")); code != exitError || !strings.Contains(errOut, "no database at") {
		t.Errorf("check of a missing file: %d %q", code, errOut)
	}
	if code, _, _ := runCLI("check", "--db", path, "extra"); code != exitUsage {
		t.Errorf("check with an extra argument: %d, want %d", code, exitUsage)
	}
	if code, _, _ := runCLI("check", "--max-problems", "0"); code != exitUsage {
		t.Errorf("check --max-problems 0: %d, want %d", code, exitUsage)
	}
}

// inspect meets damage in what it reads (the first page of events: at open,
// or in the records it lists): it says the file is damaged, points at
// check, exits 1 and prints no partial report.
func TestInspectSaysWhenTheFileIsDamaged(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  func(ps int) int
		args []string
	}{
		{"page header, met at open", func(int) int { return 0 }, nil},
		{"a listed record", func(ps int) int { return ps / 2 }, nil},
		{"a listed record, JSON", func(ps int) int { return ps / 2 }, []string{"--json"}},
		{"one event", func(ps int) int { return 16 + 4*16 }, []string{"--id", "evt-00002"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := storeWith(t, 3000)
			ps, leaves := testkit.LeafPages(t, path, "events")
			if code, out, errOut := runCLI(append([]string{"inspect", "--db", path, "--limit", "3000"}, tc.args...)...); code != exitOK {
				t.Fatalf("inspect before the damage: %d\n%s%s", code, out, errOut)
			}
			testkit.Overwrite(t, path, ps, leaves[0], tc.off(ps), testkit.Junk(32))
			code, out, errOut := runCLI(append([]string{"inspect", "--db", path, "--limit", "3000"}, tc.args...)...)
			if code != exitError || !strings.Contains(errOut, path+" is damaged") ||
				!strings.Contains(errOut, "outboxd check --db "+path) || out != "" {
				t.Fatalf("inspect of a damaged file: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
		})
	}
}

// A file whose application keeps its own buckets in it (Outbox.Update):
// check calls it healthy and names the application's bucket, inspect reads
// it, and compact keeps the bucket with its keys.
func TestCheckInspectCompactKeepApplicationBuckets(t *testing.T) {
	path := storeWith(t, 50)
	o, err := outbox.Open(path, outbox.Config{Sink: nopSink{}, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	err = o.Update(t.Context(), func(tx *outbox.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("orders"))
		if err != nil {
			return err
		}
		for i := range 200 {
			if err := b.Put(fmt.Appendf(nil, "order-%03d", i), []byte("paid")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "--db", path}, {"inspect", "--db", path}, {"compact", "--db", path}, {"check", "--db", path}} {
		code, out, errOut := runCLI(args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		if args[0] == "check" && (!strings.Contains(out, "ok: no problems found") || !strings.Contains(out, "orders")) {
			t.Fatalf("%v: does not call the file healthy or name the application's bucket:\n%s", args, out)
		}
	}
	ro, err := outbox.Open(path, outbox.Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Stop(context.Background())
	keys := 0
	if err := ro.View(t.Context(), func(tx *outbox.ViewTx) error {
		keys = tx.Bucket([]byte("orders")).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if st := ro.Stats(); keys != 200 || st.Pending != 50 {
		t.Fatalf("after compact: %d application keys (want 200), %d pending events (want 50)", keys, st.Pending)
	}
}
