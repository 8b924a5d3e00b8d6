// Package testkit holds the helpers that tests in several packages of this
// module share, so that each fault they inject and each wait is written once:
//
//   - damaging a database file in place, at a page found from bbolt's own
//     page layout ([LeafPages], [MiddleValueOffset], [LastValueEnd],
//     [Overwrite], [Junk]);
//   - a log or output destination that goroutines and processes write while
//     the test reads it ([Buffer]);
//   - a client that sends a request's headers and then its body at the
//     test's pace, or never ([StartSlowPost]);
//   - waiting for a condition with a deadline ([WaitFor], and [Poll] for a
//     caller that decides what a timeout means);
//   - a loopback address nothing listens on ([FreePort], [FreeAddr]);
//   - a TCP proxy that adds latency, a bandwidth cap, a black hole or
//     resets between a process and what it talks to ([Link]), and a front
//     that a one-broker Kafka cluster advertises, which sends each Kafka
//     client's connections through a Link of its own ([KafkaFront]);
//   - a loopback receiver of deliveries that records each request by ID
//     and answers as the test decides ([Receiver]);
//   - a fake clock with timers, moved by hand ([Clock]);
//   - building a main package once per test process, under -race when the
//     test is ([Build], [BuildBinary], [RemoveBinaries]), or running the
//     test binary again as a child ([TestBinary]), with the output
//     captured or read line by line as it comes and the exit awaited
//     ([StartProcess], [StartLines]);
//   - on Linux, pointing an open file descriptor at another file, so that a
//     store's real writes fail the way a full or broken disk makes them fail
//     ([RedirectFD]).
//
// It is a normal package so that any test can import it, but it is meant
// for tests only: its functions report through a [testing.TB] and stop the
// test on an error. It imports no package of this module, so that the tests
// of every package, the store's own included, can use it.
package testkit
