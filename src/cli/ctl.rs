//! `rota ctl pause|resume|retry|complete-soak --cluster C --pool P`: an operator's request
//! to the rotation under way, outside git (see [`rota_core::rotate::operator`]). It asks the API
//! server who the caller is (a SelfSubjectReview, `kubectl auth whoami`), then sets the
//! annotation `rota.dev/request=<verb>@<time>@<that user>` on the pool's NodePoolRotation,
//! exactly what `kubectl annotate nodepoolrotation P rota.dev/request=pause@<time>@<you>
//! --overwrite` would do; the admission policy rota ships refuses any other name there. The
//! controller applies it, records it (status, Event, commit status) and clears it.
//!
//! The caller needs the `rota-operator` ClusterRole (deploy/manifests/operator-rbac.yaml).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use rota_core::rotate::operator::{REQUEST_ANNOTATION, Request, Verb};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CtlVerb {
    /// Hold the rotation where it is until `resume`.
    Pause,
    /// Continue a rotation paused with `pause`.
    Resume,
    /// Clear a halt (gate failure or drain timeout with `pause`, nodes never Ready) and retry.
    Retry,
    /// End the current batch or pool soak now (the gates must still pass).
    CompleteSoak,
}

#[derive(Args, Debug)]
pub struct CtlArgs {
    pub verb: CtlVerb,
    /// The cluster (its kubeconfig context, unless --context says otherwise).
    #[arg(long)]
    pub cluster: String,
    /// The pool (its NodePoolRotation has the pool's name).
    #[arg(long)]
    pub pool: String,
    /// Kubeconfig (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: the one named like --cluster).
    #[arg(long)]
    pub context: Option<String>,
    /// A note recorded beside the request (who asked for it, why; free text, at most 80
    /// characters). Who made the request is not this: it is your Kubernetes identity, as
    /// the API server knows it.
    #[arg(long, alias = "note")]
    pub by: Option<String>,
}

fn verb(v: CtlVerb) -> Verb {
    match v {
        CtlVerb::Pause => Verb::Pause,
        CtlVerb::Resume => Verb::Resume,
        CtlVerb::Retry => Verb::Retry,
        CtlVerb::CompleteSoak => Verb::CompleteSoak,
    }
}

async fn client(args: &CtlArgs) -> Result<kube::Client, String> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let k = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let context = args.context.clone().unwrap_or_else(|| args.cluster.clone());
            let opts = kube::config::KubeConfigOptions {
                context: Some(context.clone()),
                ..Default::default()
            };
            kube::Config::from_custom_kubeconfig(k, &opts)
                .await
                .map_err(|e| format!("{} context {context:?}: {e}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("no Kubernetes configuration: {e}"))?,
    };
    kube::Client::try_from(config).map_err(|e| format!("Kubernetes client: {e}"))
}

/// Sets the request annotation (`kube::operator`); returns the request written.
pub async fn request(args: &CtlArgs) -> Result<Request, String> {
    let client = client(args).await?;
    crate::kube::operator::request(
        client,
        &args.cluster,
        &args.pool,
        verb(args.verb),
        args.by.as_deref(),
        chrono::Utc::now(),
    )
    .await
}

pub fn run(args: CtlArgs) -> ExitCode {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rota: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(request(&args)) {
        Ok(r) => {
            println!(
                "requested {} on {}/{} as {} ({REQUEST_ANNOTATION}={}); the controller applies it at its next reconcile:\n  kubectl get nodepoolrotation {} -o wide",
                r.verb.as_str(),
                args.cluster,
                args.pool,
                rota_core::sanitize::line(r.by.as_deref().unwrap_or("")),
                rota_core::sanitize::line(&r.id),
                args.pool
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rota ctl: {e}");
            ExitCode::from(2)
        }
    }
}
