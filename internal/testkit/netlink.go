package testkit

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Faults are the network faults a Link applies to the bytes it forwards.
// The zero value forwards every byte as soon as it arrives.
type Faults struct {
	// Latency delays every chunk of bytes, in each direction, by this much.
	Latency time.Duration
	// Bandwidth caps each direction of each connection at this many bytes
	// per second (0: no cap).
	Bandwidth int
	// BlackHole holds every byte, of open connections and of those opened
	// while it lasts, until it is cleared: what a network partition does to
	// TCP. Held bytes flow again once it is cleared, as retransmissions
	// would, unless an end gave up on its connection meanwhile.
	BlackHole bool
}

// Link is a TCP proxy for fault tests: it forwards the bytes between each
// client connection and a connection of its own to one upstream address,
// and applies the Faults set on it. Resets end every open connection with a
// TCP RST on both sides. A Link is closed by the test's cleanup.
type Link struct {
	upstream string
	ln       net.Listener // nil for a Link fed by a KafkaFront

	mu      sync.Mutex
	faults  Faults
	changed chan struct{} // closed and replaced by every Set
	conns   map[*linkConn]struct{}
	closed  bool
	done    chan struct{}
	wg      sync.WaitGroup
}

// linkConn is one proxied connection: the client's and the upstream's ends.
type linkConn struct {
	client, server net.Conn
	once           sync.Once
	gone           chan struct{} // closed when the connection ends
}

// NewLink listens on a loopback port and forwards each connection made to
// it to upstream.
func NewLink(t testing.TB, upstream string) *Link {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLink(upstream)
	l.ln = ln
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(l.Close)
	return l
}

func newLink(upstream string) *Link {
	return &Link{upstream: upstream, changed: make(chan struct{}), conns: map[*linkConn]struct{}{}, done: make(chan struct{})}
}

// Addr is the address clients connect to (empty for a KafkaFront's link).
func (l *Link) Addr() string {
	if l.ln == nil {
		return ""
	}
	return l.ln.Addr().String()
}

// Set replaces the faults applied from now on, to open connections too.
func (l *Link) Set(f Faults) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faults = f
	close(l.changed)
	l.changed = make(chan struct{})
}

// Heal clears every fault.
func (l *Link) Heal() { l.Set(Faults{}) }

// Reset ends every open connection with a TCP RST to both ends, as a
// middlebox that drops its connection state does, and returns how many it
// ended. Connections made afterwards work.
func (l *Link) Reset() int {
	l.mu.Lock()
	open := make([]*linkConn, 0, len(l.conns))
	for c := range l.conns {
		open = append(open, c)
	}
	l.mu.Unlock()
	for _, c := range open {
		c.end(true)
	}
	return len(open)
}

// Close stops accepting, resets the open connections and waits for every
// goroutine of the Link. It is safe to call twice.
func (l *Link) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	close(l.done)
	l.mu.Unlock()
	if l.ln != nil {
		l.ln.Close()
	}
	l.Reset()
	l.wg.Wait()
}

func (l *Link) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.serve(c, nil)
	}
}

// serve proxies client, whose first bytes were already read as prefix, to
// the upstream. It returns at once; the Link's goroutines carry the bytes.
func (l *Link) serve(client net.Conn, prefix []byte) {
	server, err := net.DialTimeout("tcp", l.upstream, 5*time.Second)
	if err != nil {
		resetConn(client)
		return
	}
	c := &linkConn{client: client, server: server, gone: make(chan struct{})}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		c.end(true)
		return
	}
	l.conns[c] = struct{}{}
	l.wg.Add(2)
	l.mu.Unlock()
	go l.pipe(c, server, client, prefix)
	go l.pipe(c, client, server, nil)
}

// pipe copies src to dst through the faults until either end closes, then
// ends the connection.
func (l *Link) pipe(c *linkConn, dst, src net.Conn, prefix []byte) {
	defer l.wg.Done()
	defer func() {
		l.mu.Lock()
		delete(l.conns, c)
		l.mu.Unlock()
		c.end(false)
	}()
	if len(prefix) > 0 && (!l.pass(c, len(prefix)) || write(dst, prefix) != nil) {
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf[:l.chunk(len(buf))])
		if n > 0 && (!l.pass(c, n) || write(dst, buf[:n]) != nil) {
			return
		}
		if err != nil {
			return
		}
	}
}

func write(dst net.Conn, b []byte) error {
	_, err := dst.Write(b)
	return err
}

// chunk is how many bytes to read at once: a tenth of a second's worth
// under a bandwidth cap, so that the cap is smooth.
func (l *Link) chunk(max int) int {
	l.mu.Lock()
	bw := l.faults.Bandwidth
	l.mu.Unlock()
	if bw > 0 {
		return min(max, bw/10+1)
	}
	return max
}

