//! The `rota` binary: parse the command line and run it.

fn main() -> std::process::ExitCode {
    rota::cli::main()
}
