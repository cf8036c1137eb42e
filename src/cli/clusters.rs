//! `rota clusters import NAME --cloud aws --region R`: a cluster's pools read from their
//! owners (EKS managed node groups; the Auto Scaling groups tagged
//! `kubernetes.io/cluster/<name>`) and written as the fleet repo's `clusters/<NAME>.yaml`
//! (the decisions are `rota_core::onboard`'s).
//!
//! Run again, it writes the same bytes, so it changes nothing. A file that differs from
//! what it would write was edited by hand (or the owners changed): it is kept, and the
//! command lists what the owners say differently (exit 1 when there is any), unless
//! `--force` overwrites it.
//!
//! Exit codes: 0 written, unchanged, or differing by the user's edits only; 1 the owners
//! say something the file does not (nothing written without `--force`), or `--check` found
//! a file to write; 2 a usage, cloud or I/O error (nothing written).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};

use rota_core::onboard::{FoundCluster, Outcome, outcome};

#[derive(Args, Debug)]
pub struct ClustersArgs {
    #[command(subcommand)]
    pub command: ClustersCommand,
}

#[derive(Subcommand, Debug)]
pub enum ClustersCommand {
    /// Read a cluster's pools from their owners and write its clusters/<NAME>.yaml.
    Import(ImportArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ImportCloud {
    /// EKS managed node groups and the Auto Scaling groups tagged as the cluster's.
    Aws,
    /// Not yet: GKE node pools and managed instance groups.
    Gcp,
    /// Not yet: AKS agent pools and scale sets.
    Azure,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The Cluster's name in the fleet repo (metadata.name, and the file's name).
    pub name: String,
    /// The cloud the cluster runs in.
    #[arg(long, value_enum)]
    pub cloud: ImportCloud,
    /// AWS: the cluster's region.
    #[arg(long, env = "AWS_REGION")]
    pub region: Option<String>,
    /// AWS: the EKS cluster's name, when it is not NAME (written as `eksCluster`).
    #[arg(long)]
    pub eks_cluster: Option<String>,
    /// AWS: the cluster is not on EKS; list only its tagged Auto Scaling groups.
    #[arg(long, conflicts_with = "eks_cluster")]
    pub no_eks: bool,
    /// AWS: the NAME in the groups' `kubernetes.io/cluster/NAME` tag (default: the EKS
    /// cluster's name, else NAME).
    #[arg(long)]
    pub tag_cluster: Option<String>,
    /// The image channel every imported pool starts on (the Fleet's `spec.images` key).
    #[arg(long, default_value = "general")]
    pub channel: String,
    /// A label of the Cluster (`--label ring=canary`; repeat), e.g. for a wave's selector.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// Write `mode: readOnly`: the agent plans and reports, changes nothing (remove it in
    /// a pull request when the plans look right).
    #[arg(long)]
    pub read_only: bool,
    /// Write into this fleet repo checkout, as <REPO>/clusters/<NAME>.yaml.
    #[arg(long, conflicts_with = "out")]
    pub repo: Option<PathBuf>,
    /// Write this file (default: print to stdout unless --repo is given).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write nothing; exit 1 if the file would be written, or the owners list what it does
    /// not say (edits of your own leave it at 0).
    #[arg(long)]
    pub check: bool,
    /// Overwrite a file that differs (hand edits are lost).
    #[arg(long, conflicts_with = "check")]
    pub force: bool,
    /// AWS API endpoint override (a VPC endpoint, or moto in tests).
    #[arg(long, env = "ROTA_AWS_ENDPOINT_URL")]
    pub aws_endpoint_url: Option<String>,
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{s:?} is not KEY=VALUE"))
}

pub fn run(args: ClustersArgs) -> ExitCode {
    match args.command {
        ClustersCommand::Import(a) => import(a),
    }
}

fn import(a: ImportArgs) -> ExitCode {
    let found = match find(&a) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("rota clusters import: {e}");
            return ExitCode::from(2);
        }
    };
    let path = a
        .repo
        .as_ref()
        .map(|r| r.join("clusters").join(format!("{}.yaml", a.name)))
        .or_else(|| a.out.clone());
    let Some(path) = path else {
        print!("{}", rota_core::onboard::render(&found));
        return ExitCode::SUCCESS;
    };
    match write(&path, &found, a.check, a.force) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rota clusters import: {}: {e}", path.display());
            ExitCode::from(2)
        }
    }
}

