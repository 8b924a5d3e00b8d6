package console_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/console"
)

// Mount the console next to an application's own routes.
func Example() {
	dir, err := os.MkdirTemp("", "console-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	o, err := outbox.Open(filepath.Join(dir, "outbox.db"), outbox.Config{Sink: nopSink{}})
	if err != nil {
		log.Fatal(err)
	}
	defer o.Stop(context.Background())

	// Set Token to ask for the API token on a login page.
	ui, err := console.New(o, console.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer ui.Close()
	mux := http.NewServeMux()
	mux.Handle("/ui/", ui)

	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/ui/", nil))
	fmt.Println(w.Code, w.Header().Get("Content-Type"))
	// Output: 200 text/html; charset=utf-8
}
