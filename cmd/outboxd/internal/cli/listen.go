package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
	"github.com/outboxd/outbox/httpsink"
)

// defaultListenAddr is where outboxd listen receives unless --addr says
// otherwise: the port after serve's API.
const defaultListenAddr = "127.0.0.1:8081"

const (
	// listenMaxBody is the largest request body listen reads; a larger one
	// is answered 413.
	listenMaxBody = 32 << 20
	// listenShown is how much of a payload listen prints.
	listenShown = 4 << 10
	// listenMaxIDs bounds the per-ID delivery counts listen keeps: past it
	// they start again from 1.
	listenMaxIDs = 100_000
	// listenStopGrace bounds the wait for requests under way at a signal.
	listenStopGrace = 2 * time.Second
)

const listenUsage = `Usage: outboxd listen [--addr ADDRESS] [--secret whsec_...] [--status CODE]

A local webhook receiver to point outboxd serve at: it prints each delivery
(method, path, headers, payload), verifies its Standard Webhooks signature
when given the endpoint's secret, and answers the chosen status. A delivery
whose signature does not verify is answered 401. Ctrl-C stops it.

`

// listen runs a local receiver that prints and verifies deliveries until
// SIGTERM or SIGINT.
func listen(e Env, args []string) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	fs := flag.NewFlagSet("outboxd listen", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), listenUsage)
		fs.PrintDefaults()
	}
	addr := fs.String("addr", defaultListenAddr, "`address` to receive deliveries on (port 0 picks a free one)")
	secret := fs.String("secret", "", "the endpoint's Standard Webhooks signing `secret` (whsec_...): deliveries are verified with it")
	status := fs.Int("status", http.StatusOK, "`code` to answer verified deliveries with, 200 to 599 (404: outboxd parks the event)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.Stderr, "outboxd listen: unexpected argument %q (settings are flags such as --secret whsec_...)\n", fs.Arg(0))
		return exitUsage
	}
	if *status < 200 || *status > 599 {
		fmt.Fprintf(e.Stderr, "outboxd listen: --status must be from 200 to 599, got %d\n", *status)
		return exitUsage
	}
	l := &listener{out: e.Stdout, status: *status, now: time.Now, seen: map[string]int{}}
	if *secret != "" {
		v, err := httpsink.NewVerifier([]string{*secret}, 0)
		if err != nil {
			var ce *httpsink.ConfigError
			if errors.As(err, &ce) {
				err = errors.New(ce.Reason) // never quotes the secret
			}
			fmt.Fprintf(e.Stderr, "outboxd listen: --secret: %v\n", err)
			return exitUsage
		}
		l.verifier = v
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(e.Stderr, "outboxd listen: listening on %s: %v\n", *addr, err)
		return exitError
	}
	srv := &http.Server{Handler: l, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	l.banner(ln.Addr().String())

	select {
	case <-sigs:
	case err := <-served:
		fmt.Fprintf(e.Stderr, "outboxd listen: %v\n", err)
		return exitError
	}
	ctx, cancel := context.WithTimeout(context.Background(), listenStopGrace)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
	}
	<-served
	l.printf("outboxd listen: stopped\n")
	return exitOK
}

// listener is the handler of outboxd listen.
type listener struct {
	out      io.Writer
	verifier *httpsink.Verifier // nil without --secret
	status   int
	now      func() time.Time

	mu   sync.Mutex     // serializes out and seen
	seen map[string]int // webhook-id -> deliveries received
}

func (l *listener) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, format, args...)
}

// banner says where listen receives and how to point serve at it.
func (l *listener) banner(addr string) {
	check := "signatures are not checked (no --secret)"
	secret := ""
	if l.verifier != nil {
		check = "verifying signatures with --secret"
		secret = ",secret=<the same whsec_ secret>"
	}
	l.printf("outboxd listen: receiving deliveries at http://%s (any path), answering %d, %s\n"+
		"deliver to it with: outboxd serve --endpoint local=http://%s/hook%s,allow-private\n",
		addr, l.status, check, addr, secret)
}

