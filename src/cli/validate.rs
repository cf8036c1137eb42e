//! `rota validate [PATH] [--repo PATH] [--rev REV] [--path DIR] [--format human|json|github]`:
//! check a fleet repo and report every problem with its file, line and column.
//!
//! Exit 0 valid, 1 invalid, 2 usage or I/O error (no such folder, not a git repo, unknown
//! revision). A valid repo may still have warnings (a rollout field a managed pool's owner
//! cannot honour): printed at their file and line, in every format, without failing.
//! Also holds the repo-loading helper that `render` and `diff` share.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use rota_core::fleet::{Diagnostics, Fleet, Format};

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// The fleet repo folder (default: --repo, else the current directory).
    pub path: Option<PathBuf>,
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Output format.
    #[arg(long, default_value = "human", value_parser = format_parser())]
    pub format: Format,
}

/// `--format human|json|github`, listed as possible values (completions, `--help`).
fn format_parser() -> impl clap::builder::TypedValueParser<Value = Format> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Format::ALL.map(|(name, _)| name))
        .map(|s| s.parse().expect("a possible value names a format"))
}

/// Where a command reads the fleet repo from.
#[derive(Args, Debug, Clone)]
pub struct RepoArgs {
    /// The fleet repo (a folder, or with --rev a git repository).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// Read this git revision (branch, tag, commit) from the repository's object database
    /// instead of the files on disk.
    #[arg(long)]
    pub rev: Option<String>,
    /// The fleet repo is this folder inside the repository.
    #[arg(long = "path", value_name = "DIR")]
    pub subdir: Option<PathBuf>,
}

/// Why a repo could not be used.
pub enum LoadFailure {
    /// Exit 2: the repo could not be read at all.
    Usage(String),
    /// Exit 1: the repo was read and is invalid. The second field is the folder prefix to
    /// show in front of file names.
    Invalid(Diagnostics, String),
}

impl LoadFailure {
    /// Print the failure and return the exit code.
    pub fn report(self, format: Format) -> ExitCode {
        match self {
            LoadFailure::Usage(msg) => {
                eprintln!("rota: {msg}");
                ExitCode::from(2)
            }
            LoadFailure::Invalid(d, prefix) => {
                let d = d.with_prefix(&prefix);
                match format {
                    Format::Human => eprint!("{}", d.render(format)),
                    _ => print!("{}", d.render(format)),
                }
                ExitCode::from(1)
            }
        }
    }
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

/// The folder prefix shown in front of the repo's file names: the folder read, or with a
/// revision the folder inside the repository.
fn prefix(repo: &Path, rev: Option<&str>, subdir: Option<&Path>) -> String {
    match (rev, subdir) {
        (None, Some(s)) => display(&repo.join(s)),
        (None, None) => display(repo),
        (Some(_), s) => s.map(display).unwrap_or_default(),
    }
}

/// Load the fleet at `rev` (git) or from the folder, distinguishing unusable input (exit 2)
/// from an invalid repo (exit 1).
pub fn load(repo: &Path, rev: Option<&str>, subdir: Option<&Path>) -> Result<Fleet, LoadFailure> {
    match rev {
        None => {
            let dir = match subdir {
                Some(s) => repo.join(s),
                None => repo.to_path_buf(),
            };
            if !dir.is_dir() {
                return Err(LoadFailure::Usage(format!(
                    "{} is not a folder",
                    display(&dir)
                )));
            }
            crate::source::read::load_dir(&dir).map_err(|d| LoadFailure::Invalid(d, display(&dir)))
        }
        Some(rev) => {
            let r = git2::Repository::open(repo).map_err(|e| {
                LoadFailure::Usage(format!(
                    "{} is not a git repository: {}",
                    display(repo),
                    e.message()
                ))
            })?;
            if let Err(e) = r.revparse_single(rev).and_then(|o| o.peel_to_commit()) {
                return Err(LoadFailure::Usage(format!(
                    "unknown revision {rev:?}: {}",
                    e.message()
                )));
            }
            let prefix = subdir.map(display).unwrap_or_default();
            crate::source::read::load_git_at(repo, rev, subdir)
                .map_err(|d| LoadFailure::Invalid(d, prefix))
        }
    }
}

pub fn run(args: ValidateArgs) -> ExitCode {
    let repo = args.path.unwrap_or(args.repo.repo);
    let (rev, subdir) = (args.repo.rev.as_deref(), args.repo.subdir.as_deref());
    match load(&repo, rev, subdir) {
        Ok(fleet) => {
            let clusters = fleet.clusters.len();
            let pools: usize = fleet.clusters.values().map(|c| c.spec.pools.len()).sum();
            let warnings = fleet
                .warnings()
                .clone()
                .with_prefix(&prefix(&repo, rev, subdir));
            match args.format {
                Format::Human => {
                    eprint!("{}", warnings.render_warnings(Format::Human));
                    let n = warnings.len();
                    println!(
                        "fleet {} is valid: {clusters} clusters, {pools} pools, {} waves, {} gates{}",
                        fleet.name(),
                        fleet.waves().len(),
                        fleet.gates.len(),
                        match n {
                            0 => String::new(),
                            1 => " (1 warning)".to_string(),
                            n => format!(" ({n} warnings)"),
                        }
                    );
                }
                Format::Json => print!("{}", Diagnostics::render_json_valid_with(&warnings)),
                Format::Github => print!("{}", warnings.render_warnings(Format::Github)),
            }
            ExitCode::SUCCESS
        }
        Err(f) => f.report(args.format),
    }
}
