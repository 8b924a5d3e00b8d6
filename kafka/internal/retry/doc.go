// Package retry paces the retries of the package kafka's loops: an
// exponential backoff between two bounds that never gives up, and a wait
// that ends early when its context does.
package retry
