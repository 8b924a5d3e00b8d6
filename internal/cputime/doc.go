// Package cputime reads the CPU time the current process has used, user
// plus system, so that benchmarks can report CPU per operation beside
// wall-clock rates: on a shared machine a rate moves with the load, while
// the CPU an operation costs stays put.
package cputime
