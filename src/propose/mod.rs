//! The propose workflow: one scheduled pass (`rota propose`, the CronJob of
//! deploy/components/proposals) that turns what the fleet's sources and the agents' records
//! say into pull requests, so that a fleet's chain "new image, canary pull request, promotion
//! pull requests" needs people only to review and merge. The pass mirrors the fleet repo by
//! URL (as the agent does, with its credentials), reads the fleet at the branch's head, then
//! runs three steps, each whatever the others did:
//!
//! - [`images`]: for each channel with a `source`, the newest baked build (discovery's
//!   findings, `rota images discover --open-pr`), proposed on `rota/images/<channel>`;
//! - [`promotions`]: for each wave after the first, the promotion the guard allows (`rota
//!   promote --wave W --open-pr`), proposed on `rota/promote/<wave>`;
//! - [`reverts`]: for each wave whose pools recorded a failure (a gate, an image that did not
//!   boot) on the version it pins, the wave pinned back to the version before (`rota promote
//!   --revert --wave W --open-pr`), proposed on `rota/revert/<wave>/<channel>-<version>`.
//!
//! Each proposal is the core's fleet-file edit (`rota_core::edit`) committed on its branch
//! (`discovery`, `promotion`), the branch pushed to the repo's URL through libgit2 with the
//! same credentials (the image has no git) and its one pull request opened or updated on the
//! forge (`promotion::propose`, `forge::pulls`); without a forge, the branches alone. The bake
//! is never skipped here (`--security` is a person's call, made with `rota images discover`).
//!
//! The command line (`cli::propose`) only parses the flags, builds the clouds discovery asks
//! and prints what the pass says.

mod images;
mod promotions;
mod reverts;

use std::path::PathBuf;
use std::sync::Arc;

use rota_core::cloud::NodeGroups;
use rota_core::fleet::{Fleet, SourceFile};

use crate::forge::StoreConfig;
use crate::promotion::propose::{Remote, Where};
use crate::report::notes::PushTarget;
use crate::source::{Auth, SourceConfig, redact_url};

/// What one pass is asked to do.
pub struct Options {
    /// The fleet repo's URL (or a local path): mirrored under `state_dir`, and where the
    /// proposal branches are pushed.
    pub repo: String,
    /// The branch the fleet is read from and the pull requests go into.
    pub branch: String,
    /// The fleet's folder inside the repo.
    pub subdir: Option<PathBuf>,
    /// Where the mirror is kept.
    pub state_dir: PathBuf,
    /// Allowed-signers file of the agents: the guard counts only records signed by the
    /// agent of the cluster they speak for.
    pub agent_signers: Option<PathBuf>,
    /// The repo's credentials, for the fetch and the pushes alike.
    pub auth: Auth,
    /// The forge the pull requests are opened on (`None`: the branches alone).
    pub forge: Option<StoreConfig>,
    /// Which steps run.
    pub images: bool,
    pub promotions: bool,
    pub reverts: bool,
}

/// The clouds discovery asks, built only when the pass looks for images (a build that fails
/// ends the pass, as a repo that cannot be read does).
pub type Clouds<'a> = &'a dyn Fn() -> Result<Arc<dyn NodeGroups>, String>;

/// Where the pass's lines go, as it goes (the command prints them).
pub type Say<'a> = &'a mut (dyn FnMut(String) + Send);

/// One pass. `Err`: the repo could not be mirrored or read, or the clouds not built (nothing
/// after that ran); `Ok` holds the failures of its steps, each named (every step ran).
pub async fn pass(opts: &Options, clouds: Clouds<'_>, say: Say<'_>) -> Result<Vec<String>, String> {
    let source = Arc::new(crate::source::open_mirror(
        SourceConfig {
            url: opts.repo.clone(),
            branch: opts.branch.clone(),
            auth: opts.auth.clone(),
            depth: None,
        },
        &opts.state_dir,
        "propose.git",
    )?);
    let (s, subdir) = (source.clone(), opts.subdir.clone());
    let commit = tokio::task::spawn_blocking(move || s.fetch_with_fleet_notes(subdir.as_deref()))
        .await
        .map_err(|e| format!("the fetch did not finish: {e}"))?
        .map_err(|e| e.to_string())?
        .commit
        .to_string();
    let mirror_path = source.mirror_path();
    say(format!(
        "{} {} at {}",
        redact_url(&opts.repo),
        opts.branch,
        &commit[..12]
    ));
    let push = PushTarget {
        url: opts.repo.clone(),
        auth: opts.auth.clone(),
        known_hosts: source.known_hosts().cloned(),
    };
    let (files, _, _) = crate::source::read::read_git(mirror_path, &commit, opts.subdir.as_deref())
        .map_err(|d| d.to_string())?;
    let fleet = rota_core::fleet::load_files(&files).map_err(|d| d.to_string())?;
    let pass = Pass {
        opts,
        commit: &commit,
        files: &files,
        fleet: &fleet,
        to: Where {
            repo: mirror_path,
            remote: Remote::Url(&push),
            base: &opts.branch,
            forge: opts.forge.as_ref(),
        },
        now: chrono::Utc::now(),
    };
    let mut failures = Vec::new();
    if opts.images {
        pass.images(clouds()?, say, &mut failures).await?;
    }
    if opts.promotions {
        pass.promotions(say, &mut failures).await;
    }
    if opts.reverts {
        pass.reverts(say, &mut failures).await;
    }
    Ok(failures)
}

/// What one pass read (the fleet at the fetched commit) and where its proposals go.
struct Pass<'a> {
    opts: &'a Options,
    commit: &'a str,
    files: &'a [SourceFile],
    fleet: &'a Fleet,
    to: Where<'a>,
    now: chrono::DateTime<chrono::Utc>,
}

impl Pass<'_> {
    /// The fleet at the pass's commit, for the promotion guard and the revert checks.
    fn query(&self) -> crate::promotion::Query {
        crate::promotion::Query {
            repo: self.to.repo.to_path_buf(),
            rev: self.commit.to_string(),
            base: self.commit.to_string(),
            check: false,
            wave: None,
            subdir: self.opts.subdir.clone(),
            agent_signers: self.opts.agent_signers.clone(),
        }
    }

    /// Where a promotion or a revert is written from: the pass's commit.
    fn at(&self) -> crate::promotion::commit::At<'_> {
        crate::promotion::commit::At {
            repo: self.to.repo,
            rev: self.commit,
            subdir: self.opts.subdir.as_deref(),
        }
    }
}