func (l *listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := l.now()
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, listenMaxBody))
	id := r.Header.Get("webhook-id")

	var b strings.Builder
	fmt.Fprintf(&b, "\n%s %s %s", at.Format("15:04:05.000"), printable(r.Method, 32), printable(httpsink.RedactURL(r.URL.RequestURI()), 512))
	if id != "" {
		l.mu.Lock()
		if len(l.seen) >= listenMaxIDs {
			clear(l.seen)
		}
		l.seen[id]++
		n := l.seen[id]
		l.mu.Unlock()
		fmt.Fprintf(&b, "  webhook-id %s (received %s)", printable(id, 256), times(n))
	} else {
		b.WriteString("  (no webhook-id header: not from outboxd?)")
	}
	b.WriteByte('\n')
	writeHeaders(&b, r.Header, at)

	status, answer := l.status, ""
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(readErr, &tooBig):
		fmt.Fprintf(&b, "  payload: over %d bytes, not read\n", listenMaxBody)
		status, answer = http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", listenMaxBody)
	case readErr != nil:
		fmt.Fprintf(&b, "  payload: reading it failed after %d bytes: %v\n", len(body), readErr)
		status, answer = http.StatusBadRequest, "could not read the body"
	default:
		writePayload(&b, body)
		switch {
		case l.verifier != nil:
			if err := l.verifier.Verify(r.Header, body, at); err != nil {
				why := strings.ReplaceAll(err.Error(), "httpsink: ", "")
				fmt.Fprintf(&b, "  ✗ signature not verified: %s\n", why)
				status, answer = http.StatusUnauthorized, "signature not verified: "+why
			} else {
				b.WriteString("  ✓ signature verified\n")
			}
		case r.Header.Get("webhook-signature") != "":
			b.WriteString("  signature not checked (give listen the endpoint's secret with --secret to check it)\n")
		default:
			b.WriteString("  no signature, not checked (the endpoint has no secret)\n")
		}
	}
	if answer == "" && status/100 != 2 {
		answer = fmt.Sprintf("answering %d as asked (--status %d)", status, status)
	}
	fmt.Fprintf(&b, "  → answered %s\n", strings.TrimSpace(fmt.Sprintf("%d %s", status, http.StatusText(status))))
	l.printf("%s", b.String())

	if answer == "" {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, "outboxd listen: %s\n", answer)
}

// secretHeader reports whether a header's value may be a credential, which
// listen does not print.
func secretHeader(name string) bool {
	switch name {
	case "Authorization", "Proxy-Authorization", "Cookie":
		return true
	}
	n := strings.ToLower(name)
	for _, s := range []string{"token", "secret", "password", "api-key", "apikey"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// writeHeaders prints the request's headers sorted by name, credentials
// redacted, the timestamp with its age.
func writeHeaders(b *strings.Builder, h http.Header, at time.Time) {
	for _, name := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[name] {
			shown := printable(v, 1024)
			switch {
			case secretHeader(name):
				shown = "(not shown: may be a credential)"
			case name == "Webhook-Timestamp":
				if sec, err := strconv.ParseInt(v, 10, 64); err == nil {
					shown += " (" + age(at.Sub(time.Unix(sec, 0))) + ")"
				}
			}
			fmt.Fprintf(b, "  %s: %s\n", printable(name, 128), shown)
		}
	}
}

// age says how long ago d was, or how far ahead, in whole seconds (the
// timestamp's own precision).
func age(d time.Duration) string {
	if d < 0 {
		return (-d).Truncate(time.Second).String() + " ahead of this clock"
	}
	return d.Truncate(time.Second).String() + " ago"
}

// writePayload prints the payload on one line, escaped, cut at listenShown
// bytes.
func writePayload(b *strings.Builder, body []byte) {
	if len(body) == 0 {
		b.WriteString("  payload: none\n")
		return
	}
	shown := body
	if len(shown) > listenShown {
		shown = shown[:listenShown]
	}
	fmt.Fprintf(b, "  payload (%d bytes): %s", len(body), printable(string(shown), listenShown))
	if len(shown) < len(body) {
		fmt.Fprintf(b, " … (%d more bytes not shown)", len(body)-len(shown))
	}
	b.WriteByte('\n')
}

// printable returns s safe to print on a terminal, on one line: printable
// characters as they are, control characters and invalid UTF-8 escaped Go
// style (\n, \x1b, \u2028), cut at max bytes of s.
func printable(s string, max int) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if i >= max {
			b.WriteString("…")
			break
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String()
}

// noEndpointHint is what serve logs at start when no event could be
// accepted, because no endpoint is configured and raw URLs are off: how to
// add one, and how to try one locally with outboxd listen. It is "" when
// events have somewhere to go.
func noEndpointHint(c *config.Config) string {
	if len(c.Endpoints) > 0 || c.AllowRawURLs {
		return ""
	}
	return "no endpoint is configured, so every event is refused; add one with " +
		"--endpoint NAME=URL[,secret=whsec_...][,allow-private] or in the --config file " +
		"(endpoints: [{name: NAME, url: URL, secrets: [whsec_...]}]) or through the API " +
		"(POST /v1/endpoints/NAME {\"url\": URL}); to try it locally, run " +
		"outboxd listen in another terminal and restart with " +
		"--endpoint local=http://" + defaultListenAddr + "/hook,allow-private"
}

// times says "1 time", "2 times".
func times(n int) string {
	if n == 1 {
		return "1 time"
	}
	return strconv.Itoa(n) + " times"
}