// pass holds n bytes as the faults say; false means the connection or the
// Link ended meanwhile.
func (l *Link) pass(c *linkConn, n int) bool {
	for {
		l.mu.Lock()
		f, changed := l.faults, l.changed
		l.mu.Unlock()
		if !f.BlackHole {
			delay := f.Latency
			if f.Bandwidth > 0 {
				delay += time.Duration(float64(n) / float64(f.Bandwidth) * float64(time.Second))
			}
			return l.hold(c, delay, nil)
		}
		if !l.hold(c, -1, changed) {
			return false
		}
	}
}

// hold waits for d (forever when negative) or until changed is closed;
// false means the connection or the Link ended first.
func (l *Link) hold(c *linkConn, d time.Duration, changed chan struct{}) bool {
	if d == 0 {
		return true
	}
	var timeout <-chan time.Time
	if d > 0 {
		tm := time.NewTimer(d)
		defer tm.Stop()
		timeout = tm.C
	}
	select {
	case <-timeout:
		return true
	case <-changed:
		return true
	case <-c.gone:
		return false
	case <-l.done:
		return false
	}
}

// end closes both sides once, with an RST when reset is set.
func (c *linkConn) end(reset bool) {
	c.once.Do(func() {
		close(c.gone)
		if reset {
			resetConn(c.client)
			resetConn(c.server)
			return
		}
		c.client.Close()
		c.server.Close()
	})
}

// resetConn closes a TCP connection with an RST instead of a FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// KafkaFront is the address a one-broker test cluster advertises, so that
// every connection of a Kafka client, including those it makes to the
// address the metadata names, comes through it. It reads the client ID of
// each connection's first request and forwards the connection through the
// Link of that client ID, so that a test can fault one client's traffic
// (one instance of a group) and not another's. Clients whose ID has no Link
// go through one without faults.
//
// A kfake cluster is made to advertise it with kfake.ListenFn(front.Listen)
// and kfake.NumBrokers(1).
type KafkaFront struct {
	ln net.Listener

	mu       sync.Mutex
	upstream string
	links    map[string]*Link
	wg       sync.WaitGroup
}

// NewKafkaFront listens on a loopback port; the test's cleanup closes it
// and its Links.
func NewKafkaFront(t testing.TB) *KafkaFront {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &KafkaFront{ln: ln, links: map[string]*Link{}}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

// Addr is the front's address, which the broker advertises.
func (f *KafkaFront) Addr() string { return f.ln.Addr().String() }

// Listen is the broker's listen function: it listens on address and
// returns a listener that names the front's address as its own, which is
// the address a kfake broker advertises.
func (f *KafkaFront) Listen(network, address string) (net.Listener, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.upstream != "" {
		return nil, errors.New("testkit: a KafkaFront serves one broker")
	}
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	f.upstream = ln.Addr().String()
	return advertised{Listener: ln, addr: f.ln.Addr()}, nil
}

// advertised is a listener that names another address as its own.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (a advertised) Addr() net.Addr { return a.addr }

// Link returns the Link of the clients with this client ID, made on first
// use.
func (f *KafkaFront) Link(clientID string) *Link {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[clientID]
	if !ok {
		l = newLink(f.upstream)
		f.links[clientID] = l
	}
	return l
}

func (f *KafkaFront) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			id, prefix, err := readClientID(c)
			if err != nil {
				c.Close()
				return
			}
			f.Link(id).serve(c, prefix)
		}()
	}
}

// readClientID reads the header of a Kafka request (size, API key and
// version, correlation ID, then the client ID as a nullable int16-prefixed
// string in every header version) and returns the client ID and the bytes
// read.
func readClientID(c net.Conn) (string, []byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	head := make([]byte, 14)
	if _, err := io.ReadFull(c, head); err != nil {
		return "", nil, err
	}
	n := int(int16(uint16(head[12])<<8 | uint16(head[13])))
	if n <= 0 {
		return "", head, nil
	}
	if n > 1024 {
		return "", nil, errors.New("testkit: client ID longer than 1 KiB")
	}
	id := make([]byte, n)
	if _, err := io.ReadFull(c, id); err != nil {
		return "", nil, err
	}
	return string(id), append(head, id...), nil
}

func (f *KafkaFront) close() {
	f.ln.Close()
	f.wg.Wait()
	f.mu.Lock()
	links := make([]*Link, 0, len(f.links))
	for _, l := range f.links {
		links = append(links, l)
	}
	f.mu.Unlock()
	for _, l := range links {
		l.Close()
	}
}
