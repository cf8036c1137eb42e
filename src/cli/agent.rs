//! `rota agent`: the GitOps agent of one cluster with the rotation controller embedded.
//! Every flag can also be set by an environment variable (`ROTA_*`, shown by `--help`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::controller::{ControllerArgs, load_config};
use crate::agent::{Agent, AgentConfig};
use crate::controller::{Config, Controller};
use crate::fleet::duration::GoDuration;
use crate::report::github::GitHubConfig;
use crate::report::{GitNotesStore, StoreConfig, store_from_config};
use crate::source::follow::{FollowConfig, follow};
use crate::source::trust::{TrustPolicy, Verifier};
use crate::source::webhook::WebhookConfig;
use crate::source::{Auth, GitSource, Secret, SourceConfig};

#[derive(Args, Debug)]
pub struct AgentArgs {
    /// The fleet repo: a URL (ssh://, https://, git://, file://) or a local path.
    #[arg(long, env = "ROTA_REPO")]
    pub repo: String,
    /// The branch to follow.
    #[arg(long, env = "ROTA_BRANCH", default_value = "main")]
    pub branch: String,
    /// The fleet repo is in this folder of the git tree.
    #[arg(long = "path", env = "ROTA_PATH")]
    pub subdir: Option<PathBuf>,
    /// This cluster's name in the fleet repo.
    #[arg(long, env = "ROTA_CLUSTER")]
    pub cluster: String,
    /// Kubeconfig (default: $KUBECONFIG, else in-cluster).
    #[arg(long, env = "ROTA_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the kubeconfig (default: its current context).
    #[arg(long, env = "ROTA_CONTEXT")]
    pub context: Option<String>,
    /// Where the agent keeps its bare mirror of the repo.
    #[arg(long, env = "ROTA_STATE_DIR", default_value = "/var/lib/rota")]
    pub state_dir: PathBuf,
    /// Fetch this often (webhooks and --watch fetch at once).
    #[arg(long, env = "ROTA_POLL", default_value = "1m")]
    pub poll: GoDuration,
    /// Re-plan and re-report this often without a new commit.
    #[arg(long, env = "ROTA_RESYNC", default_value = "10s")]
    pub resync: GoDuration,
    /// Shallow fetch depth (ignored for local repos).
    #[arg(long, env = "ROTA_DEPTH")]
    pub depth: Option<u32>,
    /// SSH private key (ssh URLs); needs --known-hosts.
    #[arg(long, env = "ROTA_SSH_KEY", requires = "known_hosts")]
    pub ssh_key: Option<PathBuf>,
    /// known_hosts file the SSH server's key must be listed in.
    #[arg(long, env = "ROTA_KNOWN_HOSTS")]
    pub known_hosts: Option<PathBuf>,
    /// File holding an HTTPS token (https URLs). Never logged.
    #[arg(long, env = "ROTA_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// User name sent with the token (`x-access-token` for GitHub, `oauth2` for GitLab).
    #[arg(long, env = "ROTA_TOKEN_USER", default_value = "x-access-token")]
    pub token_user: String,
    /// Listen for push webhooks on this address (e.g. 0.0.0.0:8090).
    #[arg(long, env = "ROTA_WEBHOOK_LISTEN", requires = "webhook_secret_file")]
    pub webhook_listen: Option<SocketAddr>,
    /// File holding the webhook's shared secret.
    #[arg(long, env = "ROTA_WEBHOOK_SECRET_FILE")]
    pub webhook_secret_file: Option<PathBuf>,
    /// Development: fetch as soon as this local working copy changes.
    #[arg(long, env = "ROTA_WATCH")]
    pub watch: Option<PathBuf>,
    /// Act only on commits signed by a key in this SSH allowed-signers file.
    #[arg(long, env = "ROTA_ALLOWED_SIGNERS")]
    pub allowed_signers: Option<PathBuf>,
    /// Act only on commits signed by a key in this OpenPGP keyring (armored export).
    #[arg(long, env = "ROTA_GPG_KEYRING")]
    pub gpg_keyring: Option<PathBuf>,
    #[command(flatten)]
    pub cloud: super::cloud::CloudArgs,
    /// The version the agent labels its resources with and its controller acts as.
    #[arg(long, env = "ROTA_AGENT_VERSION")]
    pub agent_version: Option<String>,
    /// Identity in the leader Lease (default: host name and process ID).
    #[arg(long, env = "ROTA_IDENTITY")]
    pub identity: Option<String>,
    /// Namespace of the leader Lease.
    #[arg(long, env = "ROTA_LEASE_NAMESPACE", default_value = "kube-system")]
    pub lease_namespace: String,
    /// Run the controller's clock this many times faster (match `rota sim serve --speed`).
    #[arg(long, env = "ROTA_SPEED", default_value_t = 1.0)]
    pub speed: f64,
    /// Post statuses to this GitHub repository (`owner/repo`) instead of git notes (the
    /// promotion records stay in git notes).
    #[arg(long, env = "ROTA_GITHUB_REPO", requires = "github_token_file")]
    pub github_repo: Option<String>,
    /// File holding the GitHub token ("Commit statuses: write"). Never logged.
    #[arg(long, env = "ROTA_GITHUB_TOKEN_FILE")]
    pub github_token_file: Option<PathBuf>,
    /// Directory of secrets the fleet repo names (`urlSecret`), a mounted Secret: names are
    /// resolved here only, read with a size cap; paths are never taken from the repo.
    #[arg(long, env = "ROTA_SECRETS_DIR")]
    pub secrets_dir: Option<PathBuf>,
    /// Logs, metrics and stuck detection.
    #[command(flatten)]
    pub ops: crate::telemetry::OperateArgs,
    /// GitHub API base (`https://HOST/api/v3` for GitHub Enterprise Server).
    #[arg(
        long,
        env = "ROTA_GITHUB_API_URL",
        default_value = "https://api.github.com"
    )]
    pub github_api_url: String,
}

