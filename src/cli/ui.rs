//! `rota ui --repo URL|PATH [--listen ADDR]`: serves the fleet page (see [`crate::ui`]) from
//! a local clone, or from a bare mirror of a URL that it fetches every `--poll`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::source::{GitSource, SourceConfig};
use crate::ui::load::RepoAt;
use crate::ui::server::{Hosts, Limits, Ui};
use rota_core::fleet::duration::GoDuration;

#[derive(Args, Debug)]
pub struct UiArgs {
    /// The fleet repo: a local clone or bare repo (read as it is), or a URL (mirrored under
    /// --state-dir and fetched every --poll, statuses notes included).
    #[arg(long, env = "ROTA_REPO", default_value = ".")]
    pub repo: String,
    /// Serve the page here.
    #[arg(long, env = "ROTA_UI_LISTEN", default_value = "127.0.0.1:8088")]
    pub listen: SocketAddr,
    /// The revision shown, for a local repo (default: HEAD).
    #[arg(long, default_value = "HEAD")]
    pub rev: String,
    /// The branch followed, for a URL.
    #[arg(long, env = "ROTA_BRANCH", default_value = "main")]
    pub branch: String,
    /// The fleet repo is in this folder of the git tree.
    #[arg(long = "path")]
    pub subdir: Option<PathBuf>,
    /// Fetch a URL this often.
    #[arg(long, env = "ROTA_POLL", default_value = "30s")]
    pub poll: GoDuration,
    /// Where the mirror of a URL is kept.
    #[arg(long, env = "ROTA_STATE_DIR", default_value = "/var/lib/rota")]
    pub state_dir: PathBuf,
    #[command(flatten)]
    pub git: super::git_auth::GitAuthArgs,
    /// Connections served at once.
    #[arg(long, default_value_t = 64)]
    pub max_connections: usize,
    /// Connections served at once from one client address (behind an Ingress or a proxy
    /// every user is one address: raise it there).
    #[arg(long, default_value_t = 16)]
    pub max_connections_per_client: usize,
    /// Answers holding the whole fleet (`/api/fleet`, `/?all=1`, a commit's statuses) built
    /// or sent at once; more get `503` with `Retry-After` at once. Each is tens of MiB at
    /// thousands of clusters: this bounds what the page holds whatever the clients do.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub max_whole_fleet_answers: u64,
    /// Also answer requests for this host name (repeatable; comma-separated in the
    /// environment). IP addresses and `localhost` are always answered; any other `Host` is
    /// refused, so that a DNS-rebinding web page cannot read the fleet through a browser.
    #[arg(
        long = "allow-host",
        env = "ROTA_UI_ALLOW_HOSTS",
        value_delimiter = ','
    )]
    pub allow_hosts: Vec<String>,
    /// Allowed-signers file of the agents (principal: cluster name): the page counts only
    /// records signed by the agent of the cluster they speak for, as the agents do.
    #[arg(long, env = "ROTA_AGENT_SIGNERS")]
    pub agent_signers: Option<PathBuf>,
}

/// A local repository when `repo` is a directory, else a URL.
fn is_local(repo: &str) -> bool {
    !repo.contains("://") && std::path::Path::new(repo).is_dir()
}

/// The mirror of a URL, fetched once now (so a wrong URL fails at start).
fn mirror(args: &UiArgs) -> Result<std::sync::Arc<GitSource>, String> {
    let auth = args.git.auth(&|k| std::env::var(k).ok())?;
    let source = crate::source::open_mirror(
        SourceConfig {
            url: args.repo.clone(),
            branch: args.branch.clone(),
            auth,
            depth: None,
        },
        &args.state_dir,
        "fleet-ui.git",
    )?;
    source
        .fetch_with_fleet_notes(args.subdir.as_deref())
        .map_err(|e| e.to_string())?;
    Ok(std::sync::Arc::new(source))
}

pub fn run(args: UiArgs) -> ExitCode {
    let _ = crate::telemetry::init(crate::telemetry::LogFormat::Human, None);
    crate::ui::load::trust_the_object_store();
    // A long-running server whose every rebuild reads the whole fleet: two arenas, and a
    // trim after each build (in the server), keep its resident size near the model it holds
    // (src/memory.rs). No periodic trim: walking a 10,000-cluster heap every 10 s cost more
    // than an open tab's polls.
    crate::memory::limit_arenas();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rota: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(async move {
        let (at, source) = if is_local(&args.repo) {
            let at = RepoAt {
                repo: PathBuf::from(&args.repo),
                rev: args.rev.clone(),
                subdir: args.subdir.clone(),
                agent_signers: args.agent_signers.clone(),
            };
            (at, None)
        } else {
            let source = match tokio::task::block_in_place(|| mirror(&args)) {
                Ok(s) => s,
                Err(e) => {
                    // Whatever the error quotes, no URL in it carries a credential.
                    eprintln!("rota ui: {}", crate::source::redact_urls_in(&e));
                    return ExitCode::from(2);
                }
            };
            let at = RepoAt {
                repo: source.mirror_path().to_path_buf(),
                rev: format!("refs/remotes/origin/{}", args.branch),
                subdir: args.subdir.clone(),
                agent_signers: args.agent_signers.clone(),
            };
            (at, Some(source))
        };
        let limits = Limits {
            max_connections: args.max_connections,
            max_per_client: args.max_connections_per_client,
            max_heavy: args.max_whole_fleet_answers as usize,
            ..Limits::default()
        };
        let ui = Ui::new(at, limits).with_hosts(Hosts::new(args.allow_hosts.clone()));
        // Build the page once before serving: a wrong path fails here, not per request, and
        // the first request is answered from a built page.
        if let Err(e) = ui.warm().await {
            eprintln!("rota ui: {e}");
            return ExitCode::from(1);
        }
        let (addr, server) = match ui.spawn(args.listen).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("rota ui: {e}");
                return ExitCode::from(2);
            }
        };
        println!("rota ui: serving the fleet page on http://{addr}/");
        if let Some(source) = source {
            let every = args
                .poll
                .as_duration()
                .max(std::time::Duration::from_secs(1));
            let subdir = args.subdir.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let s = std::sync::Arc::clone(&source);
                    let subdir = subdir.clone();
                    match tokio::task::spawn_blocking(move || {
                        s.scope_notes_to_fleet(subdir.as_deref());
                        s.fetch()
                    })
                    .await
                    {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => tracing::warn!(error = %e, "rota ui: fetch failed"),
                        Err(e) => tracing::warn!(error = %e, "rota ui: fetch task failed"),
                    }
                }
            });
        }
        let _ = tokio::signal::ctrl_c().await;
        server.abort();
        ExitCode::SUCCESS
    })
}
