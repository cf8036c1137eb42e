//! `rota controller`: the rotation controller alone, on the NodePoolRotation resources of one
//! cluster (the agent embeds the same runtime).
//!
//! The cloud comes from `--cloud` (see `cli::cloud`): the simulated cloud of a `rota sim serve`
//! process, reached over the loopback endpoint that process names in the kubeconfig it writes
//! (cluster extension `rota.dev/sim-cloud`) or `--cloud-endpoint`, or the real AWS, GCP and
//! Azure providers.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::controller::{Config, Controller};

#[derive(Args, Debug)]
pub struct ControllerArgs {
    /// Kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the kubeconfig (default: its current context).
    #[arg(long)]
    pub context: Option<String>,
    #[command(flatten)]
    pub cloud: super::cloud::CloudArgs,
    /// The version this controller acts as: names its Lease and selects the resources
    /// labelled `rota.dev/agent-version` with it. Default: rota's own version.
    #[arg(long)]
    pub agent_version: Option<String>,
    /// Do not reconcile resources without a `rota.dev/agent-version` label (run a new
    /// version side by side with the default one).
    #[arg(long)]
    pub not_default: bool,
    /// Identity in the Lease (default: host name and process ID).
    #[arg(long)]
    pub identity: Option<String>,
    /// Namespace of the Lease.
    #[arg(long, default_value = "kube-system")]
    pub lease_namespace: String,
    /// The cluster this controller runs in, as the fleet repo names it: the `cluster` label
    /// of its metrics (empty when unset), so that per-cluster alerts see it apart.
    #[arg(long, env = "ROTA_CLUSTER", default_value = "")]
    pub cluster: String,
    /// Run the controller's clock this many times faster (match `rota sim serve --speed`).
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    #[command(flatten)]
    pub ops: crate::telemetry::OperateArgs,
}

pub fn run(args: ControllerArgs) -> ExitCode {
    let rt = match super::startup::long_running(args.speed, &args.ops) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(async move {
        let metrics = match super::startup::serve_metrics(&args.ops, &args.cluster).await {
            Ok(m) => m,
            Err(e) => {
                eprintln!("rota: {e}");
                return ExitCode::from(2);
            }
        };
        let (config, kubeconfig) = match crate::kube::kubeconfig::load(
            args.kubeconfig.as_deref(),
            args.context.as_deref(),
        )
        .await
        {
            Ok(c) => c,
            Err(e) => {
                eprintln!("rota: {e}");
                return ExitCode::from(2);
            }
        };
        let (groups, cloud) = match super::cloud::build(&args.cloud, kubeconfig.as_ref()) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("rota: {e}");
                return ExitCode::from(2);
            }
        };
        let client = match kube::Client::try_from(config) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("rota: cannot build a Kubernetes client: {e}");
                return ExitCode::from(2);
            }
        };
        let version = args
            .agent_version
            .clone()
            .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string());
        let identity = args.identity.clone().unwrap_or_else(|| {
            let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "rota".into());
            format!("{host}-{}", std::process::id())
        });
        let mut cfg = Config::new(&version, &identity);
        cfg.is_default = !args.not_default;
        cfg.lease_namespace = args.lease_namespace.clone();
        cfg.speed = args.speed;
        cfg.stuck_after = args.ops.stuck_after.as_duration();
        cfg.describe_lag = args.ops.describe_lag.as_duration();
        cfg.idle_describe_interval = args.ops.idle_describe_interval.as_duration();
        cfg.cluster_autoscaler = !args.ops.no_cluster_autoscaler;
        eprintln!(
            "rota controller: version {version}{}, identity {identity}, lease {}/{}, cloud {cloud}",
            if cfg.is_default { " (default)" } else { "" },
            cfg.lease_namespace,
            crate::kube::ownership::lease_name(&version),
        );
        let mut controller = Controller::with_metrics(client, groups, cfg, metrics);
        controller.run(crate::shutdown::wait_for_stop()).await;
        ExitCode::SUCCESS
    })
}
