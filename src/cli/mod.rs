//! The command line: one file per subcommand, each with its own `Args` and `run`.
//!
//! Exit codes are shared by every command: 0 success, 1 the command ran and found a problem
//! (an invalid repo, a failed check), 2 usage or I/O error.

pub mod controller;
pub mod crd;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

pub mod agent;
pub mod audit;
pub mod cloud;
pub mod clusters;
pub mod completions;
pub mod ctl;
pub mod demo;
pub mod diff;
pub mod evidence;
pub mod forge;
pub mod git_auth;
pub mod images;
pub mod man;
pub mod promote;
pub mod propose;
pub mod render;
mod secret;
pub mod sim;
mod startup;
pub mod status;
pub mod stop;
pub mod ui;
pub mod validate;
pub mod whereis;

#[derive(Parser, Debug)]
#[command(
    name = "rota",
    version,
    about = "Keeps Kubernetes node pools on the machine image their fleet git repo declares"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print rota's version.
    Version,
    /// Print a shell completion script (`rota completions bash > /etc/bash_completion.d/rota`).
    Completions(completions::CompletionsArgs),
    /// Print the manual page (`rota man | man -l -`), or write one page per command (--dir).
    Man(man::ManArgs),
    /// The GitOps story on a simulated fleet with real git commits: bump, promote, revert.
    #[cfg(feature = "sim")]
    Demo(demo::DemoArgs),
    /// Check a fleet repo; report every problem with file, line and column.
    Validate(validate::ValidateArgs),
    /// Print the resolved desired state of one cluster.
    Render(render::RenderArgs),
    /// Show what changes for the agents between two revisions (or the working tree), by wave.
    Diff(diff::DiffArgs),
    /// The simulated fleet: Kubernetes API servers and clouds in one process.
    #[cfg(feature = "sim")]
    Sim(sim::SimArgs),
    /// Onboard clusters: `import` reads a cluster's pools from their owners and writes its
    /// clusters/<NAME>.yaml.
    Clusters(clusters::ClustersArgs),
    /// Print the NodePoolRotation CRD as YAML (`rota crd | kubectl apply -f -`).
    Crd(crd::Args),
    /// Run the rotation controller on one cluster's NodePoolRotation resources.
    Controller(controller::ControllerArgs),
    /// The GitOps agent of one cluster: follow the fleet repo, rotate its pools, report statuses.
    Agent(Box<agent::AgentArgs>),
    /// Every cluster and pool of the fleet at a commit, with the agents' statuses.
    Status(status::StatusArgs),
    /// The clouds' published images: `discover` finds each channel's newest and proposes it.
    Images(images::ImagesArgs),
    /// Whether a wave may take the previous wave's versions (the promotion guard), or check a
    /// promotion; with --revert, pin a wave back from a version its pools failed on.
    Promote(promote::PromoteArgs),
    /// One scheduled pass (the CronJob of deploy/components/proposals): new images, allowed
    /// promotions and reverts of failed versions proposed as pull requests, from a mirror of
    /// the repo's URL.
    Propose(propose::ProposeArgs),
    /// A read-only web page of the whole fleet: waves, pools, holds, versions, commit statuses.
    Ui(ui::UiArgs),
    /// Where CHANNEL@VERSION stands in the fleet: which waves and pools run it, move to it, or
    /// are held before it.
    Where(whereis::WhereArgs),
    /// Steer the rotation under way outside git: pause, resume, retry after a halt, end a soak.
    Ctl(ctl::CtlArgs),
    /// Stop rotations fleet-wide (or a wave, or a cluster) without a review: an order on the
    /// fleet repo's stop ref that every agent holds at its next poll; --clear lifts it.
    Stop(stop::StopArgs),
    /// Which nodes ran an image and when (or what a node ran), from the agents' image
    /// ledger in the fleet repo; --verify checks its chain and signatures.
    Audit(audit::AuditArgs),
    /// The fleet's patching evidence in one document: per pool the image in force, its age
    /// and deadline; per version when released, proposed, merged and rolled out; breaches.
    Evidence(evidence::EvidenceArgs),
}

/// Parse the process arguments and run the chosen command.
pub fn main() -> ExitCode {
    quiet_when_the_reader_leaves();
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("rota {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Completions(args) => completions::run(args, Cli::command()),
        Command::Man(args) => man::run(args, Cli::command()),
        #[cfg(feature = "sim")]
        Command::Demo(args) => demo::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Render(args) => render::run(args),
        Command::Diff(args) => diff::run(args),
        #[cfg(feature = "sim")]
        Command::Sim(args) => sim::run(args),
        Command::Clusters(args) => clusters::run(args),
        Command::Crd(args) => crd::run(args),
        Command::Controller(args) => controller::run(args),
        Command::Agent(args) => agent::run(*args),
        Command::Status(args) => status::run(args),
        Command::Promote(args) => promote::run(args),
        Command::Propose(args) => propose::run(args),
        Command::Images(args) => images::run(args),
        Command::Ui(args) => ui::run(args),
        Command::Where(args) => whereis::run(args),
        Command::Ctl(args) => ctl::run(args),
        Command::Stop(args) => stop::run(args),
        Command::Audit(args) => audit::run(args),
        Command::Evidence(args) => evidence::run(args),
    }
}

/// A reader that stops early (`rota render ... | head -1`) closes the pipe, and the next
/// print to stdout panics inside std (Rust ignores SIGPIPE). That is the reader's choice, not
/// an error of rota's: end quietly with success, as Unix tools do, instead of a panic and a
/// backtrace. Every other panic goes to the default hook.
fn quiet_when_the_reader_leaves() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info)
    }));
}
