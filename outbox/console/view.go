package console

import (
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

const timeLayout = "2006-01-02 15:04:05 MST"

// text makes any bytes from an event safe to show as text: invalid UTF-8
// becomes U+FFFD (html/template escapes the rest).
func text(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// preview is a payload or response excerpt shown on a page.
type preview struct {
	Text      string // the bytes as text (invalid UTF-8 as U+FFFD)
	Hex       string // a hex dump when the bytes are not valid UTF-8
	Size      int
	Truncated bool
	Empty     bool
}

// previewBytes is the most bytes of a payload the event page shows.
const previewBytes = 16 << 10

// makePreview shows the first limit bytes of b.
func makePreview(b []byte, limit int) preview {
	p := preview{Size: len(b), Empty: len(b) == 0}
	if len(b) > limit {
		b, p.Truncated = b[:limit], true
	}
	p.Text = text(string(b))
	if !utf8.Valid(b) && !(p.Truncated && utf8.Valid(trimPartialRune(b))) {
		h := b[:min(len(b), 1024)]
		p.Hex = hex.Dump(h)
	}
	return p
}

// trimPartialRune drops a rune cut at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if utf8.Valid(b) {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

// pair is a header name and value.
type pair struct{ Name, Value string }

func pairs(h map[string]string) []pair {
	out := make([]pair, 0, len(h))
	for _, k := range slices.Sorted(maps.Keys(h)) {
		out = append(out, pair{text(k), text(h[k])})
	}
	return out
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

// ago says how long ago (or ahead) t is from now, roughly.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	if d < 0 {
		return "in " + roughDuration(-d)
	}
	return roughDuration(d) + " ago"
}

func roughDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}
