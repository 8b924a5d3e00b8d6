package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/console"
)

// hostile is text that runs script wherever it is not escaped.
const hostile = `<script>window.pwned=1;document.title="pwned"</script>"><img src=x onerror="window.pwned=2">'><svg onload=window.pwned=3>`

// enqueueDead enqueues ev into e's outbox and waits for it to be dead.
func enqueueDead(t *testing.T, e *env, ev outbox.Event) {
	t.Helper()
	if _, err := e.o.Enqueue(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "event "+ev.ID+" to be dead", func() bool {
		got, err := e.o.Get(t.Context(), ev.ID)
		return err == nil && got.State == outbox.StateDead
	})
}

// step is one thing a user does in the browser.
type step struct {
	what string
	act  chromedp.Action
}

// browseInert takes steps in a real browser, then fails the test if a
// script of the hostile text ran or its markup became elements.
func browseInert(t *testing.T, steps []step) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testkit.Browser(t, 1366, 768), time.Minute)
	defer cancel()
	var title string
	var pwned bool
	steps = append(steps, step{"check nothing ran", chromedp.Tasks{
		chromedp.Title(&title),
		chromedp.Evaluate(`window.pwned !== undefined || document.querySelector("main img, main svg[onload], main script") !== null`, &pwned),
	}})
	for _, s := range steps {
		if err := chromedp.Run(ctx, s.act); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
	}
	if pwned || strings.Contains(title, "pwned") {
		t.Fatalf("a script from the event ran, or its markup became elements (title %q)", title)
	}
}

// An event whose ID, key, payload, headers and receiver's answer hold
// markup and invalid UTF-8 is shown as inert text, in a real browser.
func TestHostileEventIsInertInBrowser(t *testing.T) {
	e := newEnv(t, console.Config{Token: token}, func(r *http.Request, id string, n int) testkit.Reply {
		return testkit.Reply{Status: 500, Header: http.Header{"Content-Type": {"text/html"}}, Body: hostile + "\xff\xfe"}
	})
	payload := []byte(hostile + "\xff\xfe\xc3")
	id := "evil-<b>\"'" // IDs are caller-given
	enqueueDead(t, e, outbox.Event{
		ID: id, Key: "k" + hostile, Destination: "hooks", Payload: payload,
		Headers: map[string]string{"X-Evil": hostile + "\xff"},
	})
	var idText, payloadText, headersText, timelineText string
	browseInert(t, []step{
		{"open the console", chromedp.Navigate(e.base + "/")},
		{"see the login form", chromedp.WaitVisible(`#token`, chromedp.ByID)},
		{"type the token", chromedp.SendKeys(`#token`, token, chromedp.ByID)},
		{"submit it", chromedp.Submit(`#token`, chromedp.ByID)},
		{"see the overview", chromedp.WaitVisible(`#pending`, chromedp.ByID)},
		{"open the events", chromedp.Navigate(e.base + "/events?state=dead")},
		{"see the event listed", chromedp.WaitVisible(`a.id`, chromedp.ByQuery)},
		{"open it", chromedp.Click(`a.id`, chromedp.ByQuery)},
		{"see its page", chromedp.WaitVisible(`#timeline`, chromedp.ByID)},
		{"read it", chromedp.Tasks{
			chromedp.Text(`#event-id`, &idText, chromedp.ByID),
			chromedp.Text(`pre.payload`, &payloadText, chromedp.ByQuery),
			chromedp.Text(`#headers`, &headersText, chromedp.ByID),
			chromedp.Text(`#timeline`, &timelineText, chromedp.ByID),
		}},
	})
	if idText != strings.ToValidUTF8(id, "\uFFFD") {
		t.Errorf("ID shown as %q, want %q", idText, id)
	}
	for what, got := range map[string]string{"payload": payloadText, "headers": headersText, "attempt": timelineText} {
		if !strings.Contains(got, `<script>window.pwned=1;`) || !strings.Contains(got, `<img src=x onerror=`) {
			t.Errorf("%s does not show the markup as text:\n%s", what, got)
		}
		if what != "attempt" && !strings.Contains(got, "\uFFFD") { // the attempt log keeps text only
			t.Errorf("%s does not show the invalid UTF-8 as U+FFFD:\n%q", what, got)
		}
	}
}

