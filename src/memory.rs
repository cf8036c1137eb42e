//! Keeping the long-running processes' resident memory close to what they hold.
//!
//! The agent decodes every watch event of its cluster (3 GB of pod events during a rotation
//! of the 5,000-node scale scenario) and keeps a few tens of megabytes of it. With glibc's
//! allocator, each thread that allocates under contention gets an arena of its own, and freed
//! memory stays in the arena it came from: the process's resident size then follows the
//! transient decoding spread over arenas rather than what the index holds. Two arenas and a
//! periodic `malloc_trim` (which hands free pages of every arena back to the kernel) keep it
//! near the live heap. A fixed mmap threshold ([`MMAP_THRESHOLD`]) keeps the large transient
//! blocks (list pages, a pass's observation of a pool, a table while it grows) out of the
//! arenas altogether: each is mapped on its own and unmapped when freed. glibc otherwise raises
//! the threshold to the size of every mapped block it frees (up to 32 MiB), after which blocks
//! of that size come from the arenas, fragment them and stay resident. `cargo bench --bench figures -- agent_scale` measures the result ("Sizing" in
//! docs/operations.md). Elsewhere (musl, other systems) these are no-ops.

use std::time::Duration;

/// How often free heap pages are returned to the kernel.
pub const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Blocks at least this large are mapped on their own and handed back when freed.
pub const MMAP_THRESHOLD: usize = 256 * 1024;

/// Caps the allocator's arenas and fixes its mmap threshold at [`MMAP_THRESHOLD`]. Call
/// before any thread starts (before the runtime).
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int);
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

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// Whether glibc mapped the block at `p` on its own: the `IS_MMAPPED` bit (2) of the
    /// size word right before the block, glibc's chunk header.
    fn mapped(p: *const u8) -> bool {
        // SAFETY: `p` is a live malloc'd block; glibc keeps its chunk's size word just
        // before it.
        unsafe { (p as *const usize).sub(1).read() & 2 != 0 }
    }

    /// Set in the child process the test below runs itself in.
    const ALONE: &str = "ROTA_MEMORY_TEST_ALONE";

    #[test]
    fn large_blocks_stay_mapped_after_a_larger_one_is_freed() {
        // The allocator's state is the whole process's: the other tests of this binary free
        // large blocks into the arenas in parallel, and a free chunk there serves a 1 MiB
        // request whatever the threshold (glibc maps only what the arena cannot serve). So
        // the check runs alone, in a child process of this test binary.
        if std::env::var_os(ALONE).is_none() {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "memory::tests::large_blocks_stay_mapped_after_a_larger_one_is_freed",
                    "--exact",
                    "--test-threads=1",
                ])
                .env(ALONE, "1")
                .output()
                .unwrap();
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.status.success(), "{said}");
            assert!(said.contains("1 passed"), "the check did not run: {said}");
            return;
        }
        limit_arenas();
        // Freeing a mapped 8 MiB block is what raises glibc's own threshold to 8 MiB: a
        // 1 MiB block after it would come from an arena and stay resident there.
        let big = vec![1u8; 8 << 20];
        assert!(mapped(big.as_ptr()));
        drop(big);
        let after = vec![1u8; 1 << 20];
        assert!(mapped(after.as_ptr()), "a 1 MiB block came from an arena");
        let small = vec![1u8; 1024];
        assert!(!mapped(small.as_ptr()));
    }
}
