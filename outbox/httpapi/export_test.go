package httpapi

import (
	"net/http"
	"slices"
)

// MountedPatterns returns every pattern h, a handler of New, registered on
// its mux, in order.
func MountedPatterns(h http.Handler) []string { return slices.Clone(h.(*handler).patterns) }

// NewWithExtraRoutes is New with extra routes mounted after the API's
// (answering 204), as a change that adds a route would mount them.
func NewWithExtraRoutes(o Backend, cfg Config, extra ...Route) http.Handler {
	h := New(o, cfg).(*handler)
	routes := slices.Clone(apiRoutes)
	for _, r := range extra {
		routes = append(routes, apiRoute{r, func(_ *handler, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		}})
	}
	h.mux, h.patterns = h.mount(routes)
	return h
}
