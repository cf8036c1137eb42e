//! `rota diff --from REV [--to REV] [--repo PATH] [--format human|json|markdown]`: which clusters and
//! pools change image between two revisions of the fleet repo, grouped by wave.
//!
//! Exit 0 with the summary (also when nothing changes), 1 when either revision is invalid,
//! 2 when a revision or the repository cannot be read.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::validate::load;
use crate::fleet::{Format, diff};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    Human,
    Json,
    /// Markdown tables, for a pull request comment or `$GITHUB_STEP_SUMMARY`.
    Markdown,
}

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The base revision (e.g. the target branch of a pull request).
    #[arg(long)]
    pub from: String,
    /// The new revision.
    #[arg(long, default_value = "HEAD")]
    pub to: String,
    /// The git repository holding the fleet repo.
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// The fleet repo is this folder inside the repository.
    #[arg(long = "path", value_name = "DIR")]
    pub subdir: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "human")]
    pub format: DiffFormat,
}

pub fn run(args: DiffArgs) -> ExitCode {
    let sub = args.subdir.as_deref();
    let from = match load(&args.repo, Some(&args.from), sub) {
        Ok(f) => f,
        Err(f) => {
            eprintln!("rota: revision {} is invalid:", args.from);
            return f.report(Format::Human);
        }
    };
    let to = match load(&args.repo, Some(&args.to), sub) {
        Ok(f) => f,
        Err(f) => {
            eprintln!("rota: revision {} is invalid:", args.to);
            return f.report(Format::Human);
        }
    };
    let d = diff::diff(&from, &to);
    match args.format {
        DiffFormat::Human => print!("{}", d.render_human()),
        DiffFormat::Markdown => print!("{}", d.render_markdown()),
        DiffFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "from": from.commit(),
                "to": to.commit(),
                "waves": d.waves,
            }))
            .expect("diff serializes")
        ),
    }
    ExitCode::SUCCESS
}
