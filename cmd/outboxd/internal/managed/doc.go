// Package managed keeps outboxd's endpoints managed at run time: those
// created, replaced, deleted and given a new secret through the HTTP API
// (httpapi.EndpointManager), next to the static ones of the settings,
// which it describes but never changes.
//
// On one machine (Open) a managed endpoint is stored in the outbox's
// file, in the application bucket "outboxd_endpoints" (one JSON value per
// name, secrets included: the file is the trust boundary, as it is for
// the events), and applied to the running sink (httpsink.Sink.PutEndpoint), rate limits
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
//
// # In a Kafka group
//
// In group mode (NewGroup) the managed endpoints belong to the group: each
// change is a record of the group's table (kafka.Table), key
// RecordPrefix+name, which every member applies in offset order
// (ApplyRecord) to its sink, its rate limits and the subscriptions of every
// partition store it owns (Prepare puts them in a store before it starts;
// later changes reach it too). A deletion dead-letters the endpoint's
// deliveries in each member's own stores, and in the stores it is assigned
// later. An API call writes its record and answers once this member has
// applied it.
//
// A record is a compare-and-set: it carries the revision it expects to
// replace and applies only if that is the one in force, so that of two
// changes made at once on two members, the one earlier in the topic
// applies and the other is ignored by every member. Its writer then judges
// its call again against what is in force, as one machine would have
// after the first: a creation of a name that now exists is
// ErrEndpointExists, a change of one deleted meanwhile outbox.ErrNotFound,
// and a replacement or rotation is written again on top. Because
// compaction keeps only a name's last record, a change that did not apply
// is followed by a restatement of what is in force (written by its writer,
// or at the next start of any member); and the first record read of a name
// is taken as it is, since compaction may have removed those before it.
//
// The secrets in a record are sealed with AES-256-GCM under the group's
// key (LoadKey: the file of the setting endpoint_secret_key_file), with a
// random nonce and the record's key as additional data; the rest of the
// definition is in the clear. A member without the key, or with another,
// refuses to start once an endpoint in force has secrets it cannot open
// (Attach fails with ErrKey), and a member without a key refuses to create
// endpoints. Neither the key nor a secret is ever logged.
package managed
