//! The `rota` binary: parse the command line and run it.

/// With the simulated fleet built in, `rota sim serve` runs on jemalloc and every other
/// command on the system's allocator (`rota::allocator`).
#[cfg(feature = "sim")]
#[global_allocator]
static ALLOCATOR: rota::allocator::ByCommand = rota::allocator::ByCommand;

fn main() -> std::process::ExitCode {
    rota::cli::main()
}
