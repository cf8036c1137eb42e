//! `rota man`: the manual page, generated from the command line's own definition
//! (clap_mangen), so that it always matches the binary's flags.
//!
//! `rota man` prints `rota(1)` (every subcommand with its summary); `rota man --dir DIR`
//! writes `rota.1` and one page per subcommand (`rota-agent.1`, `rota-sim-serve.1`, ...) into
//! DIR for packaging (`/usr/share/man/man1`). Read one with `man -l rota-agent.1`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write rota.1 and one page per subcommand into this folder (created if absent) instead
    /// of printing rota.1.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Renders the pages of `cmd`, the command line's definition (`Cli::command()`: handed down
/// by the caller, so that this file does not import the one that lists it).
pub fn run(args: ManArgs, cmd: clap::Command) -> ExitCode {
    let result = match &args.dir {
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout().lock()),
        Some(dir) => std::fs::create_dir_all(dir).and_then(|_| clap_mangen::generate_to(cmd, dir)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stops early (`| head`) is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            match &args.dir {
                Some(dir) => eprintln!("rota man: {}: {e}", dir.display()),
                None => eprintln!("rota man: {e}"),
            }
            ExitCode::from(2)
        }
    }
}
