package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// healthcheckTimeout bounds one probe: connecting, the request and the
// answer together.
const healthcheckTimeout = 5 * time.Second

const healthcheckUsage = `Usage: outboxd healthcheck [--url URL]

Asks a running outboxd whether it is alive (GET /healthz) and exits 0 when
it answers 200, 1 otherwise: a probe for container images that have no
HTTP client of their own. Without --url it asks the address in
OUTBOXD_LISTEN (a wildcard host means this machine), else 127.0.0.1:8080.

`

// healthcheck probes a running server's /healthz.
func healthcheck(e Env, args []string) int {
	fs := flag.NewFlagSet("outboxd healthcheck", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), healthcheckUsage)
		fs.PrintDefaults()
	}
	url := fs.String("url", "", "`URL` to GET (default: http://OUTBOXD_LISTEN/healthz)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.Stderr, "outboxd healthcheck: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *url == "" {
		listen, _ := e.Getenv("OUTBOXD_LISTEN")
		*url = healthzURL(listen)
	}
	if err := probe(*url); err != nil {
		fmt.Fprintf(e.Stderr, "outboxd healthcheck: %s: %v\n", *url, err)
		return exitError
	}
	fmt.Fprintln(e.Stdout, "ok")
	return exitOK
}

// healthzURL is the /healthz URL of a server listening on addr: a wildcard
// or missing host is reached on loopback.
func healthzURL(addr string) string {
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr + "/healthz"
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz"
}

// probe GETs url and fails unless the answer is 200.
func probe(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}