/// Write (or check) `path` as the outcome says; prints what it did.
fn write(
    path: &std::path::Path,
    found: &FoundCluster,
    check: bool,
    force: bool,
) -> Result<ExitCode, String> {
    let shown = path.display().to_string();
    let existing = match std::fs::read_to_string(path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e.to_string()),
    };
    let put = |text: &str| -> Result<(), String> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        std::fs::write(path, text).map_err(|e| e.to_string())
    };
    let pools = found.pools.len();
    match outcome(&shown, existing.as_deref(), found)? {
        Outcome::Unchanged => {
            println!("{shown}: unchanged ({pools} pools)");
            Ok(ExitCode::SUCCESS)
        }
        Outcome::New { .. } if check => {
            println!("{shown}: would be written ({pools} pools)");
            Ok(ExitCode::from(1))
        }
        Outcome::New { text } => {
            put(&text)?;
            println!("{shown}: written ({pools} pools)");
            Ok(ExitCode::SUCCESS)
        }
        Outcome::Differs { text, changes } => {
            if force {
                put(&text)?;
                println!("{shown}: overwritten (--force; {pools} pools)");
                return Ok(ExitCode::SUCCESS);
            }
            if changes.is_empty() {
                println!(
                    "{shown}: kept as edited (the owners list the same pools; --force rewrites it)"
                );
                return Ok(ExitCode::SUCCESS);
            }
            println!("{shown}: kept as it is; the owners say:");
            for c in &changes {
                println!("  - {c}");
            }
            println!(
                "Edit the file, or run again with --force to rewrite it (hand edits are lost)."
            );
            Ok(ExitCode::from(1))
        }
    }
}

/// The cluster as its owners list it.
fn find(a: &ImportArgs) -> Result<FoundCluster, String> {
    // The name is also the file's: a path (`../x`) must never come through it.
    rota_core::onboard::check_cluster_name(&a.name)?;
    let command = command_line(a);
    match a.cloud {
        ImportCloud::Aws => aws(a, command),
        ImportCloud::Gcp | ImportCloud::Azure => Err(format!(
            "--cloud {}: not yet; this build imports AWS clusters only (GKE node pools, AKS \
             agent pools, managed instance groups and scale sets are to come)",
            if a.cloud == ImportCloud::Gcp {
                "gcp"
            } else {
                "azure"
            }
        )),
    }
}

/// The command as the file's header shows it: what a person reruns (no endpoint, no path).
fn command_line(a: &ImportArgs) -> String {
    let mut s = format!("rota clusters import {}", a.name);
    let cloud = match a.cloud {
        ImportCloud::Aws => "aws",
        ImportCloud::Gcp => "gcp",
        ImportCloud::Azure => "azure",
    };
    s.push_str(&format!(" --cloud {cloud}"));
    if let Some(r) = &a.region {
        s.push_str(&format!(" --region {r}"));
    }
    if let Some(c) = &a.eks_cluster {
        s.push_str(&format!(" --eks-cluster {c}"));
    }
    if a.no_eks {
        s.push_str(" --no-eks");
    }
    if let Some(t) = &a.tag_cluster {
        s.push_str(&format!(" --tag-cluster {t}"));
    }
    s.push_str(&format!(" --channel {}", a.channel));
    for (k, v) in &a.labels {
        s.push_str(&format!(" --label {k}={v}"));
    }
    if a.read_only {
        s.push_str(" --read-only");
    }
    s
}

#[cfg(feature = "aws")]
fn aws(a: &ImportArgs, command: String) -> Result<FoundCluster, String> {
    use crate::cloud::aws::eks::AwsEksPools;
    use crate::cloud::retry::RetryPolicy;
    use rota_core::onboard::FoundCloud;
    use std::collections::BTreeMap;
    let region = a
        .region
        .clone()
        .ok_or("--cloud aws needs --region (or AWS_REGION)")?;
    let eks = (!a.no_eks).then(|| a.eks_cluster.clone().unwrap_or_else(|| a.name.clone()));
    let tag = a
        .tag_cluster
        .clone()
        .or_else(|| eks.clone())
        .unwrap_or_else(|| a.name.clone());
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let pools = rt.block_on(async {
        let owner = AwsEksPools::from_env(a.aws_endpoint_url.clone(), RetryPolicy::default()).await;
        owner
            .list_cluster_pools(&region, eks.as_deref(), &tag)
            .await
            .map_err(|e| e.to_string())
    })?;
    let mut fields = vec![("region", region)];
    // `eksCluster` defaults to the Cluster's name: written only when it differs.
    if let Some(e) = eks.filter(|e| *e != a.name) {
        fields.push(("eksCluster", e));
    }
    Ok(FoundCluster {
        name: a.name.clone(),
        labels: a.labels.iter().cloned().collect::<BTreeMap<_, _>>(),
        cloud: FoundCloud {
            cloud: "aws",
            fields,
        },
        channel: a.channel.clone(),
        pools,
        read_only: a.read_only,
        command,
    })
}

#[cfg(not(feature = "aws"))]
fn aws(_: &ImportArgs, _: String) -> Result<FoundCluster, String> {
    Err("--cloud aws: this build leaves AWS out (the `aws` feature)".into())
}
