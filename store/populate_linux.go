package store

import "syscall"

// mapPopulate reads a mapping in ahead, sparing a page fault per page of a
// walk over the whole file.
const mapPopulate = syscall.MAP_POPULATE
