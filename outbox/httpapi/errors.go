package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
)

// apiError is a client-facing error with the HTTP status it is answered with.
type apiError struct {
	status     int
	msg        string
	retryAfter int // seconds; 0: no Retry-After header
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, msg string) *apiError { return &apiError{status: status, msg: msg} }

// errorBody is the JSON shape of every error answer.
type errorBody struct {
	Error string `json:"error"`
}

// writeJSON answers with status and v encoded as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own response types are encoded here; they always marshal.
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal error encoding the response"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError answers with status and {"error": msg}.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

// asAPIError reports whether err is (or wraps) an *apiError.
func asAPIError(err error) (*apiError, bool) {
	var ae *apiError
	ok := errors.As(err, &ae)
	return ae, ok
}
