package httpsink

import "testing"

func TestRedactExcerpt(t *testing.T) {
	secrets := []string{"SECRET", "CRETS-AND-MORE", "tok"}
	for _, tc := range []struct {
		in   string
		want int
		out  string
	}{
		{"no secret here", 6, "no sec"},
		{"SECRET first", 20, "xxxxx first"},
		{"a SECRET and a tok", 40, "a xxxxx and a xxxxx"},
		{"cut in SECRET", 9, "cut in xxxxx"},
		{"after the end SECRET", 8, "after th"},
		{"SECRETS-AND-MORE overlap", 30, "xxxxx overlap"},
		{"SECRETtok adjacent", 30, "xxxxxxxxxx adjacent"},
		{"short", 10, "short"},
	} {
		if got := redactExcerpt(tc.in, tc.want, secrets); got != tc.out {
			t.Errorf("redactExcerpt(%q, %d) = %q, want %q", tc.in, tc.want, got, tc.out)
		}
	}
}
