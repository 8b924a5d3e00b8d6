package testkit

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, url, id, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("webhook-id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The receiver answers per its Answer, which sees the body and how many
// earlier requests had the ID, and records each request by ID with what it
// answered.
func TestReceiver(t *testing.T) {
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	rc := NewReceiver(t, "webhook-id", func(r *http.Request, id string, n int) Reply {
		b, _ := io.ReadAll(r.Body)
		if n == 0 && string(b) == "first" {
			return Reply{Status: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"1"}}, Body: "later"}
		}
		return Reply{}
	})
	if code, body := post(t, rc.URL+"/hook", "a", "first"); code != 503 || body != "later" {
		t.Fatalf("first answer %d %q, want 503 later", code, body)
	}
	if code, _ := post(t, rc.URL+"/hook", "a", "first"); code != 204 {
		t.Fatalf("second answer %d, want 204", code)
	}
	post(t, rc.URL+"/other", "b", "x")
	if got := rc.Statuses("a"); len(got) != 2 || got[0] != 503 || got[1] != 204 {
		t.Errorf("statuses of a: %v", got)
	}
	if rc.Attempts("a") != 2 || rc.Acked("a") != 1 || rc.Successes() != 2 {
		t.Errorf("a: %d attempts, %d acked; %d successes", rc.Attempts("a"), rc.Acked("a"), rc.Successes())
	}
	if m := rc.Missing([]string{"a", "b", "c"}); len(m) != 1 || m[0] != "c" {
		t.Errorf("missing %v, want [c]", m)
	}
	reqs := rc.Requests()
	if len(reqs) != 3 || reqs[2].Path != "/other" || string(reqs[2].Body) != "x" || reqs[2].Header.Get("webhook-id") != "b" {
		t.Errorf("requests %+v", reqs)
	}
	rc.SetAnswer(func(*http.Request, string, int) Reply { return Reply{Status: 410} })
	rc.Forget()
	if code, _ := post(t, rc.URL, "c", ""); code != 410 || len(rc.Requests()) != 1 || rc.Acked("c") != 0 {
		t.Errorf("after SetAnswer and Forget: %d, %d requests", code, len(rc.Requests()))
	}
}
