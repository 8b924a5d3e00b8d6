package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/authguard"
)

// Backend is what the console shows and acts on: the methods of
// *outbox.Outbox it calls. An *outbox.Outbox is one; so is a view over
// several outboxes served as one (package outbox/union). When the Backend
// also has a History method (see Historian), or is an *outbox.Outbox, the
// event page shows the event's changelog history; when it also has a
// SearchArchive method, as *outbox.Outbox has (with Config.Retain set),
// the history page searches the delivered events it keeps.
type Backend interface {
	List(ctx context.Context, opt outbox.ListOptions) ([]outbox.Event, string, error)
	Get(ctx context.Context, id string) (outbox.Event, error)
	Attempts(ctx context.Context, id string) ([]outbox.Attempt, error)
	Delete(ctx context.Context, id string) error
	Replay(ctx context.Context, id string) error
	DeleteDelivery(ctx context.Context, id, endpoint string) error
	ReplayDelivery(ctx context.Context, id, endpoint string) error
	ReplayDead(ctx context.Context, f outbox.ReplayFilter) (int, error)
	EndpointsPage(ctx context.Context, after string, limit int) ([]outbox.EndpointState, string, error)
	EnableEndpoint(ctx context.Context, name string) error
	RetryEndpoint(ctx context.Context, name string, rate float64) (int, error)
	Stats() outbox.Stats
}

// Historian is the optional capability of a Backend to tell an event's
// changelog history (union.View has it).
type Historian interface {
	History(ctx context.Context, id string) ([]outbox.ChangelogEntry, error)
}

// Partition is the state of one partition of a Kafka group that this
// process owns, as the partitions page shows it.
type Partition struct {
	// Partition is the partition number.
	Partition int
	// Owner names the owner (this process's group member).
	Owner string
	// State is the partition's state (restoring, active, handing-over,
	// failed).
	State string
	// Restore says how the partition's store was restored, and Lag how many
	// changelog records its restore still has to read.
	Restore string
	Lag     int64
	// Committed is the last input offset committed, -1 for none.
	Committed int64
	// Pending and Dead count the events in the partition's store.
	Pending, Dead int
	// Error is why the last restore failed, else "".
	Error string
}

// PartitionSource lists the partitions a Kafka group member owns.
type PartitionSource interface {
	Partitions() []Partition
}

// Defaults of Config.
const (
	// DefaultPath is where the console is mounted.
	DefaultPath = "/ui/"
	// DefaultSessionTTL is how long a login lasts.
	DefaultSessionTTL = 12 * time.Hour
	// DefaultSampleInterval is the period of the overview chart's samples.
	DefaultSampleInterval = 5 * time.Second
	// MaxSessions bounds the sessions kept at once; past it the oldest
	// is dropped.
	MaxSessions = 10000
	// pageSize is the events listed on one page.
	pageSize = 50
)

