package scheduler

import "errors"

// ErrClosed is returned by [Scheduler.Schedule] once [Scheduler.Close] has been called.
var ErrClosed = errors.New("scheduler: closed")

// ErrInvalid is wrapped by every error [Scheduler.Schedule] returns for bad arguments
// (non-positive interval, nil func, unknown [Type], bad jitter); the message names the argument.
var ErrInvalid = errors.New("scheduler: invalid argument")
