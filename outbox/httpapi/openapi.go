package httpapi

import (
	"bytes"
	_ "embed"
	"net/http"
)

// OpenAPIPath is where the handler serves its OpenAPI document. It is
// served without the token: the document holds nothing secret, and
// clients and tools read it before they have one.
const OpenAPIPath = "/v1/openapi.json"

//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3.1 document of the API, as JSON: every
// route New serves, with its bodies, answers and errors, and the routes
// outboxd serves beside it (/metrics, /healthz, /readyz), tagged
// "outboxd". It is what GET /v1/openapi.json answers.
func OpenAPI() []byte { return bytes.Clone(openAPIDoc) }

// openAPI serves GET /v1/openapi.json.
func (h *handler) openAPI(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(openAPIDoc)
	}
}
