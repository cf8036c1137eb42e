//! `rota diff --from REV [--to REV | --worktree] [--repo PATH] [--format human|json|markdown]`:
//! what changes for the agents between two revisions of the fleet repo (or a revision and the
//! working tree), grouped by wave: pools that change image, pools whose settings change
//! (rollout policy, gates, mode, group, node selector), pools and clusters added or removed,
//! clusters that change wave, and the fleet's promotion guard and waves.
//!
//! Exit 0 with the summary (also when nothing changes), 1 when either revision is invalid,
//! 2 when a revision or the repository cannot be read.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::validate::load;
use rota_core::fleet::{Format, diff};

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
    /// Compare with the working tree (the files under --repo and --path as they are on disk,
    /// committed or not) instead of --to.
    #[arg(long, conflicts_with = "to")]
    pub worktree: bool,
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
    let (to_rev, to_name) = if args.worktree {
        (None, "the working tree".to_string())
    } else {
        (Some(args.to.as_str()), format!("revision {}", args.to))
    };
    let to = match load(&args.repo, to_rev, sub) {
        Ok(f) => f,
        Err(f) => {
            eprintln!("rota: {to_name} is invalid:");
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
                "fleet": d.fleet,
            }))
            .expect("diff serializes")
        ),
    }
    ExitCode::SUCCESS
}
