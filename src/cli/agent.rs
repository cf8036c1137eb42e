//! `rota agent`: the GitOps agent of one cluster with the rotation controller embedded.
//! Every flag can also be set by an environment variable (`ROTA_*`, shown by `--help`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::agent::AgentConfig;
use crate::agent::wiring::{self, AgentParts};
use crate::controller::Config;
use crate::forge::StoreConfig;
use crate::shutdown::wait_for_stop;
use crate::source::follow::FollowConfig;
use crate::source::trust::{TrustPolicy, Verifier};
use crate::source::webhook::WebhookConfig;
use crate::source::{Auth, Secret, SourceConfig};
use rota_core::fleet::duration::GoDuration;

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
    #[command(flatten)]
    pub git: super::git_auth::GitAuthArgs,
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
    /// Abort a fetch that receives more pack data than this many bytes (before any
    /// signature check).
    #[arg(long, env = "ROTA_MAX_PACK_BYTES", default_value_t = 256 * 1024 * 1024)]
    pub max_pack_bytes: u64,
    /// Confirm one history rewrite: `<commit in force>..<new head>` (full ids). Without it a
    /// head that does not descend from the commit in force is never acted on.
    #[arg(long, env = "ROTA_CONFIRM_REWRITE")]
    pub confirm_rewrite: Option<crate::source::history::ConfirmedRewrite>,
    /// This agent's SSH private key: its promotion records and its image ledger's appends
    /// are signed with it.
    #[arg(long, env = "ROTA_RECORDS_SIGNING_KEY")]
    pub records_signing_key: Option<PathBuf>,
    /// Allowed-signers file of the agents (principal: cluster name, namespace
    /// `rota-records`): the promotion guard then counts only records signed by the agent of
    /// the cluster they speak for.
    #[arg(long, env = "ROTA_AGENT_SIGNERS")]
    pub agent_signers: Option<PathBuf>,
    #[command(flatten)]
    pub cloud: super::cloud::CloudArgs,
    /// The version the agent labels its resources with and its controller acts as.
    #[arg(long, env = "ROTA_AGENT_VERSION")]
    pub agent_version: Option<String>,
    /// Install (server-side-apply) the NodePoolRotation CRD at start; needs RBAC to write
    /// CustomResourceDefinitions, which the deploy/ manifests do not grant. Without it the
    /// CRD must be installed already (`rota crd | kubectl apply -f -`).
    #[arg(long, env = "ROTA_INSTALL_CRD")]
    pub install_crd: bool,
    /// Identity in the leader Lease (default: host name and process ID).
    #[arg(long, env = "ROTA_IDENTITY")]
    pub identity: Option<String>,
    /// Namespace of the leader Lease.
    #[arg(long, env = "ROTA_LEASE_NAMESPACE", default_value = "kube-system")]
    pub lease_namespace: String,
    /// Run the controller's clock this many times faster (match `rota sim serve --speed`).
    #[arg(long, env = "ROTA_SPEED", default_value_t = 1.0)]
    pub speed: f64,
    /// Directory of secrets the fleet repo names (`urlSecret`), a mounted Secret: names are
    /// resolved here only, read with a size cap; paths are never taken from the repo.
    #[arg(long, env = "ROTA_SECRETS_DIR")]
    pub secrets_dir: Option<PathBuf>,
    /// Logs, metrics and stuck detection.
    #[command(flatten)]
    pub ops: crate::telemetry::OperateArgs,
    /// Where statuses go: a forge's commit statuses instead of git notes.
    #[command(flatten)]
    pub forge: super::forge::ForgeArgs,
    /// Which contexts the forge gets: `pools` (`rota/<cluster>` and `rota/<cluster>/<pool>`)
    /// or `waves` (one `rota/wave/<name>` per wave, written by the agent of the wave's first
    /// cluster by name: for fleets of hundreds of clusters and more). Git notes always hold
    /// every pool's status.
    #[arg(long, env = "ROTA_STATUS_CONTEXTS", default_value = "pools",
        value_parser = crate::report::economy::Contexts::parse)]
    pub status_contexts: crate::report::economy::Contexts,
    /// The statuses the whole fleet may post an hour with the forge token, shared by its
    /// agents (each takes this divided by the fleet's clusters, or by its waves with
    /// `--status-contexts waves`); past its share an agent defers and catches up, the last
    /// state of each context always written. Default: 3000 on GitHub (its token has 5,000
    /// requests an hour; bursts reach 1.5 times the budget), none on GitLab and Gitea.
    #[arg(long, env = "ROTA_STATUS_BUDGET", value_parser = positive_rate)]
    pub status_budget: Option<f64>,
    /// The fleet page (`rota ui`) the wave rollup status links to (`URL/?wave=NAME`).
    #[arg(long, env = "ROTA_STATUS_PAGE_URL")]
    pub status_page_url: Option<String>,
}

fn positive_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 => Ok(n),
        _ => Err(format!("{s:?} is not a number of statuses an hour above 0")),
    }
}

