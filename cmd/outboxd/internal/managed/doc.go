// Package managed keeps outboxd's endpoints managed at run time: those
// created, replaced, deleted and given a new secret through the HTTP API
// (httpapi.EndpointManager), next to the static ones of the settings,
// which it describes but never changes.
//
// A managed endpoint is stored in the outbox's file, in the application
// bucket "outboxd_endpoints" (one JSON value per name, secrets included:
// the file is the trust boundary, as it is for the events), and applied
// to the running sink (httpsink.Sink.PutEndpoint), rate limits
// (outbox.RateLimits.Set) and subscriptions (outbox.Outbox.SetSubscriptions).
// Open loads them before delivery starts, so after a restart, SIGKILL
// included, every acknowledged change is in force.
//
// Each change is stored first and applied second, so a change that was
// answered is durable; a crash between the two applies it at the next
// start. A deletion works the other way round: the endpoint is
// unsubscribed and removed from the sink (events naming it are refused
// from then on), its pending deliveries become dead letters with the
// reason `endpoint "NAME" deleted` (outbox.Outbox.DeadLetterEndpoint),
// and only then is its definition deleted from the file, so that a crash
// part way leaves it defined, and the DELETE can be sent again.
//
// Secrets are Standard Webhooks secrets: "whsec_" and the base64 of 32
// random bytes, generated on creation and rotation and returned only then.
// A rotation keeps the previous secret signing (httpsink.RetiringSecret)
// until its grace ends; at most MaxRetiringSecrets are kept retiring.
package managed
