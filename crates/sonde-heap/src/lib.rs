//! sonde and its allocator. [`one_arena`]: what a process that runs for months sets first;
//! [`give_back`]: what it calls after freeing a burst.
//!
//! A counting global allocator for sonde's memory and allocation tests: it forwards every call
//! to the system allocator unchanged and counts the calls that hand out memory (`alloc`,
//! `realloc`) and the bytes live. A test binary installs it once:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: sonde_heap::Counting = sonde_heap::Counting;
//! ```
//!
//! and reads [`allocations`] or [`live_bytes`] before and after what it measures. Counters are
//! process-wide: a test that reads them runs as the only test function of its binary.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, AtomicU64, Ordering};

/// Keeps glibc's malloc to one arena for the rest of the process, unless the operator set
/// `MALLOC_ARENA_MAX`; elsewhere (not glibc) it does nothing. For the commands that run for
/// months (`monitor`, `serve`), called before their threads start.
///
/// glibc gives threads arenas of their own (up to eight per core). In a monitor, the reader,
/// the collector, the exporters and the HTTP server's threads each allocate and free in theirs,
/// and memory freed in bursts (a chunk's flow lines once written, the live view's tables at
/// each drain) stays with the arena it was freed to: the soak (docs/reliability.md) saw the
/// resident memory of a monitor at 14,000 packets/s creep up by about 50 MB an hour with the
/// default, and hold flat with one arena (`MALLOC_ARENA_MAX=1`), while jemalloc and mimalloc
/// (preloaded) still grew. Small allocations go through each thread's cache (tcache) first,
/// so the one arena's lock is taken rarely.
pub fn one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt(3) sets a parameter of the allocator, which locks what it changes;
        // it takes no pointer.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}

/// Gives the memory malloc holds free back to the system: every whole free page of every
/// arena (glibc's `malloc_trim(0)`); elsewhere (not glibc) it does nothing. For the moments a
/// long run has just freed a burst: a monitor's spool, once a chunk is written.
///
/// With one arena the resident memory of a monitor still rose after its warm-up (a soak at
/// 14,500 packets/s, docs/reliability.md: +4 MB in its first half hour, flat after): glibc
/// returns only the free space at the top of the heap, and the free space below live
/// allocations, left by a chunk's flow lines and the live view's tables, stays resident until
/// the pieces are used again. Called once a chunk, it costs nothing per packet.
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim(3) locks each arena it walks; it takes no pointer.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The system allocator, counted.
pub struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

/// Calls that handed out memory (`alloc` and `realloc`) since the process started.
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Bytes allocated and not yet freed (as the layouts asked for them, without the allocator's
/// own rounding and headers).
pub fn live_bytes() -> isize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

// SAFETY: forwards to the system allocator unchanged; only counts calls and bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for this call is the one GlobalAlloc gives System.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for this call is the one GlobalAlloc gives System.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for this call is the one GlobalAlloc gives System.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
