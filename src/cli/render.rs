//! `rota render --cluster NAME [--repo PATH] [--rev REV] [--format yaml|json]`: the fully
//! resolved desired state of one cluster (its wave, images, merged policies, gates, modes),
//! exactly what its agent would act on. A managed pool also shows its `owner`, its
//! `strategy` and what it keeps of its policy (`capabilities`: the fields nobody honours, the
//! ones its owner's settings carry, the ones rota holds only between two updates), so
//! nobody believes in a soak that will not happen. A pool under `strategy: replace` says by
//! how much its capacity dips (`capacity`).

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

/// The desired state as rendered: as it serializes, each managed pool with its
/// capabilities (`rota_core::fleet::owner::Capabilities`); self-managed pools as before.
pub fn rendered(desired: &rota_core::fleet::resolved::DesiredCluster) -> serde_json::Value {
    let mut value = serde_json::to_value(desired).expect("desired state serializes");
    let pools = value
        .get_mut("pools")
        .and_then(serde_json::Value::as_array_mut);
    for (v, pool) in pools.into_iter().flatten().zip(&desired.pools) {
        if let (Some(note), Some(obj)) = (
            rota_core::fleet::strategy::capacity_note(&pool.policy, pool.owner()),
            v.as_object_mut(),
        ) {
            obj.insert("capacity".into(), note.into());
        }
        if pool.group.managed().is_none() {
            continue;
        }
        let caps = rota_core::fleet::owner::Capabilities::of(pool.owner(), pool.strategy());
        if let Some(obj) = v.as_object_mut() {
            obj.insert(
                "capabilities".into(),
                serde_json::to_value(caps).expect("capabilities serialize"),
            );
        }
    }
    value
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
            let value = rendered(&desired);
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
