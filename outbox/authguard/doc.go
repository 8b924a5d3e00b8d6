// Package authguard slows down the guessing of a bearer token, for the
// HTTP API (package httpapi) and the web console (package console), which
// share one Guard so that guesses at either count for both.
//
// Each wrong token from a client address holds its answer back for a
// delay that doubles with each consecutive wrong token from that address,
// from Config.BaseDelay up to Config.MaxDelay; the answers of one address
// go out one delay apart however many connections it opens. The right
// token is never delayed, even from an address being delayed, and resets
// the address. Only a bounded number of answers are held back at once
// (a few per address, Config.MaxWaiting in all) and only
// Config.MaxAddresses addresses are tracked, so guessing cannot exhaust
// memory or goroutines: past those bounds a request from an address with
// wrong tokens behind it is answered Throttled (429) without its token
// being compared, so it learns nothing. A held-back answer waits in its
// request's goroutine and ends early when the request's context does.
//
// The first wrong token of a burst (an address with no wrong token for
// Config.Forget) is logged once, with the address and never the token.
// Failures counts the wrong tokens, for a metrics collector to read.
//
// The client address is the connection's peer; X-Forwarded-For and
// X-Forwarded-Proto are believed only from Config.TrustedProxies.
package authguard
