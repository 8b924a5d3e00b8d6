package httpsink

import (
	"errors"
	"fmt"
	"net/netip"
)

// Sentinel errors. Match them with errors.Is; the typed errors below carry the
// details and unwrap to them.
var (
	// ErrUnknownEndpoint: the destination is neither a configured endpoint
	// name nor an absolute URL.
	ErrUnknownEndpoint = errors.New("httpsink: unknown endpoint")
	// ErrRawURLsNotAllowed: the destination is an absolute URL but
	// Config.AllowRawURLs is off.
	ErrRawURLsNotAllowed = errors.New("httpsink: raw URL destinations are not allowed")
	// ErrBadURL: the destination looks like a URL but is not an absolute
	// http or https URL with a host.
	ErrBadURL = errors.New("httpsink: bad destination URL")
	// ErrBlockedAddress: the dial-time guard refused to connect to a private,
	// loopback, link-local, metadata or otherwise non-public address.
	ErrBlockedAddress = errors.New("httpsink: address blocked")
	// ErrInvalidConfig: New was given a configuration it cannot use.
	ErrInvalidConfig = errors.New("httpsink: invalid config")
	// ErrInvalidPolicy: a policy rule could not be parsed.
	ErrInvalidPolicy = errors.New("httpsink: invalid policy rule")
	// ErrInvalidRequest: the event cannot be sent as an HTTP request (bad
	// method or header). It is dead-lettered: retrying cannot help.
	ErrInvalidRequest = errors.New("httpsink: invalid request")
	// ErrClosed: Deliver was called after Close.
	ErrClosed = errors.New("httpsink: sink closed")

	// Errors of Verifier.Verify, each wrapped with the detail.

	// ErrSignatureMissing: the delivery has no webhook-signature header.
	ErrSignatureMissing = errors.New("httpsink: no webhook-signature header")
	// ErrSignatureHeaders: webhook-id or webhook-timestamp is missing, or
	// the timestamp is not unix seconds.
	ErrSignatureHeaders = errors.New("httpsink: malformed signature headers")
	// ErrTimestampOutOfTolerance: webhook-timestamp is further from the
	// receiver's clock than the tolerance (an old delivery replayed, or a
	// clock that is off).
	ErrTimestampOutOfTolerance = errors.New("httpsink: timestamp outside the tolerance")
	// ErrSignatureMismatch: no signature in webhook-signature was made with
	// the secrets over this webhook-id, webhook-timestamp and payload.
	ErrSignatureMismatch = errors.New("httpsink: signature does not match")
)

// DestinationError says why a destination cannot be delivered to. It unwraps
// to ErrUnknownEndpoint, ErrRawURLsNotAllowed or ErrBadURL.
type DestinationError struct {
	// Destination as given, with URL credentials and query values redacted.
	Destination string
	// Reason is a short explanation.
	Reason string
	// Err is the sentinel.
	Err error
}

func (e *DestinationError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("%v: %q", e.Err, e.Destination)
	}
	return fmt.Sprintf("%v: %q: %s", e.Err, e.Destination, e.Reason)
}

// Unwrap returns the sentinel.
func (e *DestinationError) Unwrap() error { return e.Err }

// BlockedAddressError is returned by the dial-time guard. It names the
// address that was refused and why, and the settings that allow it (the
// outboxd flags and options as well as the Go fields); it unwraps to
// ErrBlockedAddress.
type BlockedAddressError struct {
	// Addr is the resolved address the dialer was about to connect to.
	Addr netip.Addr
	// Reason names the range, e.g. "loopback" or "cloud metadata".
	Reason string
}

func (e *BlockedAddressError) Error() string {
	return fmt.Sprintf("httpsink: refusing to connect to %s (%s address); allow it with the endpoint's allow-private option "+
		"(outboxd: --endpoint NAME=URL,allow-private or allow_private: true in the file) or for every endpoint with --allow-private-networks "+
		"(Go: Endpoint.AllowPrivate, Config.AllowPrivateNetworks, Config.AllowedNetworks)", e.Addr, e.Reason)
}

// Unwrap returns ErrBlockedAddress.
func (e *BlockedAddressError) Unwrap() error { return ErrBlockedAddress }

// ConfigError names the Config field New refused. It unwraps to
// ErrInvalidConfig (and to the underlying cause, if any).
type ConfigError struct {
	// Field is the path of the field, e.g. "Endpoints[2].Secrets[0]".
	Field string
	// Reason says what is wrong, never quoting a secret.
	Reason string
	// Err is the underlying cause, if any.
	Err error
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("httpsink: config: %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalidConfig and the cause.
func (e *ConfigError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidConfig, e.Err}
	}
	return []error{ErrInvalidConfig}
}

// PolicyError names a policy rule that could not be parsed. It unwraps to
// ErrInvalidPolicy.
type PolicyError struct {
	Rule   string // the rule as given
	Reason string // what is wrong with it
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("httpsink: invalid policy rule %q: %s", e.Rule, e.Reason)
}

// Unwrap returns ErrInvalidPolicy.
func (e *PolicyError) Unwrap() error { return ErrInvalidPolicy }

// DeliveryError is the Result.Err of an attempt that got no usable response:
// a transport failure, a timeout, a refused address or an event that cannot be
// turned into a request. The URL is redacted (no credentials, no query
// values) and no header value is ever included.
type DeliveryError struct {
	// Endpoint is the endpoint name or raw-URL key.
	Endpoint string
	// Method and URL (redacted) of the request.
	Method, URL string
	// Attempts is the number of HTTP requests made, inline retries included.
	Attempts int
	// Err is the cause, e.g. a *net.OpError, context.DeadlineExceeded, or a
	// *BlockedAddressError.
	Err error
}

func (e *DeliveryError) Error() string {
	s := fmt.Sprintf("%s %s", e.Method, e.URL)
	if e.Attempts > 1 {
		s += fmt.Sprintf(" (%d attempts)", e.Attempts)
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *DeliveryError) Unwrap() error { return e.Err }
