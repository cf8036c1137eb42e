//! `rota propose`: the proposer a schedule runs (deploy/components/proposals, a CronJob), so
//! that a fleet's chain "new image, canary pull request, promotion pull requests" needs people
//! only to review and merge. One pass: mirror the fleet repo by URL (as the agent does, with
//! its credentials), then
//!
//! - for each channel with a `source`, what `rota images discover --open-pr` does: the newest
//!   baked build, proposed on branch `rota/images/<channel>`;
//! - for each wave after the first, what `rota promote --wave W --open-pr` does: when the
//!   guard allows, the promotion proposed on branch `rota/promote/<wave>`;
//! - for each wave whose pools recorded a failure (a gate, an image that did not boot) on the
//!   version it pins, what `rota promote --revert --wave W --open-pr` does: the wave pinned
//!   back to the version before, proposed on `rota/revert/<wave>/<channel>-<version>`.
//!
//! Branches are pushed to the repo's URL through libgit2 with the same credentials (the image
//! has no git), and each has one pull request on the forge, opened or updated; without a
//! forge, the branches alone. The bake is never skipped here (`--security` is a person's
//! call, made with `rota images discover`).
//!
//! Exit codes: 0 the pass ran (whatever it proposed or found waiting); 2 something failed (the
//! repo could not be mirrored or read, a lookup, a push or the forge refused): the rest of the
//! pass still ran, and every failure is named.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::cloud::CloudArgs;
use super::forge::ForgeArgs;
use super::git_auth::GitAuthArgs;
use crate::discovery;
use crate::promotion::commit::{At, propose as propose_promotion};
use crate::promotion::propose::{Remote, Where};
use crate::promotion::revert;
use crate::promotion::{Query, checks_at, describe};
use crate::report::notes::PushTarget;
use crate::source::{SourceConfig, redact_url};
use rota_core::waves::RevertDecision;

#[derive(Args, Debug)]
pub struct ProposeArgs {
    /// The fleet repo's URL (or a local path): mirrored under --state-dir, and where the
    /// proposal branches are pushed.
    #[arg(long, env = "ROTA_REPO")]
    pub repo: String,
    /// The branch the fleet is read from and the pull requests go into.
    #[arg(long, env = "ROTA_BRANCH", default_value = "main")]
    pub branch: String,
    /// The fleet's directory inside the repo.
    #[arg(long = "path", env = "ROTA_PATH")]
    pub subdir: Option<PathBuf>,
    /// Where the mirror is kept (an emptyDir in the CronJob: each run mirrors afresh).
    #[arg(long, env = "ROTA_STATE_DIR", default_value = "/var/lib/rota")]
    pub state_dir: PathBuf,
    /// Allowed-signers file of the agents (principal: cluster name): the promotion guard
    /// counts only records signed by the agent of the cluster they speak for.
    #[arg(long, env = "ROTA_AGENT_SIGNERS")]
    pub agent_signers: Option<PathBuf>,
    /// Do not look for new images (only promotions).
    #[arg(long)]
    pub no_images: bool,
    /// Do not propose promotions.
    #[arg(long)]
    pub no_promotions: bool,
    /// Do not propose reverts (a wave pinned back after a failure on its version).
    #[arg(long)]
    pub no_reverts: bool,
    #[command(flatten)]
    pub git: GitAuthArgs,
    #[command(flatten)]
    pub forge: ForgeArgs,
    #[command(flatten)]
    pub cloud: CloudArgs,
}

pub fn run(args: ProposeArgs) -> ExitCode {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rota: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(pass(&args)) {
        Ok(failures) if failures.is_empty() => ExitCode::SUCCESS,
        Ok(failures) => {
            for f in failures {
                eprintln!("rota: {f}");
            }
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("rota: {e}");
            ExitCode::from(2)
        }
    }
}

