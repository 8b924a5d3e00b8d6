package httpapi

import "github.com/outboxd/outbox/outbox"

// oneEndpointOut is the answer of GET /v1/endpoints/{name}: the endpoint
// as the list shows it, and its part of the backfill.
type oneEndpointOut struct {
	endpointOut
	Backfill *endpointBackfillOut `json:"backfill,omitempty"`
}

// endpointBackfillOut is the "backfill" object of GET
// /v1/endpoints/{name} (outbox.EndpointBackfill).
type endpointBackfillOut struct {
	Running    bool   `json:"running"`
	Deliveries uint64 `json:"deliveries"`
}

// backfiller is the optional capability of a Backend that reports the
// backfill per endpoint, as *outbox.Outbox does.
type backfiller interface {
	EndpointBackfill(endpoint string) outbox.EndpointBackfill
}

// endpointBackfill returns the endpoint's part of the backfill, or nil
// when the Backend does not tell it.
func (h *handler) endpointBackfill(name string) *endpointBackfillOut {
	b, ok := h.o.(backfiller)
	if !ok {
		return nil
	}
	eb := b.EndpointBackfill(name)
	return &endpointBackfillOut{Running: eb.Running, Deliveries: eb.Deliveries}
}
