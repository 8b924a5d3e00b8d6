//go:build unix && !linux

package store

// mapPopulate is Linux's MAP_POPULATE; elsewhere pages are faulted in as read.
const mapPopulate = 0
