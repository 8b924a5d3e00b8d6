package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/outboxd/outbox/outbox/httpapi"
)

// Without an EndpointManager the API changes no endpoint: every
// management call is a 409 saying so, and GET
// shows the states without definitions.
func TestEndpointManagementWithoutManager(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL})
	for _, tc := range []struct {
		method, path, body string
	}{
		{http.MethodPost, "/v1/endpoints/billing", `{"url": "https://example.com/hook"}`},
		{http.MethodPut, "/v1/endpoints/orders", `{"url": "https://example.com/hook"}`},
		{http.MethodDelete, "/v1/endpoints/orders", ""},
		{http.MethodPost, "/v1/endpoints/orders/rotate-secret", ""},
	} {
		ct := ""
		if tc.body != "" {
			ct = "application/json"
		}
		code, body := e.do(t, tc.method, tc.path, ct, []byte(tc.body))
		if msg, _ := body["error"].(string); code != http.StatusConflict || !strings.Contains(msg, "not managed through the API") {
			t.Errorf("%s %s: %d %v; want 409 saying endpoints are not managed here", tc.method, tc.path, code, body)
		}
	}
	code, body := e.get(t, "/v1/endpoints/orders")
	if code != http.StatusOK || body["name"] != "orders" || body["managed"] != nil {
		t.Errorf("GET /v1/endpoints/orders: %d %v; want the state alone", code, body)
	}
	if code, body := e.get(t, "/v1/endpoints/nobody"); code != http.StatusNotFound {
		t.Errorf("GET /v1/endpoints/nobody: %d %v; want 404", code, body)
	}
	if code, body := e.get(t, "/v1/endpoints/orders/rotate-secret"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET rotate-secret: %d %v; want 405", code, body)
	}
}
