//! Keeping the long-running processes' resident memory close to what they hold.
//!
//! The agent decodes every watch event of its cluster (3 GB of pod events during a rotation
//! of the 5,000-node scale scenario) and keeps a few tens of megabytes of it. With glibc's
//! allocator, each thread that allocates under contention gets an arena of its own, and freed
//! memory stays in the arena it came from: the process's resident size then follows the
//! transient decoding spread over arenas rather than what the index holds. Two arenas and a
//! periodic `malloc_trim` (which hands free pages of every arena back to the kernel) keep it
//! near the live heap; `cargo bench --bench figures -- agent_scale` measures the result ("Sizing" in
//! docs/operations.md). Elsewhere (musl, other systems) these are no-ops.

use std::time::Duration;

/// How often free heap pages are returned to the kernel.
pub const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Caps the allocator's arenas. Call before any thread starts (before the runtime).
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Returns free heap pages to the kernel every [`TRIM_EVERY`], for as long as the runtime runs.
pub async fn trim_periodically() {
    let mut tick = tokio::time::interval(TRIM_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        trim();
    }
}

/// Returns free heap pages to the kernel now.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim walks the allocator's own free lists; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}
