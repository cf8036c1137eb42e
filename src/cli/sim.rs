//! `rota sim serve`: the simulated fleet of a fleet repo, served to kubectl and rota.
//!
//! Every cluster of the repo becomes a simulated cluster (its pools N nodes each, on the image
//! their wave pins) behind its own loopback Kubernetes API; a kubeconfig with one context per
//! cluster, named after it, is written; a ready line is printed; it serves until stopped.
//!
//! Built with the `sim` Cargo feature only (on by default; the image leaves it out).
#![cfg(feature = "sim")]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::validate::load;
use rota_core::fleet::Format;
use rota_sim::apiserver::{ApiServer, serve_http_logged};
use rota_sim::faults::FaultProfile;
use rota_sim::kubeconfig;
use rota_sim::requestlog::RequestLog;
use rota_sim::scenario::{Scenario, WorkloadProfile};
use rota_sim::store::ResourceType;
use rota_sim::world::Fleet;

#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(subcommand)]
    pub command: SimCommand,
}

#[derive(Subcommand, Debug)]
pub enum SimCommand {
    /// Serve the simulated fleet of a fleet repo over loopback HTTP until stopped.
    Serve(ServeArgs),
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub repo: super::validate::RepoArgs,
    /// Where to write the kubeconfig (one context per cluster, named after it).
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Run the simulation this many times faster than real time (boots, readiness, grace
    /// periods are divided by it).
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Seed of everything random (instance IDs, boot times, faults).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Workload profile (YAML); default: a believable cluster (see docs/simulated-fleet.md).
    #[arg(long)]
    pub workloads: Option<PathBuf>,
    /// Fault profile (YAML); default: no faults, boots of 60-120 s.
    #[arg(long)]
    pub faults: Option<PathBuf>,
    /// Write a line per HTTP request served (Kubernetes APIs and the cloud endpoint: server,
    /// method, path and query, status, bytes sent) to this file; the `agent_scale` bench reads it.
    #[arg(long)]
    pub request_log: Option<PathBuf>,
    /// Launch only images the fleet repo names (where it says they exist). Without it, the
    /// repo's images are still judged by region and architecture, and an image the repo does
    /// not name (a NodePoolRotation applied by hand) launches anywhere.
    #[arg(long)]
    pub strict_images: bool,
}

pub fn run(args: SimArgs) -> ExitCode {
    match args.command {
        SimCommand::Serve(a) => serve(a),
    }
}

fn serve(args: ServeArgs) -> ExitCode {
    // The simulated clusters warn on stderr when they fall behind their clock (a lag past
    // which timeouts fire that no real cluster would): without a subscriber those warnings,
    // and every other log line of the simulated fleet, went nowhere. `RUST_LOG` filters them
    // (default `warn,rota=info`).
    if let Err(e) = crate::telemetry::init(crate::telemetry::LogFormat::Human, None) {
        eprintln!("rota: {e}");
        return ExitCode::from(2);
    }
    if !(args.speed.is_finite() && args.speed > 0.0) {
        eprintln!(
            "rota: --speed must be a positive number, got {}",
            args.speed
        );
        return ExitCode::from(2);
    }
    let plan = match Plan::of(&args) {
        Ok(p) => p,
        Err(code) => return code,
    };
    // The simulated fleet runs on jemalloc (`crate::allocator`). Only a build that put it on
    // glibc's malloc takes the agent's settings, which keep the resident size near what it
    // holds instead of the transient parsing spread over glibc's arenas.
    let on_glibc = crate::allocator::in_use() == crate::allocator::Choice::System;
    if on_glibc {
        crate::memory::limit_arenas();
    }
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rota: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    if on_glibc {
        rt.spawn(crate::memory::trim_periodically());
    }
    rt.block_on(run_fleet(args, plan))
}

/// What the simulated fleet is made of, read before anything starts: the scenario (the
/// repo's clusters with the workload and fault profiles) and the images and parameters the
/// repo names, which the clouds will hold.
struct Plan {
    scenario: Scenario,
    published: Vec<rota_sim::images::SimImage>,
    parameters: Vec<(String, String, String)>,
}

impl Plan {
    /// The plan of `args`, or the exit code of the input that could not be read (reported).
    fn of(args: &ServeArgs) -> Result<Plan, ExitCode> {
        let fleet = load(
            &args.repo.repo,
            args.repo.rev.as_deref(),
            args.repo.subdir.as_deref(),
        )
        .map_err(|f| f.report(Format::Human))?;
        let failed = |e: &dyn std::fmt::Display| {
            eprintln!("rota: {e}");
            ExitCode::from(1)
        };
        let clusters = fleet.resolve_all().map_err(|e| failed(&e))?;
        let workloads = match &args.workloads {
            Some(p) => WorkloadProfile::load(p).map_err(|e| failed(&e))?,
            None => WorkloadProfile::default(),
        };
        let faults = match &args.faults {
            Some(p) => FaultProfile::load(p).map_err(|e| failed(&e))?,
            None => FaultProfile::default(),
        };
        Ok(Plan {
            scenario: Scenario::from_fleet(&clusters, workloads, faults, args.seed),
            published: rota_sim::images::images_of(&fleet),
            parameters: rota_sim::images::parameters_of(&fleet),
        })
    }
}

/// Starts the simulated fleet, serves each cluster's API and the cloud on loopback, writes
/// the kubeconfig, prints the ready line and serves until stopped.
async fn run_fleet(args: ServeArgs, plan: Plan) -> ExitCode {
    let fleet = match Fleet::start(&plan.scenario, args.speed).await {
        Ok(f) => f,
        Err(e) => {
            eprintln!("rota: cannot load the simulated fleet: {e}");
            return ExitCode::from(1);
        }
    };
    // The clouds hold the images the repo names, where it says they exist (see
    // rota_sim::images); others launch only without --strict-images.
    for image in plan.published {
        fleet.cloud.publish_image(image);
    }
    for (region, name, value) in &plan.parameters {
        fleet.cloud.set_parameter(region, name, value);
    }
    fleet.cloud.require_published_images(args.strict_images);
    let log = match args
        .request_log
        .as_deref()
        .map(RequestLog::create)
        .transpose()
    {
        Ok(l) => l,
        Err(e) => {
            eprintln!("rota: cannot write the request log: {e}");
            return ExitCode::from(2);
        }
    };
    let served = match Served::clusters(&fleet, &log, args.speed).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rota: cannot listen on loopback: {e}");
            return ExitCode::from(2);
        }
    };
    // The simulated cloud, for a `rota controller` in another process: served on
    // loopback and named in every cluster of the kubeconfig (see docs/rotation.md).
    let cloud =
        match rota_sim::wire::serve_logged(std::sync::Arc::new(fleet.cloud.clone()), log.clone())
            .await
        {
            Ok(c) => c,
            Err(e) => {
                eprintln!("rota: cannot listen on loopback: {e}");
                return ExitCode::from(2);
            }
        };
    if let Err(e) = kubeconfig::write_with_cloud(&args.kubeconfig, &served.contexts, &cloud.url) {
        eprintln!("rota: cannot write {}: {e}", args.kubeconfig.display());
        return ExitCode::from(2);
    }
    let names: Vec<&str> = served.contexts.iter().map(|(n, _)| n.as_str()).collect();
    println!(
        "rota sim: ready: {} clusters ({}), {} nodes, {} pods; kubeconfig {}; cloud {}; speed {}x, seed {}; allocator {}",
        names.len(),
        names.join(", "),
        served.nodes,
        served.pods,
        args.kubeconfig.display(),
        cloud.url,
        args.speed,
        args.seed,
        crate::allocator::in_use().name(),
    );
    crate::shutdown::wait_for_stop().await;
    drop(served.servers);
    drop(cloud);
    drop(fleet);
    ExitCode::SUCCESS
}

/// Each simulated cluster's API server on loopback, with the kubeconfig's contexts and the
/// fleet's size for the ready line.
struct Served {
    servers: Vec<rota_sim::apiserver::HttpServer>,
    contexts: Vec<(String, String)>,
    nodes: usize,
    pods: usize,
}

impl Served {
    async fn clusters(
        fleet: &Fleet,
        log: &Option<RequestLog>,
        speed: f64,
    ) -> std::io::Result<Served> {
        let mut served = Served {
            servers: Vec::new(),
            contexts: Vec::new(),
            nodes: 0,
            pods: 0,
        };
        for (name, store) in &fleet.clusters {
            let server = ApiServer::new(store.clone()).with_speed(speed);
            let named = log.clone().map(|l| (l, format!("kube:{name}")));
            let s = serve_http_logged(server, named).await?;
            served.contexts.push((name.clone(), s.url()));
            served.servers.push(s);
            served.nodes += store.count(&ResourceType::nodes());
            // Counted, not listed: a list parses every pod (9 KiB each, 1.3 GiB at 150,000).
            served.pods += store.count(&ResourceType::pods());
        }
        Ok(served)
    }
}
