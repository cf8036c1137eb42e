//! `rota where CHANNEL@VERSION`: which waves and pools run a version, are moving to it, or
//! are held before it (and by what), from the fleet repo and the agents' status notes.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::ui::load::{RepoAt, page};

#[derive(Args, Debug)]
pub struct WhereArgs {
    /// The channel and version, e.g. `general@2026.11.2`.
    pub target: String,
    /// The fleet repo (a local clone with the rota notes fetched, or the bare repo).
    #[arg(long, env = "ROTA_REPO", default_value = ".")]
    pub repo: PathBuf,
    #[arg(long, default_value = "HEAD")]
    pub rev: String,
    #[arg(long = "path")]
    pub subdir: Option<PathBuf>,
    /// Allowed-signers file of the agents (principal: cluster name): count only records
    /// signed by the agent of the cluster they speak for.
    #[arg(long, env = "ROTA_AGENT_SIGNERS")]
    pub agent_signers: Option<PathBuf>,
}

pub fn run(args: WhereArgs) -> ExitCode {
    crate::telemetry::init_one_shot();
    crate::ui::load::trust_the_object_store();
    let Some((channel, version)) = args
        .target
        .split_once('@')
        .filter(|(c, v)| !c.is_empty() && !v.is_empty())
    else {
        eprintln!(
            "rota where: {:?} is not CHANNEL@VERSION (e.g. general@2026.11.2)",
            args.target
        );
        return ExitCode::from(2);
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rota: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let at = RepoAt {
        repo: args.repo.clone(),
        rev: args.rev.clone(),
        subdir: args.subdir.clone(),
        agent_signers: args.agent_signers.clone(),
    };
    let p = match rt.block_on(page(&at, chrono::Utc::now())) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rota where: {e}");
            return ExitCode::from(2);
        }
    };
    match crate::ui::text::where_is(&p, channel, version) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rota where: {e}");
            ExitCode::from(1)
        }
    }
}
