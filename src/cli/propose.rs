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
    let (files, _, _) = crate::source::read::read_git(mirror_path, &commit, args.subdir.as_deref())
        .map_err(|d| d.to_string())?;
    let fleet = rota_core::fleet::load_files(&files).map_err(|d| d.to_string())?;
    let pass = Pass {
        args,
        commit: &commit,
        files: &files,
        fleet: &fleet,
        to: Where {
            repo: mirror_path,
            remote: Remote::Url(&push),
            base: &args.branch,
            forge: forge.as_ref(),
        },
        now: chrono::Utc::now(),
    };
    let mut failures = Vec::new();
    if !args.no_images {
        pass.images(&mut failures).await?;
    }
    if !args.no_promotions {
        pass.promotions(&mut failures).await;
    }
    if !args.no_reverts {
        pass.reverts(&mut failures).await;
    }
    Ok(failures)
}

/// What one pass read (the fleet at the fetched commit) and where its proposals go.
struct Pass<'a> {
    args: &'a ProposeArgs,
    commit: &'a str,
    files: &'a [rota_core::fleet::SourceFile],
    fleet: &'a rota_core::fleet::Fleet,
    to: Where<'a>,
    now: chrono::DateTime<chrono::Utc>,
}

impl Pass<'_> {
    /// The fleet at the pass's commit, for the promotion guard and the revert checks.
    fn query(&self) -> Query {
        Query {
            repo: self.to.repo.to_path_buf(),
            rev: self.commit.to_string(),
            base: self.commit.to_string(),
            check: false,
            wave: None,
            subdir: self.args.subdir.clone(),
            agent_signers: self.args.agent_signers.clone(),
        }
    }

    fn at(&self) -> At<'_> {
        At {
            repo: self.to.repo,
            rev: self.commit,
            subdir: self.args.subdir.as_deref(),
        }
    }

    /// New images the clouds published, proposed per channel.
    async fn images(&self, failures: &mut Vec<String>) -> Result<(), String> {
        // The simulated cloud of `rota sim serve` when the kubeconfig names one (or
        // --cloud-endpoint), else the real providers with the pod's cloud identity.
        let kubeconfig = kube::config::Kubeconfig::read().ok().map(|k| (k, None));
        let (clouds, _) = super::cloud::build(&self.args.cloud, kubeconfig.as_ref())?;
        let reports =
            discovery::discover(self.fleet, clouds.as_ref(), None, self.now, None).await?;
        for r in &reports {
            println!("images {}", discovery::describe(r, self.now));
            if let Err(e) = &r.result {
                failures.push(format!("images {}: {}", r.channel, e.join("; ")));
            }
        }
        let open = discovery::OpenPr {
            parent: self.commit,
            subdir: self.args.subdir.as_deref(),
            at: self.to,
        };
        match discovery::open_prs(self.files, self.fleet, &reports, &open).await {
            Ok(lines) => lines.iter().for_each(|l| println!("images {l}")),
            Err(e) => failures.push(format!("images: {e}")),
        }
        Ok(())
    }

    /// The promotions the guard allows, one proposal per wave. One read of the fleet and the
    /// agents' records answers for every wave.
    async fn promotions(&self, failures: &mut Vec<String>) {
        let all = match checks_at(&self.query(), self.now).await {
            Ok(all) => all,
            Err(e) => return failures.push(format!("promotions: {e}")),
        };
        for wave in self.fleet.waves().iter().skip(1) {
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
            match propose_promotion(&self.at(), &wave.name, &checks, &self.to).await {
                Ok(line) => println!("wave {}: {line}", wave.name),
                Err(e) => failures.push(format!("wave {}: {e}", wave.name)),
            }
        }
    }

    /// Reverts of waves whose pools failed a gate or could not boot their version.
    async fn reverts(&self, failures: &mut Vec<String>) {
        let checks = match revert::checks_at(&self.query()).await {
            Ok(checks) => checks,
            Err(e) => return failures.push(format!("reverts: {e}")),
        };
        for c in &checks {
            println!("{}", c.describe());
            let RevertDecision::Revert(r) = &c.decision else {
                continue;
            };
            match revert::propose(&self.at(), r, &self.to).await {
                Ok(line) => println!("revert wave {} {}: {line}", r.wave, r.channel),
                Err(e) => failures.push(format!("revert wave {} {}: {e}", r.wave, r.channel)),
            }
        }
    }
}
