//! `rota completions bash|zsh|fish|...`: a shell completion script, generated from the command
//! line's own definition (clap_complete), so that it never lists a flag the binary lacks.
//!
//! Install, for example: `rota completions bash > /etc/bash_completion.d/rota`,
//! `rota completions zsh > "${fpath[1]}/_rota"`,
//! `rota completions fish > ~/.config/fish/completions/rota.fish`.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use clap_complete::Shell;

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to write the completion script for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Writes the completion script of `cli`, the command line's definition (`Cli::command()`:
/// handed down by the caller, so that this file does not import the one that lists it).
pub fn run(args: CompletionsArgs, mut cli: clap::Command) -> ExitCode {
    // Generated into memory first: clap_complete panics on a failed write, and a reader that
    // stops early (`| head`) is not an error.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cli, "rota", &mut script);
    match std::io::stdout().lock().write_all(&script) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rota completions: {e}");
            ExitCode::from(2)
        }
    }
}