// Config configures the console. The zero value is usable: every field
// documents its default.
type Config struct {
	// Path is the URL path the console is mounted at, starting and ending
	// with a slash. Default DefaultPath ("/ui/").
	Path string
	// Token, when set, is asked for once on a login page (compared in
	// constant time); a login keeps a server-side session in a cookie.
	// Default: empty, no login (bind to loopback then).
	Token string
	// Guard throttles wrong tokens at the login: their answers are
	// delayed more with each consecutive one from a client address, the
	// right token is answered at once (see package authguard). Its
	// trusted proxies also decide whether a request came over TLS, which
	// makes the cookies Secure. Share one Guard with the HTTP API so that
	// guesses at either count for both. Default: a Guard with authguard's
	// defaults (no trusted proxy), logging to Logger.
	Guard *authguard.Guard
	// SessionTTL is how long a session lasts after login. Default
	// DefaultSessionTTL (12h).
	SessionTTL time.Duration
	// SampleInterval is how often the overview's chart samples the
	// Backend's Stats; an hour of samples is kept in memory. Default
	// DefaultSampleInterval (5s).
	SampleInterval time.Duration
	// Partitions, when set, adds the partitions page (Kafka group mode).
	// Default: nil, no such page.
	Partitions PartitionSource
	// Logger receives server-side errors. Default: discard.
	Logger *slog.Logger
	// Now is the clock of sessions and samples. Default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.Path == "" {
		c.Path = DefaultPath
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.SampleInterval <= 0 {
		c.SampleInterval = DefaultSampleInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Guard == nil {
		c.Guard = authguard.New(authguard.Config{Logger: c.Logger})
	}
	return c
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Console is the web console's HTTP handler. It owns a sampling goroutine
// (and a replay by filter while one runs): call Close to stop them.
type Console struct {
	b        Backend
	cfg      Config
	base     string // cfg.Path without its trailing slash
	mux      *http.ServeMux
	pages    map[string]*template.Template
	key      [32]byte // HMAC key of CSRF tokens, random per Console
	tokenSum [sha256.Size]byte

	mu       sync.Mutex
	sessions map[string]time.Time // session ID -> expiry
	samples  samples
	replay   replayJob

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// New returns the console over b and starts its sampler. It fails when
// cfg.Path does not start and end with a slash.
func New(b Backend, cfg Config) (*Console, error) {
	if b == nil {
		return nil, errors.New("console: nil Backend")
	}
	cfg = cfg.withDefaults()
	if !strings.HasPrefix(cfg.Path, "/") || !strings.HasSuffix(cfg.Path, "/") {
		return nil, fmt.Errorf("console: Path %q must start and end with a slash", cfg.Path)
	}
	c := &Console{b: b, cfg: cfg, base: strings.TrimSuffix(cfg.Path, "/"), sessions: map[string]time.Time{}}
	if _, err := rand.Read(c.key[:]); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	if cfg.Token != "" {
		c.tokenSum = sha256.Sum256([]byte(cfg.Token))
	}
	var err error
	if c.pages, err = parsePages(); err != nil {
		return nil, err
	}
	c.samples.init(int(time.Hour / cfg.SampleInterval))
	c.routes()
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.sample()
	c.wg.Add(1)
	go c.sampleLoop()
	return c, nil
}

// Close stops the sampler and any replay by filter under way, and waits
// for them. It is safe to call more than once.
func (c *Console) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.wg.Wait()
	})
	return nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	b := c.base
	m.HandleFunc("GET "+b+"/{$}", c.page(c.overview))
	m.HandleFunc("GET "+b+"/events", c.page(c.events))
	m.HandleFunc("GET "+b+"/event", c.page(c.event))
	m.HandleFunc("GET "+b+"/dead", c.page(c.dead))
	m.HandleFunc("GET "+b+"/history", c.page(c.archive))
	m.HandleFunc("GET "+b+"/endpoints", c.page(c.endpoints))
	if c.cfg.Partitions != nil {
		m.HandleFunc("GET "+b+"/partitions", c.page(c.partitions))
	}
	m.HandleFunc("POST "+b+"/action", c.action)
	m.HandleFunc("GET "+b+"/login", c.loginForm)
	m.HandleFunc("POST "+b+"/login", c.login)
	m.HandleFunc("POST "+b+"/logout", c.logout)
	m.HandleFunc("GET "+b+"/static/console.css", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, staticFS, "static/console.css")
	})
	m.HandleFunc(b+"/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, "no such page: "+r.URL.Path)
	})
	c.mux = m
}

// contentSecurityPolicy allows the console's own stylesheet and script and
// nothing else: no inline script or style, no frames, forms only to itself.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// ServeHTTP serves the console's pages under its Path, with its security
// headers on every answer.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if r.URL.Path == c.base {
		http.Redirect(w, r, c.cfg.Path, http.StatusSeeOther)
		return
	}
	if !strings.HasPrefix(r.URL.Path, c.cfg.Path) {
		c.fail(w, r, http.StatusNotFound, "no such page: "+r.URL.Path)
		return
	}
	c.mux.ServeHTTP(w, r)
}