pub fn run(args: AgentArgs) -> ExitCode {
    let rt = match super::startup::long_running(args.speed, &args.ops) {
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
    let metrics = super::startup::serve_metrics(&args.ops, &args.cluster).await?;
    let (kcfg, kubeconfig) =
        crate::kube::kubeconfig::load(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let (groups, cloud) = super::cloud::build(&args.cloud, kubeconfig.as_ref())?;
    let client = kube::Client::try_from(kcfg).map_err(|e| format!("Kubernetes client: {e}"))?;
    let env = |var: &str| std::env::var(var).ok();
    let auth = fetch_auth(&args, &env)?;
    let verifier = verifier_of(&args)?;
    let webhook = webhook_of(&args)?;
    let version = args
        .agent_version
        .clone()
        .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string());
    let identity = args.identity.clone().unwrap_or_else(|| {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "rota".into());
        format!("{host}-{}", std::process::id())
    });
    let cc = controller_config(&args, &version, &identity);
    let ac = agent_config(&args, &version);
    for f in [&args.records_signing_key, &args.agent_signers]
        .into_iter()
        .flatten()
    {
        std::fs::metadata(f).map_err(|e| format!("{}: {e}", f.display()))?;
    }
    let statuses = status_store(&args, &env)?;
    let cancel = CancellationToken::new();
    let mut running = wiring::start(
        AgentParts {
            agent: ac,
            controller: cc,
            client,
            groups,
            // EKS node groups, GKE node pools and AKS agent pools with the real providers.
            owners: super::cloud::owners(&args.cloud, &cloud),
            source: SourceConfig {
                url: args.repo.clone(),
                branch: args.branch.clone(),
                auth,
                depth: args.depth,
            },
            state_dir: args.state_dir.clone(),
            follow: FollowConfig {
                interval: args.poll.as_duration(),
                webhook,
                watch_dir: args.watch.clone(),
            },
            fetch_limits: crate::source::FetchLimits {
                max_pack_bytes: args.max_pack_bytes,
                ..Default::default()
            },
            evidence: crate::report::evidence::EvidenceKeys {
                signing_key: args.records_signing_key.clone(),
                agent_signers: args.agent_signers.clone(),
            },
            verifier,
            statuses,
            metrics,
            clock: None,
        },
        cancel.clone(),
    )
    .await
    .map_err(|e| e.to_string())?;
    eprintln!(
        "rota agent: cluster {}, repo {} (branch {}), version {version}, identity {identity}, cloud {cloud}{}",
        args.cluster,
        crate::source::redact_url(&args.repo),
        args.branch,
        running
            .webhook_addr()
            .map(|a| format!(", webhooks on {a}"))
            .unwrap_or_default(),
    );
    // A task that ends on its own (or panics) takes the process down: never a zombie whose
    // probes stay green while nothing acts.
    let ended = running.supervise(wait_for_stop()).await;
    cancel.cancel();
    if let Err(e) = ended {
        return Err(format!("{e}: exiting so that the agent is restarted"));
    }
    running.join().await;
    Ok(())
}

/// The verifier of the fleet's commits (`--allowed-signers`, `--gpg-keyring`); `None`: no
/// signature is required.
fn verifier_of(args: &AgentArgs) -> Result<Option<Arc<Verifier>>, String> {
    let policy = TrustPolicy {
        ssh_allowed_signers: args.allowed_signers.clone(),
        gpg_keyring: args.gpg_keyring.clone(),
    };
    if !policy.is_enabled() {
        return Ok(None);
    }
    Ok(Some(Arc::new(
        Verifier::new(&policy).map_err(|e| e.to_string())?,
    )))
}

/// The push webhook receiver: where it listens and the secret its senders sign with (both
/// flags, or none).
fn webhook_of(args: &AgentArgs) -> Result<Option<(SocketAddr, WebhookConfig)>, String> {
    match (&args.webhook_listen, &args.webhook_secret_file) {
        (Some(addr), Some(f)) => Ok(Some((
            *addr,
            WebhookConfig {
                secret: Secret::from_file(f).map_err(|e| e.to_string())?,
                branch: Some(args.branch.clone()),
                senders: &crate::forge::webhook::FORGES,
            },
        ))),
        _ => Ok(None),
    }
}

/// The rotation controller's settings: who it is (version, identity), its Lease, its speed
/// and what it assumes of the cloud and the cluster autoscaler.
fn controller_config(args: &AgentArgs, version: &str, identity: &str) -> Config {
    let mut cc = Config::new(version, identity);
    cc.lease_namespace = args.lease_namespace.clone();
    cc.speed = args.speed;
    cc.stuck_after = args.ops.stuck_after.as_duration();
    cc.describe_lag = args.ops.describe_lag.as_duration();
    cc.idle_describe_interval = args.ops.idle_describe_interval.as_duration();
    cc.cluster_autoscaler = !args.ops.no_cluster_autoscaler;
    cc
}

/// The agent loop's settings: its cluster and version, where in the repo it reads, how it
/// resyncs and reports, and whether it installs the CRD or takes a rewritten history.
fn agent_config(args: &AgentArgs, version: &str) -> AgentConfig {
    let mut ac = AgentConfig::new(&args.cluster);
    ac.version = version.to_string();
    ac.subdir = args.subdir.clone();
    ac.resync = args.resync.as_duration();
    ac.install_crd = args.install_crd;
    ac.secrets_dir = args.secrets_dir.clone();
    ac.report = crate::agent::reporting::ReportConfig {
        contexts: args.status_contexts,
        page_url: args.status_page_url.clone(),
        budget: args.status_budget,
    };
    ac.confirm_rewrite = args.confirm_rewrite;
    ac
}

/// How to fetch the fleet repo: an SSH key (and its passphrase, from
/// --ssh-key-passphrase-file or ROTA_SSH_KEY_PASSPHRASE), an HTTPS token (--token-file or
/// ROTA_TOKEN), or nothing.
pub fn fetch_auth(args: &AgentArgs, env: &dyn Fn(&str) -> Option<String>) -> Result<Auth, String> {
    args.git.auth(env)
}

/// Where statuses go: GitHub (--github-repo), GitLab (--gitlab-project) or Gitea
/// (--gitea-repo), each with its token from a file or the environment; `None`: git notes.
pub fn status_store(
    args: &AgentArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<StoreConfig>, String> {
    args.forge.store_config(env)
}