pub fn run(args: AgentArgs) -> ExitCode {
    let rt = match super::long_running(args.speed, &args.ops) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(async move {
        match start(args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("rota: {e}");
                ExitCode::from(2)
            }
        }
    })
}

async fn start(args: AgentArgs) -> Result<(), String> {
    let cargs = ControllerArgs {
        kubeconfig: args
            .kubeconfig
            .clone()
            .or_else(|| std::env::var_os("KUBECONFIG").map(PathBuf::from)),
        context: args.context.clone(),
        cloud: args.cloud.clone(),
        agent_version: args.agent_version.clone(),
        not_default: false,
        identity: args.identity.clone(),
        lease_namespace: args.lease_namespace.clone(),
        speed: args.speed,
        ops: args.ops.clone(),
    };
    let metrics = super::serve_metrics(&args.ops).await?;
    let (kcfg, kubeconfig) = load_config(&cargs).await?;
    let (groups, cloud) = super::cloud::build(&args.cloud, kubeconfig.as_ref())?;
    let client = kube::Client::try_from(kcfg).map_err(|e| format!("Kubernetes client: {e}"))?;
    let auth = if let Some(key) = &args.ssh_key {
        Auth::SshKey {
            user: None,
            private_key: key.clone(),
            public_key: None,
            passphrase: None,
            known_hosts: args.known_hosts.clone().unwrap_or_default(),
        }
    } else if let Some(f) = &args.token_file {
        Auth::HttpsToken {
            username: args.token_user.clone(),
            token: Secret::from_file(f).map_err(|e| e.to_string())?,
        }
    } else {
        Auth::None
    };
    std::fs::create_dir_all(&args.state_dir)
        .map_err(|e| format!("{}: {e}", args.state_dir.display()))?;
    let mirror = args.state_dir.join(format!("fleet-{}.git", args.cluster));
    let source = Arc::new(
        GitSource::open(
            SourceConfig {
                url: args.repo.clone(),
                branch: args.branch.clone(),
                auth,
                depth: args.depth,
            },
            &mirror,
        )
        .map_err(|e| e.to_string())?,
    );
    let policy = TrustPolicy {
        ssh_allowed_signers: args.allowed_signers.clone(),
        gpg_keyring: args.gpg_keyring.clone(),
    };
    let verifier = if policy.is_enabled() {
        Some(Arc::new(Verifier::new(&policy).map_err(|e| e.to_string())?))
    } else {
        None
    };
    let webhook = match (&args.webhook_listen, &args.webhook_secret_file) {
        (Some(addr), Some(f)) => Some((
            *addr,
            WebhookConfig {
                secret: Secret::from_file(f).map_err(|e| e.to_string())?,
                branch: Some(args.branch.clone()),
            },
        )),
        _ => None,
    };
    let version = args
        .agent_version
        .clone()
        .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string());
    let identity = args.identity.clone().unwrap_or_else(|| {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "rota".into());
        format!("{host}-{}", std::process::id())
    });
    let cancel = CancellationToken::new();
    let follower = follow(
        Arc::clone(&source),
        FollowConfig {
            interval: args.poll.as_duration(),
            webhook,
            watch_dir: args.watch.clone(),
        },
        cancel.clone(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let mut cc = Config::new(&version, &identity);
    cc.lease_namespace = args.lease_namespace.clone();
    cc.speed = args.speed;
    cc.stuck_after = args.ops.stuck_after.as_duration();
    let mut controller = Controller::with_metrics(client.clone(), groups, cc, metrics.clone());
    let fetches = tokio::spawn(record_fetches(follower.state.clone(), metrics.clone()));
    let clock = controller.clock();
    let notes = Arc::new(GitNotesStore::for_source(&source, &args.cluster));
    let mut ac = AgentConfig::new(&args.cluster);
    ac.version = version.clone();
    ac.subdir = args.subdir.clone();
    ac.resync = args.resync.as_duration();
    ac.secrets_dir = args.secrets_dir.clone();
    let store = match (&args.github_repo, &args.github_token_file) {
        (Some(full), Some(token)) => {
            let (owner, repo) = full
                .split_once('/')
                .ok_or_else(|| format!("--github-repo must be owner/repo, got {full:?}"))?;
            let mut gh = GitHubConfig::new(
                owner,
                repo,
                Secret::from_file(token).map_err(|e| e.to_string())?,
            );
            gh.api_url = args.github_api_url.clone();
            store_from_config(&StoreConfig::GitHub(gh), Arc::clone(&notes))
                .map_err(|e| e.to_string())?
        }
        _ => Arc::clone(&notes) as Arc<dyn crate::report::StatusStore>,
    };
    let store = Arc::new(crate::report::metered::MeteredStore::new(
        store,
        metrics.clone(),
    ));
    let mut agent = Agent::new(
        ac,
        source,
        client,
        Arc::clone(&notes),
        store,
        verifier,
        clock,
    );
    agent.set_metrics(metrics.clone());
    agent.set_notifier(controller.notifier());
    eprintln!(
        "rota agent: cluster {}, repo {} (branch {}), version {version}, identity {identity}, cloud {cloud}{}",
        args.cluster,
        crate::source::redact_url(&args.repo),
        args.branch,
        follower
            .webhook_addr
            .map(|a| format!(", webhooks on {a}"))
            .unwrap_or_default(),
    );
    let agent_task = tokio::spawn(agent.run(follower.state.clone(), cancel.clone()));
    let stop = cancel.clone();
    let ctl = tokio::spawn(async move { controller.run(stop.cancelled_owned()).await });
    // A task that ends on its own (or panics) takes the process down: never a zombie whose
    // probes stay green while nothing acts.
    let mut tasks = vec![
        ("agent", agent_task),
        ("controller", ctl),
        ("fetch metrics", fetches),
    ];
    let ended = crate::agent::supervise::until_stop_or_end(wait_for_stop(), &mut tasks).await;
    cancel.cancel();
    if let Err(e) = ended {
        return Err(format!("{e}: exiting so that the agent is restarted"));
    }
    for (_, t) in tasks {
        let _ = t.await;
    }
    drop(follower);
    Ok(())
}

/// `rota_git_fetches_total{outcome}` and the last good fetch, from the poll loop's state.
async fn record_fetches(
    mut state: tokio::sync::watch::Receiver<crate::source::poll::SourceState>,
    metrics: crate::metrics::Metrics,
) {
    let mut seen = 0;
    loop {
        {
            let s = state.borrow_and_update();
            if s.fetches > seen {
                seen = s.fetches;
                let outcome = if s.last_error.is_none() {
                    crate::metrics::Outcome::Ok
                } else {
                    crate::metrics::Outcome::Error
                };
                metrics.record_git_fetch(outcome, chrono::Utc::now());
            }
        }
        if state.changed().await.is_err() {
            return;
        }
    }
}

/// Ctrl-C or SIGTERM.
async fn wait_for_stop() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
