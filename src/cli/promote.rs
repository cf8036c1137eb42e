//! `rota promote --wave NAME`: may wave NAME take the versions the wave before it runs? The
//! promotion guard answers from the statuses the agents recorded (git notes); when it allows,
//! the commit that moves the wave's pins is written (on the current branch, or on a new
//! `--branch` for a pull request), its message listing the evidence. `--check` instead
//! checks a promotion already written (a PR): every pin a wave changed between `--base` and
//! `--rev` must be allowed by the guard (for a required status check).
//!
//! Exit codes: 0 allowed (and, without `--check`, the commit written) or nothing to promote;
//! 1 the guard says wait (nothing written); 2 the promotion could not be written or checked
//! (not a repo, unknown wave or revision, local changes, a pin rota cannot edit).
//!
//! `--revert --wave NAME` goes the other way: when pools of the wave recorded a failure (a
//! gate, an image that did not boot) on the version the wave pins, since it pins it, the
//! commit that pins the wave back to the version before (`waves::revert`), written where a
//! promotion would be (`--open-pr`: on `rota/revert/<wave>/<channel>-<version>`). Exit codes:
//! 0 written (or nothing to revert); 1 a failure calls for a revert rota cannot write (no
//! earlier pin to go back to), nothing written; 2 as above.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::promotion::{PinCheck, Query, checks_at, describe};

#[derive(Args, Debug)]
pub struct PromoteArgs {
    /// The wave to promote (or, with --check, whose promotion to check; default: every wave
    /// whose pins changed).
    #[arg(long)]
    pub wave: Option<String>,
    /// The fleet repo (a clone with the rota notes fetched, or the bare repo).
    #[arg(long, env = "ROTA_REPO", default_value = ".")]
    pub repo: PathBuf,
    /// The commit to promote from (without --check) or the promotion to check (with it).
    #[arg(long, default_value = "HEAD")]
    pub rev: String,
    /// Check the promotion made between --base and --rev.
    #[arg(long)]
    pub check: bool,
    /// The commit the promotion is based on (its statuses hold the records).
    #[arg(long, default_value = "HEAD~1")]
    pub base: String,
    #[arg(long = "path")]
    pub subdir: Option<PathBuf>,
    /// Allowed-signers file of the agents (principal: cluster name): count only records
    /// signed by the agent of the cluster they speak for.
    #[arg(long, env = "ROTA_AGENT_SIGNERS")]
    pub agent_signers: Option<PathBuf>,
    /// Write the promotion commit on this new branch (for a pull request) instead of
    /// advancing the current branch.
    #[arg(long, conflicts_with = "check")]
    pub branch: Option<String>,
    /// Only say what the guard answers; write nothing (the old behaviour of `--wave`).
    #[arg(long, conflicts_with = "check")]
    pub dry_run: bool,
    /// Propose the promotion as a pull request: commit it on branch `rota/promote/<wave>`
    /// (rewritten from --rev on each run), push it to --remote, and open its pull request on
    /// the forge (--github-repo, --gitlab-project, --gitea-repo) or update the open one.
    /// Without a forge, only the branch. With --revert: branch
    /// `rota/revert/<wave>/<channel>-<version>`, one per wave and version.
    #[arg(long, requires = "wave", conflicts_with_all = ["check", "branch", "dry_run"])]
    pub open_pr: bool,
    /// Pin the wave back instead: when its pools recorded a failure (a health gate, an image
    /// that did not boot) on the version it pins, since it pins it, to the version it pinned
    /// before (from the branch's history), the evidence in the commit message.
    #[arg(long, requires = "wave", conflicts_with = "check")]
    pub revert: bool,
    #[command(flatten)]
    pub propose: super::forge::ProposeArgs,
}

impl PromoteArgs {
    /// What to check, for [`crate::promotion::checks_at`].
    pub fn query(&self) -> Query {
        Query {
            repo: self.repo.clone(),
            rev: self.rev.clone(),
            base: self.base.clone(),
            check: self.check,
            wave: self.wave.clone(),
            subdir: self.subdir.clone(),
            agent_signers: self.agent_signers.clone(),
        }
    }
}

pub async fn checks(args: &PromoteArgs) -> Result<Vec<PinCheck>, String> {
    checks_at(&args.query(), chrono::Utc::now()).await
}