// A topic event's page, with its deliveries table, shows a hostile key,
// payload, headers and receiver's answer as inert text, in a real browser;
// the dead-letter list shows the delivery's topic and endpoint.
func TestHostileTopicEventIsInertInBrowser(t *testing.T) {
	e := newEnvWith(t, console.Config{}, func(r *http.Request, id string, n int) testkit.Reply {
		return testkit.Reply{Status: 500, Header: http.Header{"Content-Type": {"text/html"}}, Body: hostile}
	}, []outbox.Subscription{{Endpoint: "hooks", Topics: []string{"order.*"}}})
	id := "topic-<i>\"'"
	enqueueDead(t, e, outbox.Event{
		ID: id, Key: "k" + hostile, Topic: "order.paid", Payload: []byte(hostile),
		Headers: map[string]string{"X-Evil": hostile},
	})
	var listText, topicText, deliveriesText, mainText string
	browseInert(t, []step{
		{"open the dead letters of the topic", chromedp.Navigate(e.base + "/dead?topic=order.paid")},
		{"see the delivery listed", chromedp.WaitVisible(`a.id`, chromedp.ByQuery)},
		{"read the list", chromedp.Text(`tbody`, &listText, chromedp.ByQuery)},
		{"open it", chromedp.Click(`a.id`, chromedp.ByQuery)},
		{"see its deliveries", chromedp.WaitVisible(`#deliveries`, chromedp.ByID)},
		{"read it", chromedp.Tasks{
			chromedp.Text(`#event-topic`, &topicText, chromedp.ByID),
			chromedp.Text(`#deliveries`, &deliveriesText, chromedp.ByID),
			chromedp.Text(`main`, &mainText, chromedp.ByQuery),
		}},
	})
	if !strings.Contains(listText, "order.paid") || !strings.Contains(listText, "hooks") || !strings.Contains(listText, id) {
		t.Errorf("the dead-letter list does not show the delivery's ID, topic and endpoint:\n%s", listText)
	}
	if !strings.Contains(topicText, "order.paid") {
		t.Errorf("topic shown as %q", topicText)
	}
	if !strings.Contains(deliveriesText, "hooks") || !strings.Contains(deliveriesText, "dead") {
		t.Errorf("the deliveries table does not show hooks's dead delivery:\n%s", deliveriesText)
	}
	if !strings.Contains(mainText, `<script>window.pwned=1;`) || !strings.Contains(mainText, `<img src=x onerror=`) {
		t.Errorf("the page does not show the markup as text:\n%s", mainText)
	}
}

// The history page lists a delivered event whose key, payload and headers
// hold markup as inert text, its payload opened in place, in a real
// browser.
func TestHostileArchivedEventIsInertInBrowser(t *testing.T) {
	e := newEnvRetaining(t, console.Config{}, nil, []outbox.Subscription{{Endpoint: "hooks", Topics: []string{"order.*"}}}, time.Hour)
	deliverAll(t, e, 1, outbox.Event{
		ID: "kept-<i>\"'", Key: "k" + hostile, Topic: "order.paid", Payload: []byte(hostile),
		Headers: map[string]string{"X-Evil": hostile},
	})
	var archiveText string
	browseInert(t, []step{
		{"open the history of order.*", chromedp.Navigate(e.base + "/history?topic=order.*")},
		{"see the delivery listed", chromedp.WaitVisible(`#archive a.id`, chromedp.ByQuery)},
		{"open its payload", chromedp.Click(`details.archived summary`, chromedp.ByQuery)},
		{"see the payload", chromedp.WaitVisible(`details.archived pre.payload`, chromedp.ByQuery)},
		{"read the list", chromedp.Text(`#archive`, &archiveText, chromedp.ByQuery)},
	})
	for _, want := range []string{"kept-<i>", "order.paid", "hooks", "X-Evil", `<script>window.pwned=1;`, `<img src=x onerror=`} {
		if !strings.Contains(archiveText, want) {
			t.Errorf("the history does not show %q as text:\n%s", want, archiveText)
		}
	}
}
