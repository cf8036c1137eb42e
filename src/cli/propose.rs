//! `rota propose`: the proposer a schedule runs (deploy/components/proposals, a CronJob).
//! One pass of the propose workflow ([`crate::propose`]): new images per channel on
//! `rota/images/<channel>`, the promotions the guard allows on `rota/promote/<wave>`, the
//! reverts of versions that failed on `rota/revert/<wave>/<channel>-<version>`, each a branch
//! pushed to the repo's URL and one pull request on the forge. This file parses the flags,
//! builds the clouds discovery asks and prints what the pass says.
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
use crate::propose::{Options, pass};

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
    let env = |k: &str| std::env::var(k).ok();
    let options = args.git.auth(&env).and_then(|auth| {
        Ok(Options {
            repo: args.repo.clone(),
            branch: args.branch.clone(),
            subdir: args.subdir.clone(),
            state_dir: args.state_dir.clone(),
            agent_signers: args.agent_signers.clone(),
            auth,
            forge: args.forge.store_config(&env)?,
            images: !args.no_images,
            promotions: !args.no_promotions,
            reverts: !args.no_reverts,
        })
    });
    // The simulated cloud of `rota sim serve` when the kubeconfig names one (or
    // --cloud-endpoint), else the real providers with the pod's cloud identity.
    let clouds = || {
        let kubeconfig = kube::config::Kubeconfig::read().ok().map(|k| (k, None));
        super::cloud::build(&args.cloud, kubeconfig.as_ref()).map(|(groups, _)| groups)
    };
    let mut print = |line: String| println!("{line}");
    let passed = match options {
        Ok(options) => rt.block_on(pass(&options, &clouds, &mut print)),
        Err(e) => Err(e),
    };
    match passed {
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