/// One pass; returns the failures of its parts (each part runs whatever the others did).
async fn pass(args: &ProposeArgs) -> Result<Vec<String>, String> {
    let env = |k: &str| std::env::var(k).ok();
    let auth = args.git.auth(&env)?;
    let forge = args.forge.store_config(&env)?;
    let source = std::sync::Arc::new(crate::source::open_mirror(
        SourceConfig {
            url: args.repo.clone(),
            branch: args.branch.clone(),
            auth: auth.clone(),
            depth: None,
        },
        &args.state_dir,
        "propose.git",
    )?);
    let (s, subdir) = (source.clone(), args.subdir.clone());
    let commit = tokio::task::spawn_blocking(move || s.fetch_with_fleet_notes(subdir.as_deref()))
        .await
        .map_err(|e| format!("the fetch did not finish: {e}"))?
        .map_err(|e| e.to_string())?
        .commit
        .to_string();
    let mirror_path = source.mirror_path();
    println!(
        "{} {} at {}",
        redact_url(&args.repo),
        args.branch,
        &commit[..12]
    );
    let push = PushTarget {
        url: args.repo.clone(),
        auth,
        known_hosts: source.known_hosts().cloned(),
    };
    let to = Where {
        repo: mirror_path,
        remote: Remote::Url(&push),
        base: &args.branch,
        forge: forge.as_ref(),
    };
    let (files, _, _) = crate::source::read::read_git(mirror_path, &commit, args.subdir.as_deref())
        .map_err(|d| d.to_string())?;
    let fleet = rota_core::fleet::load_files(&files).map_err(|d| d.to_string())?;
    let now = chrono::Utc::now();
    let mut failures = Vec::new();
    if !args.no_images {
        // The simulated cloud of `rota sim serve` when the kubeconfig names one (or
        // --cloud-endpoint), else the real providers with the pod's cloud identity.
        let kubeconfig = kube::config::Kubeconfig::read().ok().map(|k| (k, None));
        let (clouds, _) = super::cloud::build(&args.cloud, kubeconfig.as_ref())?;
        let reports = discovery::discover(&fleet, clouds.as_ref(), None, now, None).await?;
        for r in &reports {
            println!("images {}", discovery::describe(r, now));
            if let Err(e) = &r.result {
                failures.push(format!("images {}: {}", r.channel, e.join("; ")));
            }
        }
        let open = discovery::OpenPr {
            parent: &commit,
            subdir: args.subdir.as_deref(),
            at: to,
        };
        match discovery::open_prs(&files, &fleet, &reports, &open).await {
            Ok(lines) => lines.iter().for_each(|l| println!("images {l}")),
            Err(e) => failures.push(format!("images: {e}")),
        }
    }
    if !args.no_promotions {
        // One read of the fleet and the agents' records answers for every wave.
        let query = Query {
            repo: mirror_path.to_path_buf(),
            rev: commit.clone(),
            base: commit.clone(),
            check: false,
            wave: None,
            subdir: args.subdir.clone(),
            agent_signers: args.agent_signers.clone(),
        };
        match checks_at(&query, now).await {
            Err(e) => failures.push(format!("promotions: {e}")),
            Ok(all) => {
                for wave in fleet.waves().iter().skip(1) {
                    let checks: Vec<_> = all
                        .iter()
                        .filter(|c| c.wave == wave.name)
                        .cloned()
                        .collect();
                    if checks.is_empty() {
                        println!(
                            "wave {}: nothing to promote: it pins what the wave before it runs",
                            wave.name
                        );
                        continue;
                    }
                    for c in &checks {
                        println!("{}", describe(c));
                    }
                    if !checks.iter().all(|c| c.decision.is_allowed()) {
                        continue;
                    }
                    let at = At {
                        repo: mirror_path,
                        rev: &commit,
                        subdir: args.subdir.as_deref(),
                    };
                    match propose_promotion(&at, &wave.name, &checks, &to).await {
                        Ok(line) => println!("wave {}: {line}", wave.name),
                        Err(e) => failures.push(format!("wave {}: {e}", wave.name)),
                    }
                }
            }
        }
    }
    if !args.no_reverts {
        let query = Query {
            repo: mirror_path.to_path_buf(),
            rev: commit.clone(),
            base: commit.clone(),
            check: false,
            wave: None,
            subdir: args.subdir.clone(),
            agent_signers: args.agent_signers.clone(),
        };
        match revert::checks_at(&query).await {
            Err(e) => failures.push(format!("reverts: {e}")),
            Ok(checks) => {
                let at = At {
                    repo: mirror_path,
                    rev: &commit,
                    subdir: args.subdir.as_deref(),
                };
                for c in &checks {
                    println!("{}", c.describe());
                    let RevertDecision::Revert(r) = &c.decision else {
                        continue;
                    };
                    match revert::propose(&at, r, &to).await {
                        Ok(line) => println!("revert wave {} {}: {line}", r.wave, r.channel),
                        Err(e) => {
                            failures.push(format!("revert wave {} {}: {e}", r.wave, r.channel))
                        }
                    }
                }
            }
        }
    }
    Ok(failures)
}
