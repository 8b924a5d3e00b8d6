// Package powerfs is a filesystem for tests that loses power on demand: a
// FUSE mount (Linux only) whose files behave as on a real disk between two
// fsyncs, and whose Cut drops everything that was not synced, as a power
// failure does.
//
// What stays pending, and what makes it durable:
//
//   - A file's writes and truncations stay pending until that file is
//     synced (fsync or fdatasync). Syncing a file makes all of its pending
//     changes durable, in order.
//   - A directory's names (creates, mkdirs, unlinks, rmdirs, renames into
//     and out of it) stay pending until that directory is synced. Syncing a
//     directory makes its whole current list of names durable. A file whose
//     data was synced but whose name never was is gone after a cut, as is a
//     rename whose directory was not synced (the old name is back).
//
// Until a cut, every process sees the current state: pending changes are
// visible, as the page cache makes them visible on a real disk. Cut drops
// every pending change; with CutOptions it can instead keep a random prefix
// of each file's pending writes (a disk that wrote some of them before the
// power went) and tear the first write it drops (part of it lands, cut
// inside its last 4 KiB page), both drawn from the caller's seeded
// generator, so that the same seed and the same history cut the same way.
// After a cut the mount is reopened on the durable state alone.
//
// Durable file contents live in the backing directory (one file per inode,
// named by its inode number); the durable and current names, and the
// pending changes, live in the memory of the test process. The backing
// files are not synced themselves: the process that holds the FS is the
// "disk" and does not lose power.
//
// # Page cache and mmap
//
// bbolt reads its file through a shared read-only mmap and writes it with
// pwrite. The mount keeps the kernel's page cache, in its write-through
// mode (go-fuse does not ask for the writeback cache): every write reaches
// this filesystem before the write call returns, and updates the cached
// pages that an mmap of the same file maps, so reads through the map see
// the bytes written through the mount. Direct I/O is not used, because a
// shared mmap of a file opened with direct I/O is refused by kernels before
// 6.6. The cache cannot outlive a cut: Cut unmounts and mounts anew, which
// drops every cached page and dentry of the old state. The test
// TestMmapSeesWrites checks the coherence.
//
// Cut needs that no process holds a file open on the mount (a power cut
// takes the processes with it: kill them first). Mounting needs /dev/fuse
// and either root (the mount system call) or fusermount3.
//
// The process that holds the FS serves the mount, and must not map a file
// of it into its own memory (bbolt does, to read): a page fault on the map
// is not a system call, so the Go runtime cannot stop that thread for a
// garbage collection, which then waits forever for the server it stopped.
// Read such files in a child process, or copy them out of the mount first
// (reads and writes through system calls are fine).
package powerfs
