package httpapi

import (
	"net/http"
	"slices"
)

// Route is one route of the API: a method and a path pattern, written as
// http.ServeMux and OpenAPI both write them ("/v1/events/{id}").
type Route struct {
	// Method is GET, POST, PUT or DELETE (a GET route also answers HEAD).
	Method string
	// Path is the path pattern, with {name} for a path segment.
	Path string
}

// String returns the route as an http.ServeMux pattern: "GET /v1/stats".
func (r Route) String() string { return r.Method + " " + r.Path }

// apiRoute is a route with the method of handler that serves it.
type apiRoute struct {
	Route
	serve func(*handler, http.ResponseWriter, *http.Request)
}

// apiRoutes are the routes New mounts, and all of them: New builds its mux
// from this table, Routes returns it, and the tests hold it against the
// OpenAPI document, so a route cannot be added without being documented.
var apiRoutes = []apiRoute{
	{Route{http.MethodPost, "/v1/events"}, (*handler).tracedEnqueue},
	{Route{http.MethodGet, "/v1/events"}, (*handler).list},
	{Route{http.MethodGet, "/v1/events/{id}"}, (*handler).get},
	{Route{http.MethodDelete, "/v1/events/{id}"}, (*handler).delete},
	{Route{http.MethodPost, "/v1/events/{id}/replay"}, (*handler).replay},
	{Route{http.MethodGet, "/v1/events/{id}/attempts"}, (*handler).attempts},
	{Route{http.MethodPost, "/v1/dead/replay"}, (*handler).replayDead},
	{Route{http.MethodGet, "/v1/endpoints"}, (*handler).endpoints},
	{Route{http.MethodGet, "/v1/endpoints/{name}"}, (*handler).endpoint},
	{Route{http.MethodPost, "/v1/endpoints/{name}"}, (*handler).createEndpoint},
	{Route{http.MethodPut, "/v1/endpoints/{name}"}, (*handler).replaceEndpoint},
	{Route{http.MethodDelete, "/v1/endpoints/{name}"}, (*handler).deleteEndpoint},
	{Route{http.MethodPost, "/v1/endpoints/{name}/rotate-secret"}, (*handler).rotateSecret},
	{Route{http.MethodPost, "/v1/endpoints/{name}/enable"}, (*handler).enable},
	{Route{http.MethodPost, "/v1/endpoints/{name}/retry"}, (*handler).retryEndpoint},
	{Route{http.MethodGet, "/v1/archive"}, (*handler).archive},
	{Route{http.MethodPost, "/v1/archive/replay"}, (*handler).replayArchive},
	{Route{http.MethodGet, "/v1/archive/replay/{id}"}, (*handler).archiveReplayStatus},
	{Route{http.MethodDelete, "/v1/archive/replay/{id}"}, (*handler).cancelArchiveReplay},
	{Route{http.MethodGet, "/v1/stats"}, (*handler).stats},
	{Route{http.MethodGet, OpenAPIPath}, (*handler).openAPI},
}

// Routes returns the routes New serves, in the order it mounts them. A
// path of these answers its other methods with 405, and every other path
// with 404. OpenAPI lists them all.
func Routes() []Route {
	out := make([]Route, len(apiRoutes))
	for i, r := range apiRoutes {
		out[i] = r.Route
	}
	return out
}

// mount registers routes on a new mux, each path's other methods answered
// 405, and the rest 404. It returns the mux and every pattern it
// registered, in order.
func (h *handler) mount(routes []apiRoute) (*http.ServeMux, []string) {
	mux := http.NewServeMux()
	var patterns, paths []string
	handle := func(pattern string, hd http.Handler) {
		mux.Handle(pattern, hd)
		patterns = append(patterns, pattern)
	}
	methods := map[string][]string{}
	for _, rt := range routes {
		handle(rt.String(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rt.serve(h, w, r) }))
		if _, ok := methods[rt.Path]; !ok {
			paths = append(paths, rt.Path)
		}
		methods[rt.Path] = append(methods[rt.Path], rt.Method)
	}
	order := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete}
	for _, p := range paths {
		allow := slices.Clone(methods[p])
		slices.SortStableFunc(allow, func(a, b string) int { return slices.Index(order, a) - slices.Index(order, b) })
		handle(p, MethodNotAllowed(allow...))
	}
	handle("/", NotFound())
	return mux, patterns
}
