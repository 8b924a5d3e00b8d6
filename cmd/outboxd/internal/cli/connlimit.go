package cli

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
)

// connLimiter bounds the connections a listener hands to the HTTP server.
// Up to max connections are served normally. A connection accepted beyond
// that is marked over the limit: its request is answered 503 with
// Retry-After and the connection closed (overLimit does that), so a client
// learns the server is full instead of hanging. Beyond twice max, Accept
// waits until a connection closes: connections waiting in the kernel's
// backlog cost the process nothing.
type connLimiter struct {
	net.Listener
	max   int
	slots chan struct{} // one per open connection, 2*max of them
	open  atomic.Int64
	done  chan struct{}
	once  sync.Once
}

func newConnLimiter(l net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: l, max: max, slots: make(chan struct{}, 2*max), done: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *connLimiter) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	n := l.open.Add(1)
	return &limitedConn{Conn: c, l: l, over: n > int64(l.max)}, nil
}

// Close closes the listener and ends a waiting Accept.
func (l *connLimiter) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn is a connection holding a slot until it is closed.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	over bool // accepted beyond max
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		<-c.l.slots
	})
	return err
}

// CloseWrite half-closes the connection when it can, as the HTTP server
// does before closing one whose request body it did not read, so that the
// client reads the answer instead of a reset.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// overConnKey marks, in a request's context, a connection accepted beyond
// the limit.
type overConnKey struct{}

// connContext is the http.Server ConnContext that marks connections
// accepted beyond the limit.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok && lc.over {
		return context.WithValue(ctx, overConnKey{}, true)
	}
	return ctx
}

// connRetryAfter is the Retry-After, in seconds, of a 503 answered on a
// connection beyond limits.max_connections.
const connRetryAfter = 1

// overLimit answers requests on connections accepted beyond the limit with
// 503, Retry-After and Connection: close, and passes the others to next.
// GET /healthz is always answered: a process that is full is still alive,
// and restarting it would drop the connections it serves.
func overLimit(max int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if over, _ := r.Context().Value(overConnKey{}).(bool); over && r.URL.Path != "/healthz" {
			h := w.Header()
			h.Set("Connection", "close")
			h.Set("Retry-After", strconv.Itoa(connRetryAfter))
			h.Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"the server has as many connections open as it serves (` + strconv.Itoa(max) +
				`); nothing was stored, retry later"}` + "\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
