package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxd/outbox/store"
)

// archiveFile returns a closed file whose archive holds 30 deliveries:
// topics order.created, order.paid and invoice.sent in turn, keys
// cust-0..cust-2.
func archiveFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outbox.db")
	st, err := store.Open(path, store.Options{NoSync: true, Archive: true})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*store.Record
	for i := range 30 {
		recs = append(recs, &store.Record{ID: fmt.Sprintf("ev-%02d", i), Destination: "billing", Endpoint: "billing", Method: "POST",
			Topic: []string{"order.created", "order.paid", "invoice.sent"}[i%3], Key: fmt.Sprintf("cust-%d", i%3), Payload: []byte("{}")})
	}
	if _, err := st.Insert(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	outs := make([]store.Outcome, len(recs))
	for i, r := range recs {
		outs[i] = store.Outcome{Kind: store.OutcomeDelete, ID: r.ID, Version: r.Version, Deliveries: 1, LastStatus: 200}
	}
	if _, err := st.Apply(t.Context(), outs, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestInspectArchive(t *testing.T) {
	path := archiveFile(t)
	code, out, errOut := runCLI("inspect", "--db", path, "--archive", "--topic", "order.*", "--limit", "100", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var page struct {
		Events []struct{ ID, Topic, DeliveredAt string }
		Next   string
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Events) != 20 || page.Next != "" {
		t.Fatalf("--json: %d events, next %q, %v: %s", len(page.Events), page.Next, err, out)
	}
	code, out, errOut = runCLI("inspect", "--db", path, "--archive", "--key-prefix", "cust-1", "--limit", "4")
	if code != exitOK || strings.Count(out, "cust-1") != 4 || !strings.Contains(out, "more: outboxd inspect --archive --cursor ") {
		t.Fatalf("text: exit %d: %s%s", code, out, errOut)
	}
	cursor := strings.Fields(out[strings.Index(out, "--cursor "):])[1]
	code, out, _ = runCLI("inspect", "--db", path, "--archive", "--key-prefix", "cust-1", "--limit", "100", "--cursor", cursor)
	if code != exitOK || strings.Count(out, "cust-1") != 6 || strings.Contains(out, "more:") {
		t.Fatalf("second page: exit %d: %s", code, out)
	}
	for _, bad := range [][]string{{"--topic", "order.**"}, {"--limit", "0"}, {"--from", "yesterday"}, {"extra"}} {
		if code, _, errOut := runCLI(append([]string{"inspect", "--db", path, "--archive"}, bad...)...); code != exitUsage || errOut == "" {
			t.Errorf("inspect --archive %v: exit %d, %q", bad, code, errOut)
		}
	}
}
