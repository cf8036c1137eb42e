//! Which allocator a `rota` process runs on, chosen once per process by the command it runs.
//!
//! The simulated fleet (`rota sim serve`) parses, clones and serialises every object it
//! serves from many threads: at 20,000 nodes, 600,000 pods listed and watched. On glibc's
//! malloc half of its CPU went to the allocator (`perf`: `_int_malloc`, `malloc_consolidate`,
//! `unlink_chunk`) and adopting the scale scenario took 98-182 s (69 s without the agent's
//! arena cap and trims); on jemalloc 47 s ("The biggest clusters" in docs/operations.md).
//! The agent stays on glibc with the settings of [`crate::memory`]: measured on the
//! 5,000-node rotation, its peak was higher on jemalloc (133 MiB against 115-119).
//!
//! A process cannot change allocators once it has allocated: a block must be freed by the
//! allocator that gave it. So the choice is made inside the first allocation, before any
//! block exists, from the process's own command line (`/proc/self/cmdline`, read without
//! allocating), and never changes. Every later call costs one relaxed atomic load.
//! Built only with the `sim` feature; the agent's image (without it) uses the system
//! allocator directly.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

use tikv_jemallocator::Jemalloc;

/// The allocator a process runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// The system's (glibc's) malloc: every command but the simulated fleet's server.
    System,
    /// jemalloc, for `rota sim serve`.
    Jemalloc,
}

impl Choice {
    /// The allocator's name, as `rota sim serve` logs it.
    pub fn name(self) -> &'static str {
        match self {
            Choice::System => "system",
            Choice::Jemalloc => "jemalloc",
        }
    }
}

/// The choice for a command line as `/proc/self/cmdline` holds it (arguments ended by NUL):
/// jemalloc for `rota sim serve`, the system's otherwise (no global option precedes a
/// subcommand, so these are the first two arguments after the program).
pub fn choice_for(cmdline: &[u8]) -> Choice {
    let mut args = cmdline.split(|b| *b == 0).skip(1);
    match (args.next(), args.next()) {
        (Some(b"sim"), Some(b"serve")) => Choice::Jemalloc,
        _ => Choice::System,
    }
}

const UNDECIDED: u8 = 0;
const SYSTEM: u8 = 1;
const JEMALLOC: u8 = 2;

/// The process's choice, set by its first allocation.
static CHOICE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// The allocator this process runs on: what [`ByCommand`] chose at the first allocation, or
/// the system's when it is not the process's global allocator (nothing chose). Read only, so
/// that the ready line of `rota sim serve` says what the binary really installed.
pub fn in_use() -> Choice {
    match CHOICE.load(Ordering::Relaxed) {
        JEMALLOC => Choice::Jemalloc,
        _ => Choice::System,
    }
}

/// The choice every call of [`ByCommand`] follows, made by the first of them.
fn chosen() -> Choice {
    match CHOICE.load(Ordering::Relaxed) {
        SYSTEM => Choice::System,
        JEMALLOC => Choice::Jemalloc,
        _ => decide(),
    }
}

/// Reads the command line and records the choice. Threads that race here read the same
/// command line and store the same value.
#[cold]
fn decide() -> Choice {
    let choice = choice_for(own_cmdline(&mut [0u8; 8192]));
    let value = match choice {
        Choice::System => SYSTEM,
        Choice::Jemalloc => JEMALLOC,
    };
    CHOICE.store(value, Ordering::Relaxed);
    choice
}

/// The start of `/proc/self/cmdline` in `buf`, read with bare system calls (an allocation
/// here would recurse into the allocator being chosen). Empty if it cannot be read: the
/// system allocator then.
fn own_cmdline(buf: &mut [u8]) -> &[u8] {
    // SAFETY: open, read and close on a NUL-terminated path and a buffer we own.
    let len = unsafe {
        let fd = libc::open(
            c"/proc/self/cmdline".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return &[];
        }
        let mut len = 0usize;
        while len < buf.len() {
            let n = libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len);
            if n <= 0 {
                break;
            }
            len += n as usize;
        }
        libc::close(fd);
        len
    };
    &buf[..len]
}

/// The global allocator of the `rota` binary built with `sim`: jemalloc or the system's, as
/// the command line decides at its first allocation.
pub struct ByCommand;

// SAFETY: every block is allocated and freed by the same allocator, because the choice is
// made before the first block and never changes.
unsafe impl GlobalAlloc for ByCommand {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match chosen() {
            // SAFETY: forwarded as received.
            Choice::Jemalloc => unsafe { Jemalloc.alloc(layout) },
            Choice::System => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match chosen() {
            // SAFETY: forwarded as received.
            Choice::Jemalloc => unsafe { Jemalloc.alloc_zeroed(layout) },
            Choice::System => unsafe { System.alloc_zeroed(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match chosen() {
            // SAFETY: `ptr` came from the same allocator (see above).
            Choice::Jemalloc => unsafe { Jemalloc.dealloc(ptr, layout) },
            Choice::System => unsafe { System.dealloc(ptr, layout) },
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match chosen() {
            // SAFETY: `ptr` came from the same allocator (see above).
            Choice::Jemalloc => unsafe { Jemalloc.realloc(ptr, layout, new_size) },
            Choice::System => unsafe { System.realloc(ptr, layout, new_size) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulated_fleets_server_runs_on_jemalloc_and_every_other_command_on_the_systems() {
        assert_eq!(
            choice_for(b"/usr/bin/rota\0sim\0serve\0--repo\0r\0"),
            Choice::Jemalloc
        );
        assert_eq!(choice_for(b"rota\0agent\0"), Choice::System);
        assert_eq!(choice_for(b"rota\0demo\0"), Choice::System);
        // `rota sim` alone (its help) and an argument that merely says "sim".
        assert_eq!(choice_for(b"rota\0sim\0"), Choice::System);
        assert_eq!(choice_for(b"rota\0agent\0sim\0serve\0"), Choice::System);
        assert_eq!(choice_for(b""), Choice::System);
    }

    #[test]
    fn a_process_without_the_allocator_installed_says_it_runs_on_the_systems() {
        // This test binary's command line is readable, and it is not `rota sim serve`.
        let cmdline = own_cmdline(&mut [0u8; 8192]).to_vec();
        assert!(!cmdline.is_empty());
        assert_eq!(choice_for(&cmdline), Choice::System);
        // `ByCommand` is not this binary's global allocator: nothing chose, whatever the
        // command line would say.
        assert_eq!(in_use(), Choice::System);
    }
}
