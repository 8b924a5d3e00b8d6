package cli

import (
	"bytes"
	"strings"
	"testing"
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
