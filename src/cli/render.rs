//! `rota render --cluster NAME [--repo PATH] [--rev REV] [--format yaml|json]`: the fully
//! resolved desired state of one cluster (its wave, images, merged policies, gates, modes),
//! exactly what its agent would act on.

use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::validate::{RepoArgs, load};
use rota_core::fleet::{Format, ResolveError, yaml};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RenderFormat {
    Yaml,
    Json,
}

#[derive(Args, Debug)]
pub struct RenderArgs {
    /// The cluster to render.
    #[arg(long)]
    pub cluster: String,
    #[command(flatten)]
    pub repo: RepoArgs,
    #[arg(long, value_enum, default_value = "yaml")]
    pub format: RenderFormat,
}

pub fn run(args: RenderArgs) -> ExitCode {
    let fleet = match load(
        &args.repo.repo,
        args.repo.rev.as_deref(),
        args.repo.subdir.as_deref(),
    ) {
        Ok(f) => f,
        Err(f) => return f.report(Format::Human),
    };
    match fleet.resolve_cluster(&args.cluster) {
        Ok(desired) => {
            let value = serde_json::to_value(&desired).expect("desired state serializes");
            match args.format {
                RenderFormat::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&value).expect("value serializes")
                ),
                RenderFormat::Yaml => print!("{}", yaml::to_yaml(&value)),
            }
            ExitCode::SUCCESS
        }
        Err(e @ ResolveError::UnknownCluster { .. }) => {
            eprintln!("rota: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("rota: {e}");
            ExitCode::from(1)
        }
    }
}
