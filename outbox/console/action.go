package console

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/outboxd/outbox/outbox"
)

// maxFormBytes bounds an action's form.
const maxFormBytes = 16 << 10

// confirmData is the confirmation step of an action.
type confirmData struct {
	Question string
	Fields   []pair // the form's values, posted again with confirm=yes
	Back     string
	Danger   bool
}

// action serves POST <path>/action: the form names the action in "do" and
// carries the CSRF token bound to the session (or browser). A first post
// shows a confirmation; the confirmed post ("confirm=yes") acts.
func (c *Console) action(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, http.StatusBadRequest, "unreadable form: "+err.Error())
		return
	}
	id := c.identity(w, r, false)
	if c.cfg.Token != "" && id == "" {
		c.toLogin(w, r)
		return
	}
	if !c.checkCSRF(r, id) {
		c.fail(w, r, http.StatusForbidden, "missing or wrong CSRF token: reload the page and try again")
		return
	}
	f := r.PostForm
	do := f.Get("do")
	question, back, err := c.describe(do, f)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if f.Get("confirm") != "yes" {
		var fields []pair
		for _, k := range slices.Sorted(maps.Keys(f)) {
			if k == "csrf" || k == "confirm" {
				continue
			}
			fields = append(fields, pair{k, f.Get(k)})
		}
		c.render(w, r, http.StatusOK, "confirm", "", pageData{Title: "Confirm", Data: confirmData{
			Question: text(question), Fields: fields, Back: back, Danger: do == "delete",
		}})
		return
	}
	to, err := c.act(r, do, f)
	if err != nil {
		status := errStatus(err)
		var br badRequest
		if errors.As(err, &br) {
			status = http.StatusBadRequest
		} else if status == http.StatusInternalServerError {
			c.cfg.Logger.Error("console: action failed", "action", do, "err", err)
		}
		c.fail(w, r, status, err.Error())
		return
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// describe checks an action's fields and says what it will do, and where
// Cancel leads.
func (c *Console) describe(do string, f url.Values) (question, back string, err error) {
	id, name := f.Get("id"), f.Get("name")
	eventURL := c.base + "/event?" + url.Values{"id": {id}}.Encode()
	switch do {
	case "replay", "delete":
		if id == "" {
			return "", "", badRequest{"id: missing"}
		}
		if ep := f.Get("endpoint"); ep != "" {
			verb := "Replay the dead delivery of event %q to endpoint %q: move it back to pending, attempts reset? The event's other deliveries are untouched."
			if do == "delete" {
				verb = "Delete the delivery of event %q to endpoint %q? It cannot be brought back; the event's other deliveries are untouched."
			}
			return fmt.Sprintf(verb, id, ep), eventURL, nil
		}
		verb := "Replay dead event %q: move it back to pending, attempts reset?"
		if do == "delete" {
			verb = "Delete event %q? It cannot be brought back."
		}
		if f.Get("topic") != "" { // the event page's forms of a topic event say so
			verb = "Replay every dead delivery of event %q: move them back to pending, attempts reset?"
			if do == "delete" {
				verb = "Delete event %q and every one of its deliveries? They cannot be brought back."
			}
		}
		return fmt.Sprintf(verb, id), eventURL, nil
	case "replay-dead":
		rf, err := replayFilter(f)
		if err != nil {
			return "", "", err
		}
		return "Replay " + describeFilter(rf) + "?", c.base + "/dead", nil
	case "enable", "retry":
		if name == "" {
			return "", "", badRequest{"name: missing"}
		}
		if do == "enable" {
			return fmt.Sprintf("Enable endpoint %q: lift its throttle, close its breaker, and make its pending events due now?", name), c.base + "/endpoints", nil
		}
		rate, err := formRate(f)
		if err != nil {
			return "", "", err
		}
		return fmt.Sprintf("Retry endpoint %q now: make its pending events due at %g per second?", name, rate), c.base + "/endpoints", nil
	}
	return "", "", badRequest{fmt.Sprintf("do: unknown action %q", do)}
}

// act performs a confirmed action and returns where to go next.
func (c *Console) act(r *http.Request, do string, f url.Values) (string, error) {
	ctx := r.Context()
	id, name, ep := f.Get("id"), f.Get("name"), f.Get("endpoint")
	switch do {
	case "replay":
		if ep != "" {
			if err := c.b.ReplayDelivery(ctx, id, ep); err != nil {
				return "", err
			}
			return c.base + "/event?" + url.Values{"id": {id}, "done": {"replayed-delivery"}}.Encode(), nil
		}
		if err := c.b.Replay(ctx, id); err != nil {
			return "", err
		}
		return c.base + "/event?" + url.Values{"id": {id}, "done": {"replayed"}}.Encode(), nil
	case "delete":
		if ep != "" {
			if err := c.b.DeleteDelivery(ctx, id, ep); err != nil {
				return "", err
			}
			return c.base + "/event?" + url.Values{"id": {id}, "done": {"deleted-delivery"}}.Encode(), nil
		}
		if err := c.b.Delete(ctx, id); err != nil {
			return "", err
		}
		return c.base + "/dead?done=deleted", nil
	case "replay-dead":
		rf, err := replayFilter(f)
		if err != nil {
			return "", err
		}
		if err := c.startReplay(rf, describeFilter(rf)); err != nil {
			return "", badRequest{err.Error()}
		}
		return c.base + "/dead?done=replay-started", nil
	case "enable":
		if err := c.b.EnableEndpoint(ctx, name); err != nil {
			return "", err
		}
		return c.base + "/endpoints?done=enabled", nil
	case "retry":
		rate, err := formRate(f)
		if err != nil {
			return "", err
		}
		n, err := c.b.RetryEndpoint(ctx, name, rate)
		if err != nil {
			return "", err
		}
		return c.base + "/endpoints?done=retried&n=" + strconv.Itoa(n), nil
	}
	return "", badRequest{fmt.Sprintf("do: unknown action %q", do)}
}

func formRate(f url.Values) (float64, error) {
	s := strings.TrimSpace(f.Get("rate"))
	if s == "" {
		return outbox.DefaultReplayRate, nil
	}
	rate, err := strconv.ParseFloat(s, 64)
	if err != nil || rate <= 0 || rate > 1e6 {
		return 0, badRequest{fmt.Sprintf("rate: %q is not a number of events per second between 0 and 1000000", s)}
	}
	return rate, nil
}

// replayFilter reads the replay-by-filter form.
func replayFilter(f url.Values) (outbox.ReplayFilter, error) {
	var rf outbox.ReplayFilter
	rf.Destination = strings.TrimSpace(f.Get("destination"))
	rf.KeyPrefix = f.Get("key")
	rf.Topic = strings.TrimSpace(f.Get("topic"))
	if rf.Topic != "" {
		if err := outbox.ValidateTopic(rf.Topic); err != nil {
			return rf, badRequest{fmt.Sprintf("topic: %q %v", text(rf.Topic), err)}
		}
	}
	var err error
	if s := strings.TrimSpace(f.Get("status")); s != "" {
		if rf.Status, err = strconv.Atoi(s); err != nil || rf.Status < 100 || rf.Status > 599 {
			return rf, badRequest{fmt.Sprintf("status: %q is not an HTTP status", s)}
		}
	}
	if s := strings.TrimSpace(f.Get("limit")); s != "" {
		if rf.Limit, err = strconv.Atoi(s); err != nil || rf.Limit < 0 {
			return rf, badRequest{fmt.Sprintf("limit: %q is not a whole number", s)}
		}
	}
	if rf.From, err = parseTime("from", f.Get("from")); err != nil {
		return rf, err
	}
	if rf.To, err = parseTime("to", f.Get("to")); err != nil {
		return rf, err
	}
	if rf.Rate, err = formRate(f); err != nil {
		return rf, err
	}
	return rf, nil
}
