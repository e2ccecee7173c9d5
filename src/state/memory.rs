//! The process's memory around the state (issue 25 item 7): what sled's writes replaced is
//! handed on to be freed after each flush, what the allocator holds free goes back to the
//! system after each delivery, and `lotsync run` allocates in two glibc arenas.
//!
//! sled frees a tree node it replaced only once no thread can still be reading it: each write
//! puts the old node (and a full 512 KiB log buffer, when it fills one) in a bag of the writing
//! thread, a bag goes to a shared queue only once it holds 64, and the queue is freed a few bags
//! at a time. So a transaction keeps everything it replaced until it ends (about 4 KiB a write:
//! 80 MiB for the 20,000 writes of a 5,000-vehicle lot's first plan), and while files kept
//! coming the daemon's heap grew by some 45 MiB over 50 files, falling back only once it was
//! idle (heaptrack; after a flush that hands the bag on, it stays level over 400 files). What
//! is freed, glibc keeps in its heaps, between the blocks still in use, giving back only a
//! heap's free top; and it gives threads that allocate at once heaps of their own (up to 8 a
//! core), each keeping its own free pages.
//!
//! Measured with `examples/soak_bench` and heaptrack. It owns neither the database (the parent
//! module) nor when a delivery ends (the daemon).

/// Hands this thread's bag of what sled's writes replaced on to be freed, and frees what no
/// thread can reach any more. After every flush of the state.
pub(crate) fn collect_garbage() {
    // `sled::pin` is sled's epoch guard: crossbeam-epoch's, with which sled defers freeing its
    // nodes and log buffers (sled is held at 0.34, whose guard this is). Flushing it moves this
    // thread's bag to the shared queue and frees the bags no thread can reach.
    sled::pin().flush();
}

/// Frees what sled deferred, then gives the memory the allocator holds free back to the
/// system (glibc's `malloc_trim`). After each delivery: a few milliseconds (50 the first time
/// after a 5,000-vehicle plan); the trim is nothing on other C libraries.
pub fn return_free_memory() {
    // One collection frees at most 8 bags, and only those two epochs old: several rounds.
    for _ in 0..64 {
        collect_garbage();
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::os::raw::c_int;
        }
        // SAFETY: malloc_trim takes no pointer and only releases free pages of glibc's own
        // heaps, under their locks: it may be called from any thread at any time.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// At most two glibc heaps for the whole process (`M_ARENA_MAX`), however many threads
/// allocate at once: what one thread frees is then reused by the others instead of being
/// kept apart. Called first thing by `lotsync run` (the systemd units also set
/// `MALLOC_ARENA_MAX=2`, which this makes the daemon's own); nothing on other C libraries.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn mallopt(
                param: std::os::raw::c_int,
                value: std::os::raw::c_int,
            ) -> std::os::raw::c_int;
        }
        /// glibc's `M_ARENA_MAX` (malloc.h).
        const M_ARENA_MAX: std::os::raw::c_int = -8;
        // SAFETY: mallopt takes two integers and changes only glibc's own settings; a
        // setting it refuses is left as it was.
        unsafe {
            mallopt(M_ARENA_MAX, 2);
        }
    }
}
