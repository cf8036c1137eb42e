//! `rota ctl pause|resume|retry|complete-soak --cluster C --pool P`: an operator's request
//! to the rotation under way, outside git (see [`rota_core::rotate::operator`]). It sets the
//! annotation `rota.dev/request` on the pool's NodePoolRotation, exactly what
//! `kubectl annotate nodepoolrotation P rota.dev/request=pause@<time> --overwrite` would do;
//! the controller applies it, records it (status, Event, commit status) and clears it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::kube::crd::NodePoolRotation;
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
    /// Who asks (recorded with the request; default: $USER).
    #[arg(long, env = "USER")]
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

/// Sets the request annotation; returns the request written.
pub async fn request(args: &CtlArgs) -> Result<Request, String> {
    let client = client(args).await?;
    let api: Api<NodePoolRotation> = Api::all(client);
    let npr = api
        .get_opt(&args.pool)
        .await
        .map_err(|e| format!("reading NodePoolRotation {}: {e}", args.pool))?
        .ok_or_else(|| {
            format!(
                "no NodePoolRotation {:?} in cluster {:?} (kubectl get nodepoolrotations lists them)",
                args.pool, args.cluster
            )
        })?;
    if npr.spec.cluster != args.cluster {
        return Err(format!(
            "NodePoolRotation {:?} belongs to cluster {:?}, not {:?}: wrong --context?",
            args.pool, npr.spec.cluster, args.cluster
        ));
    }
    // Whole seconds, so that the value reads well in `kubectl get -o yaml`; the value is the
    // request's identity, so two requests in the same second by the same person are one.
    let now = chrono::Utc::now();
    let r = Request::new(verb(args.verb), now, args.by.as_deref());
    let patch = serde_json::json!({"metadata": {"annotations": {REQUEST_ANNOTATION: r.id}}});
    api.patch(&args.pool, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| format!("annotating NodePoolRotation {}: {e}", args.pool))?;
    Ok(r)
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
                "requested {} on {}/{} ({REQUEST_ANNOTATION}={}); the controller applies it at its next reconcile:\n  kubectl get nodepoolrotation {} -o wide",
                r.verb.as_str(),
                args.cluster,
                args.pool,
                r.id,
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