pub fn run(args: PromoteArgs) -> ExitCode {
    crate::telemetry::init_one_shot();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rota: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    if args.revert {
        return run_revert(&args, &rt);
    }
    let checks = match rt.block_on(checks(&args)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rota: {e}");
            return ExitCode::from(2);
        }
    };
    if checks.is_empty() {
        println!("nothing to promote: the pins are the same");
        return ExitCode::SUCCESS;
    }
    let mut ok = true;
    for c in &checks {
        ok &= c.decision.is_allowed();
        println!("{}", describe(c));
    }
    if !ok {
        if !args.check {
            println!("nothing written: the promotion guard says wait");
        }
        return ExitCode::from(1);
    }
    if args.check || args.dry_run {
        return ExitCode::SUCCESS;
    }
    if args.open_pr {
        return match rt.block_on(open_pr(&args, &checks)) {
            Ok(line) => {
                println!("{line}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("rota: {e}");
                ExitCode::from(2)
            }
        };
    }
    match write_promotion(&args, &checks) {
        Ok((id, branch, title)) => {
            let short = &id.to_string()[..7];
            println!("[{branch} {short}] {title}");
            match &args.branch {
                Some(b) => println!("push it and open a pull request: git push origin {b}"),
                None => println!("push it: merging it is the promotion (git push)"),
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rota: {e}");
            ExitCode::from(2)
        }
    }
}

/// Writes the promotion commit for `checks` (all allowed, one wave) where the flags say:
/// on the current branch, a new `--branch`, or (`--open-pr`) `rota/promote/<wave>`.
pub fn write_promotion(
    args: &PromoteArgs,
    checks: &[PinCheck],
) -> Result<(git2::Oid, String, String), String> {
    use crate::promotion::pin::Target;
    let Some(wave) = &args.wave else {
        return Err("--wave NAME is required to write a promotion".into());
    };
    let target = match &args.branch {
        Some(b) => Target::NewBranch(b.clone()),
        None => Target::CurrentBranch,
    };
    crate::promotion::commit::write(&at(args), wave, checks, &target)
}

fn at(args: &PromoteArgs) -> crate::promotion::commit::At<'_> {
    crate::promotion::commit::At {
        repo: &args.repo,
        rev: &args.rev,
        subdir: args.subdir.as_deref(),
    }
}

/// `--open-pr`: the promotion on branch `rota/promote/<wave>`, pushed, and its pull request
/// opened or updated.
async fn open_pr(args: &PromoteArgs, checks: &[PinCheck]) -> Result<String, String> {
    use crate::promotion::propose::{Remote, Where};
    let (forge, base) = args.propose.resolve(&args.repo)?;
    let wave = args.wave.as_deref().unwrap_or_default();
    let to = Where {
        repo: &args.repo,
        remote: Remote::Named(&args.propose.remote),
        base: &base,
        forge: forge.as_ref(),
    };
    crate::promotion::commit::propose(&at(args), wave, checks, &to).await
}

/// `--revert`: what the wave's pins call for, and the revert written where the flags say.
fn run_revert(args: &PromoteArgs, rt: &tokio::runtime::Runtime) -> ExitCode {
    use crate::promotion::pin::Target;
    use crate::promotion::revert;
    use rota_core::waves::RevertDecision;
    let checks = match rt.block_on(revert::checks_at(&args.query())) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rota: {e}");
            return ExitCode::from(2);
        }
    };
    for c in &checks {
        println!("{}", c.describe());
    }
    let by_hand = checks
        .iter()
        .any(|c| matches!(c.decision, RevertDecision::ByHand { .. }));
    let reverts: Vec<_> = checks
        .iter()
        .filter_map(|c| match &c.decision {
            RevertDecision::Revert(r) => Some(r),
            _ => None,
        })
        .collect();
    let done = if by_hand {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    };
    if reverts.is_empty() {
        println!(
            "{}",
            if by_hand {
                "nothing written: pin the wave by hand"
            } else {
                "nothing to revert"
            }
        );
        return done;
    }
    if args.dry_run {
        return done;
    }
    let wave = args.wave.as_deref().unwrap_or_default();
    if args.open_pr {
        let mut failed = false;
        for r in &reverts {
            match rt.block_on(open_revert_pr(args, r)) {
                Ok(line) => println!("{}: {line}", r.channel),
                Err(e) => {
                    eprintln!("rota: {}: {e}", r.channel);
                    failed = true;
                }
            }
        }
        return if failed { ExitCode::from(2) } else { done };
    }
    let target = match &args.branch {
        Some(b) => Target::NewBranch(b.clone()),
        None => Target::CurrentBranch,
    };
    match revert::write(&at(args), wave, &reverts, &target) {
        Ok((id, branch, title)) => {
            let short = &id.to_string()[..7];
            println!("[{branch} {short}] {title}");
            match &args.branch {
                Some(b) => println!("push it and open a pull request: git push origin {b}"),
                None => println!("push it: merging it is the revert (git push)"),
            }
            done
        }
        Err(e) => {
            eprintln!("rota: {e}");
            ExitCode::from(2)
        }
    }
}

/// `--revert --open-pr`: the revert on its branch, pushed, and its pull request opened or
/// updated.
async fn open_revert_pr(
    args: &PromoteArgs,
    revert: &rota_core::waves::Revert,
) -> Result<String, String> {
    use crate::promotion::propose::{Remote, Where};
    let (forge, base) = args.propose.resolve(&args.repo)?;
    let to = Where {
        repo: &args.repo,
        remote: Remote::Named(&args.propose.remote),
        base: &base,
        forge: forge.as_ref(),
    };
    crate::promotion::revert::propose(&at(args), revert, &to).await
}
