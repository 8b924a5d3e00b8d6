package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxd/outbox/outbox"
)

// attemptView is one attempt as inspect --json shows it: the fields of
// GET /v1/events/{id}/attempts.
type attemptView struct {
	Attempt    uint64            `json:"attempt"`
	Delivery   int               `json:"delivery"`
	Endpoint   string            `json:"endpoint,omitempty"`
	StartedAt  string            `json:"started_at"`
	DurationMS float64           `json:"duration_ms"`
	Outcome    string            `json:"outcome"`
	Status     int               `json:"status"`
	Error      string            `json:"error,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       *string           `json:"body,omitempty"`
	BodyBase64 string            `json:"body_base64,omitempty"`
}

// eventAttempts reads the attempt log of id; an unknown event has none.
func eventAttempts(o *outbox.Outbox, id string) ([]outbox.Attempt, error) {
	as, err := o.Attempts(context.Background(), id)
	if errors.Is(err, outbox.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the attempts of %q: %w", id, err)
	}
	return as, nil
}

func viewAttempts(as []outbox.Attempt) []attemptView {
	out := make([]attemptView, 0, len(as))
	for _, a := range as {
		v := attemptView{Attempt: a.Seq, Delivery: a.Delivery, Endpoint: a.Endpoint, StartedAt: ts(a.StartedAt),
			DurationMS: float64(a.Duration.Microseconds()) / 1000, Outcome: a.Action.String(),
			Status: a.Status, Error: a.Error, Headers: a.Header}
		switch {
		case len(a.Body) == 0:
		case utf8.Valid(a.Body):
			s := string(a.Body)
			v.Body = &s
		default:
			v.BodyBase64 = base64.StdEncoding.EncodeToString(a.Body)
		}
		out = append(out, v)
	}
	return out
}

// writeAttempts prints the attempt log, oldest first, one line per attempt
// and indented lines for its error and response.
func writeAttempts(w io.Writer, as []outbox.Attempt) {
	if len(as) == 0 {
		fmt.Fprintln(w, "attempts: none recorded")
		return
	}
	fmt.Fprintf(w, "attempts (oldest first, the last %d kept):\n", outbox.AttemptsPerEvent)
	for _, a := range as {
		status := "no response"
		if a.Status != 0 {
			status = "status " + strconv.Itoa(a.Status)
		}
		to := ""
		if a.Endpoint != "" {
			to = " to " + a.Endpoint
		}
		fmt.Fprintf(w, "  #%-3d %s  %-8s %-11s took %s (delivery %d%s)\n", a.Seq, tsText(a.StartedAt),
			a.Action, status, a.Duration.Round(time.Microsecond), a.Delivery, to)
		if a.Error != "" {
			fmt.Fprintf(w, "       error: %s\n", oneLine(a.Error))
		}
		if len(a.Header) > 0 {
			var hs []string
			for _, k := range slices.Sorted(maps.Keys(a.Header)) {
				hs = append(hs, k+": "+a.Header[k])
			}
			fmt.Fprintf(w, "       headers: %s\n", oneLine(strings.Join(hs, "; ")))
		}
		switch {
		case len(a.Body) == 0:
		case utf8.Valid(a.Body):
			fmt.Fprintf(w, "       body: %s\n", strconv.Quote(oneLine(string(a.Body))))
		default:
			fmt.Fprintf(w, "       body (%d bytes, base64): %s\n", len(a.Body), oneLine(base64.StdEncoding.EncodeToString(a.Body)))
		}
	}
}
