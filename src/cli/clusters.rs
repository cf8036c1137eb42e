//! `rota clusters import NAME --cloud aws --region R`: a cluster's pools read from their
//! owners (EKS managed node groups; the Auto Scaling groups tagged
//! `kubernetes.io/cluster/<name>`; with `--cloud gcp` a GKE cluster's node pools and the
//! managed instance groups whose template carries kops's `k8s-io-cluster-name` label, with
//! `--cloud azure` an AKS cluster's agent pools) and written as the fleet repo's `clusters/<NAME>.yaml`
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
    /// A GKE cluster's node pools and the managed instance groups labelled as the
    /// cluster's (--project, --location).
    Gcp,
    /// An AKS cluster's agent pools and the scale sets tagged as the cluster's
    /// (--subscription-id, --resource-group).
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
    /// cluster's name, else NAME). GCP: the cluster's name in the groups' templates'
    /// `k8s-io-cluster-name` label (default: the GKE cluster's name, else NAME). Azure: the
    /// cluster's name in the scale sets' cluster tag (default: the AKS cluster's, else NAME).
    #[arg(long)]
    pub tag_cluster: Option<String>,
    /// AWS: also list the cluster's Karpenter NodePools, through the Kubernetes API of
    /// --kubeconfig (else $KUBECONFIG) at --kube-context (else its current context).
    #[arg(long)]
    pub karpenter: bool,
    /// The kubeconfig --karpenter reads the cluster through.
    #[arg(long, requires = "karpenter")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context --karpenter reads the cluster through.
    #[arg(long, requires = "karpenter")]
    pub kube_context: Option<String>,
    /// GCP: the GKE cluster's project.
    #[arg(long, env = "CLOUDSDK_CORE_PROJECT")]
    pub project: Option<String>,
    /// GCP: the GKE cluster's location, a region (regional cluster) or a zone.
    #[arg(long)]
    pub location: Option<String>,
    /// GCP: the GKE cluster's name, when it is not NAME (written as `gkeCluster`).
    #[arg(long)]
    pub gke_cluster: Option<String>,
    /// GCP: the Kubernetes Engine API root (default https://container.googleapis.com).
    #[arg(long, env = "ROTA_GKE_ENDPOINT")]
    pub gke_endpoint: Option<String>,
    /// GCP: the Compute Engine API root (default https://compute.googleapis.com).
    #[arg(long, env = "ROTA_GCP_ENDPOINT")]
    pub gcp_endpoint: Option<String>,
    /// GCP: the cluster is not on GKE; list only its labelled managed instance groups.
    #[arg(long, conflicts_with = "gke_cluster")]
    pub no_gke: bool,
    /// Azure: the AKS cluster's subscription.
    #[arg(long, env = "AZURE_SUBSCRIPTION_ID")]
    pub subscription_id: Option<String>,
    /// Azure: the AKS cluster's resource group (not its node resource group).
    #[arg(long)]
    pub resource_group: Option<String>,
    /// Azure: the AKS cluster's name, when it is not NAME (written as `aksCluster`).
    #[arg(long)]
    pub aks_cluster: Option<String>,
    /// Azure: the cluster is not on AKS; list only its tagged scale sets.
    #[arg(long, conflicts_with = "aks_cluster")]
    pub no_aks: bool,
    /// Azure: the Resource Manager endpoint (default https://management.azure.com).
    #[arg(long, env = "ROTA_AZURE_ENDPOINT")]
    pub azure_endpoint: Option<String>,
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
        ImportCloud::Gcp => gcp(a, command),
        ImportCloud::Azure => azure(a, command),
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
    if a.no_gke {
        s.push_str(" --no-gke");
    }
    if a.no_aks {
        s.push_str(" --no-aks");
    }
    if a.karpenter {
        s.push_str(" --karpenter");
    }
    if let Some(t) = &a.tag_cluster {
        s.push_str(&format!(" --tag-cluster {t}"));
    }
    for (flag, v) in [
        ("--project", &a.project),
        ("--location", &a.location),
        ("--gke-cluster", &a.gke_cluster),
        ("--subscription-id", &a.subscription_id),
        ("--resource-group", &a.resource_group),
        ("--aks-cluster", &a.aks_cluster),
    ] {
        if let Some(v) = v {
            s.push_str(&format!(" {flag} {v}"));
        }
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
        let mut pools = owner
            .list_cluster_pools(&region, eks.as_deref(), &tag)
            .await
            .map_err(|e| e.to_string())?;
        if a.karpenter {
            let (config, _) =
                crate::kube::kubeconfig::load(a.kubeconfig.as_deref(), a.kube_context.as_deref())
                    .await?;
            let client =
                kube::Client::try_from(config).map_err(|e| format!("Kubernetes client: {e}"))?;
            pools.extend(crate::kube::karpenter_import::list_node_pools(&client).await?);
        }
        Ok::<_, String>(pools)
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

/// The Cluster document around `pools` found in `cloud`'s `fields`.
#[cfg(any(feature = "gcp", feature = "azure"))]
fn cluster_of(
    a: &ImportArgs,
    command: String,
    cloud: &'static str,
    fields: Vec<(&'static str, String)>,
    pools: Vec<rota_core::onboard::FoundPool>,
) -> FoundCluster {
    FoundCluster {
        name: a.name.clone(),
        labels: a.labels.iter().cloned().collect(),
        cloud: rota_core::onboard::FoundCloud { cloud, fields },
        channel: a.channel.clone(),
        pools,
        read_only: a.read_only,
        command,
    }
}

/// `zone` for a GCP zone (`europe-west1-b`: a region and a one-letter suffix), else `region`.
pub fn gcp_location_key(location: &str) -> &'static str {
    match location.rsplit_once('-') {
        Some((_, z)) if z.len() == 1 && z.chars().all(|c| c.is_ascii_lowercase()) => "zone",
        _ => "region",
    }
}

#[cfg(feature = "gcp")]
fn gcp(a: &ImportArgs, command: String) -> Result<FoundCluster, String> {
    use crate::cloud::gcp::node_pools::{GkeNodePools, GkeOptions};
    let project = a.project.clone().ok_or("--cloud gcp needs --project")?;
    let location = a
        .location
        .clone()
        .ok_or("--cloud gcp needs --location (the cluster's region or zone)")?;
    let cluster = a.gke_cluster.clone().unwrap_or_else(|| a.name.clone());
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let pools = rt.block_on(async {
        let gke = GkeNodePools::new(GkeOptions {
            endpoint: a.gke_endpoint.clone(),
            compute_endpoint: a.gcp_endpoint.clone(),
            ..GkeOptions::default()
        })
        .map_err(|e| format!("{e:#}"))?;
        let mut pools = if a.no_gke {
            Vec::new()
        } else {
            gke.list_cluster_pools(&project, &location, &cluster)
                .await
                .map_err(|e| e.to_string())?
        };
        // The self-managed groups by their templates' label naming the cluster.
        let labelled = a.tag_cluster.clone().unwrap_or_else(|| cluster.clone());
        pools.extend(
            gke.list_cluster_migs(&project, &labelled)
                .await
                .map_err(|e| e.to_string())?,
        );
        Ok::<_, String>(pools)
    })?;
    let mut fields = vec![
        ("project", project),
        (gcp_location_key(&location), location),
    ];
    // `gkeCluster` defaults to the Cluster's name: written only when it differs.
    if !a.no_gke && cluster != a.name {
        fields.push(("gkeCluster", cluster));
    }
    Ok(cluster_of(a, command, "gcp", fields, pools))
}

#[cfg(not(feature = "gcp"))]
fn gcp(_: &ImportArgs, _: String) -> Result<FoundCluster, String> {
    Err("--cloud gcp: this build leaves GCP out (the `gcp` feature)".into())
}

#[cfg(feature = "azure")]
fn azure(a: &ImportArgs, command: String) -> Result<FoundCluster, String> {
    use crate::cloud::azure::AzureOptions;
    use crate::cloud::azure::agent_pools::AksAgentPools;
    let sub = a
        .subscription_id
        .clone()
        .ok_or("--cloud azure needs --subscription-id (or AZURE_SUBSCRIPTION_ID)")?;
    let rg = a
        .resource_group
        .clone()
        .ok_or("--cloud azure needs --resource-group (the AKS cluster's own)")?;
    let cluster = a.aks_cluster.clone().unwrap_or_else(|| a.name.clone());
    let mut options = AzureOptions::default();
    if let Some(e) = &a.azure_endpoint {
        options.endpoint = e.clone();
    }
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let pools = rt.block_on(async {
        // A person at a terminal (`az login`), or a pod with Workload ID.
        let credential: std::sync::Arc<dyn azure_core::credentials::TokenCredential> =
            if std::env::var_os("AZURE_FEDERATED_TOKEN_FILE").is_some() {
                crate::cloud::azure::workload_identity()?
            } else {
                azure_identity::AzureCliCredential::new(None)
                    .map_err(|e| format!("Azure CLI credential (run az login): {e}"))?
            };
        let aks = AksAgentPools::new(credential, options)?;
        let mut pools = if a.no_aks {
            Vec::new()
        } else {
            aks.list_cluster_pools(&sub, &rg, &cluster)
                .await
                .map_err(|e| e.to_string())?
        };
        // The self-managed scale sets of the resource group, by their cluster tag.
        let tagged = a.tag_cluster.clone().unwrap_or_else(|| cluster.clone());
        pools.extend(
            aks.list_cluster_scale_sets(&sub, &rg, &tagged)
                .await
                .map_err(|e| e.to_string())?,
        );
        Ok::<_, String>(pools)
    })?;
    let mut fields = vec![("subscriptionId", sub), ("resourceGroup", rg)];
    if !a.no_aks && cluster != a.name {
        fields.push(("aksCluster", cluster));
    }
    Ok(cluster_of(a, command, "azure", fields, pools))
}

#[cfg(not(feature = "azure"))]
fn azure(_: &ImportArgs, _: String) -> Result<FoundCluster, String> {
    Err("--cloud azure: this build leaves Azure out (the `azure` feature)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        import: ImportArgs,
    }

    fn args(line: &[&str]) -> ImportArgs {
        use clap::Parser;
        Cli::try_parse_from(std::iter::once("import").chain(line.iter().copied()))
            .unwrap()
            .import
    }

    /// A GKE or AKS import without the cluster's coordinates says which flag is missing
    /// before any call; the file's header names the flags a person reruns it with.
    #[test]
    fn gcp_and_azure_imports_name_what_they_miss_and_their_command() {
        let e = find(&args(&[
            "prod",
            "--cloud",
            "gcp",
            "--location",
            "europe-west1",
        ]))
        .unwrap_err();
        assert!(e.contains("--project"), "{e}");
        let e = find(&args(&["prod", "--cloud", "gcp", "--project", "acme"])).unwrap_err();
        assert!(e.contains("--location"), "{e}");
        let e = find(&args(&[
            "prod",
            "--cloud",
            "azure",
            "--subscription-id",
            "s",
        ]))
        .unwrap_err();
        assert!(e.contains("--resource-group"), "{e}");
        let a = args(&[
            "prod",
            "--cloud",
            "gcp",
            "--project",
            "acme",
            "--location",
            "europe-west1-b",
            "--gke-cluster",
            "gke-prod",
            "--gke-endpoint",
            "http://127.0.0.1:1",
        ]);
        assert_eq!(
            command_line(&a),
            "rota clusters import prod --cloud gcp --project acme --location europe-west1-b \
             --gke-cluster gke-prod --channel general"
        );
        // A cluster without GKE (kops on GCE): its labelled groups only, by the name in their
        // templates' label; the endpoint is left out of the header.
        let a = args(&[
            "kops-prod",
            "--cloud",
            "gcp",
            "--project",
            "acme",
            "--location",
            "europe-west1",
            "--no-gke",
            "--tag-cluster",
            "prod-k8s-local",
            "--gcp-endpoint",
            "http://127.0.0.1:1",
        ]);
        assert_eq!(
            command_line(&a),
            "rota clusters import kops-prod --cloud gcp --no-gke --tag-cluster prod-k8s-local \
             --project acme --location europe-west1 --channel general"
        );
        let a = args(&[
            "capz-prod",
            "--cloud",
            "azure",
            "--subscription-id",
            "s",
            "--resource-group",
            "rg",
            "--no-aks",
            "--azure-endpoint",
            "http://127.0.0.1:1",
        ]);
        assert_eq!(
            command_line(&a),
            "rota clusters import capz-prod --cloud azure --no-aks --subscription-id s \
             --resource-group rg --channel general"
        );
        let e = find(&args(&["../x", "--cloud", "azure"])).unwrap_err();
        assert!(!e.is_empty());
    }

    #[test]
    fn a_gcp_location_is_a_zone_or_a_region() {
        assert_eq!(gcp_location_key("europe-west1-b"), "zone");
        assert_eq!(gcp_location_key("europe-west1"), "region");
        assert_eq!(gcp_location_key("us-central1"), "region");
    }
}
