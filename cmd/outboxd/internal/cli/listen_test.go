package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
)

// Bad flags stop listen before it listens, with a message naming the flag
// and never the secret.
func TestListenRefusesBadFlags(t *testing.T) {
	const bad = "whsec_c2hvcnQ=" // a key of 5 bytes
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--status", "99"}, "--status must be from 200 to 599, got 99"},
		{[]string{"--status", "600"}, "--status must be from 200 to 599"},
		{[]string{"--secret", bad}, "--secret: the key is shorter than 16 bytes"},
		{[]string{"--secret", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, `--secret: must start with "whsec_"`},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--addr", "127.0.0.1:-1"}, "listening on 127.0.0.1:-1"},
	} {
		var out, errOut bytes.Buffer
		code := Main(Env{Args: append([]string{"listen"}, c.args...), Getenv: func(string) (string, bool) { return "", false },
			Stdout: &out, Stderr: &errOut, Exit: func(int) {}})
		if code == exitOK || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("listen %v: exit %d, %q; want a failure saying %q", c.args, code, errOut.String(), c.want)
		}
		if strings.Contains(errOut.String()+out.String(), "c2hvcnQ") || strings.Contains(errOut.String(), "MfKQ9r8") {
			t.Errorf("listen %v quoted the secret: %q", c.args, errOut.String())
		}
	}
}

// What a delivery carries reaches the terminal escaped: no control
// character, no invalid UTF-8, nothing that reorders the text.
func TestPrintableEscapes(t *testing.T) {
	for in, want := range map[string]string{
		`{"order":42}`:            `{"order":42}`,
		"ünïcode ✓":               "ünïcode ✓",
		"a\nb\r\tc":               `a\nb\r\tc`,
		"\x1b[31mred\x07":         `\x1b[31mred\x07`,
		"bad \xff\xfe utf-8":      `bad \xff\xfe utf-8`,
		"rtl \u202egnp.exe":       `rtl \u202egnp.exe`,
		"nbsp\u00a0zero\u200bwid": `nbsp\xa0zero\u200bwid`,
	} {
		if got := printable(in, 100); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
	if got := printable(strings.Repeat("x", 20), 8); got != "xxxxxxxx…" {
		t.Errorf("cut at 8: %q", got)
	}
}

// Credentials in a delivery's headers are not printed, its query values are
// redacted, and a delivery without a signature is refused when a secret is
// given, with the reason in the answer (which outboxd keeps as the error).
func TestListenerHidesCredentialsAndExplainsRefusals(t *testing.T) {
	v, err := httpsink.NewVerifier([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	l := &listener{out: &out, verifier: v, status: http.StatusOK, now: time.Now, seen: map[string]int{}}
	req := httptest.NewRequest("POST", "/hook?token=q-s3cret", strings.NewReader(`{"a":1}`))
	req.Header.Set("Authorization", "Bearer h-s3cret")
	req.Header.Set("X-Api-Key", "k-s3cret")
	req.Header.Set("webhook-id", "evt-1")
	rec := httptest.NewRecorder()
	l.ServeHTTP(rec, req)
	if strings.Contains(out.String(), "s3cret") {
		t.Errorf("listen printed a credential:\n%s", out.String())
	}
	for _, want := range []string{"Authorization: (not shown: may be a credential)", "X-Api-Key: (not shown: may be a credential)", "/hook?token=xxxxx",
		"✗ signature not verified: no webhook-signature header", "answered 401 Unauthorized"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("listen's report lacks %q:\n%s", want, out.String())
		}
	}
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "signature not verified: no webhook-signature header") {
		t.Errorf("answer %d %q, want 401 saying why", rec.Code, rec.Body.String())
	}

	out.Reset()
	l = &listener{out: &out, status: http.StatusNotFound, now: time.Now, seen: map[string]int{}}
	rec = httptest.NewRecorder()
	l.ServeHTTP(rec, httptest.NewRequest("POST", "/hook", strings.NewReader("")))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "answering 404 as asked (--status 404)") ||
		!strings.Contains(out.String(), "no signature, not checked") || !strings.Contains(out.String(), "payload: none") {
		t.Errorf("--status 404 without a secret: answer %d %q, report:\n%s", rec.Code, rec.Body.String(), out.String())
	}
}
