//! Which cloud provider the agent and the controller drive, from flags (and `ROTA_*`
//! environment variables).
//!
//! `--cloud auto`, the default, picks the simulated cloud when the kubeconfig was written by
//! `rota sim serve` (it names the cloud's loopback endpoint) or `--cloud-endpoint` is given,
//! and the real providers otherwise: every call then goes to the provider of its group's
//! cloud, AWS, GCP or Azure as the fleet repo says, each built on first use with the
//! platform's workload identity (see `docs/cloud-providers.md`). `--cloud aws|gcp|azure`
//! allows only that one, so a misconfigured pool in another cloud pauses with a clear error
//! instead of reaching for credentials the agent should not have. A cloud whose Cargo feature
//! this build leaves out (`aws`, `gcp`, `azure`) is not offered by `auto`, and naming it is
//! an error that says so.

use std::sync::Arc;

use clap::{Args, ValueEnum};
use kube::config::Kubeconfig;

use crate::cloud::registry::{Factory, Providers};
use crate::cloud::{Cloud, NodeGroups};
use crate::kube::kubeconfig::{SIM_CLOUD_EXTENSION, sim_cloud_endpoint};
#[cfg(feature = "sim")]
use rota_sim::wire::HttpNodeGroups;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CloudKind {
    // The help text depends on whether this build can reach a simulated cloud.
    #[cfg_attr(
        feature = "sim",
        doc = "The simulated cloud if the kubeconfig names one (or --cloud-endpoint is given), else the real provider of each group's cloud."
    )]
    #[cfg_attr(
        not(feature = "sim"),
        doc = "The real provider of each group's cloud (AWS, GCP or Azure)."
    )]
    Auto,
    /// The simulated cloud of `rota sim serve`.
    #[cfg(feature = "sim")]
    Sim,
    /// AWS Auto Scaling groups only.
    Aws,
    /// GCP managed instance groups only.
    Gcp,
    /// Azure virtual machine scale sets only.
    Azure,
}

#[derive(Args, Clone, Debug)]
pub struct CloudArgs {
    /// The cloud of the pools' groups.
    #[arg(long, value_enum, env = "ROTA_CLOUD", default_value = "auto")]
    pub cloud: CloudKind,
    /// The simulated cloud's endpoint (default: from the kubeconfig `rota sim serve` wrote).
    #[cfg(feature = "sim")]
    #[arg(long, env = "ROTA_CLOUD_ENDPOINT")]
    pub cloud_endpoint: Option<String>,
    /// AWS API endpoint override (a VPC endpoint, or moto in tests); default: the SDK's own,
    /// which also honours AWS_ENDPOINT_URL.
    #[arg(long, env = "ROTA_AWS_ENDPOINT_URL")]
    pub aws_endpoint_url: Option<String>,
    /// Compute Engine API root (default https://compute.googleapis.com).
    #[arg(long, env = "ROTA_GCP_ENDPOINT")]
    pub gcp_endpoint: Option<String>,
    /// Kubernetes Engine API root, for GKE node pools (default
    /// https://container.googleapis.com).
    #[arg(long, env = "ROTA_GKE_ENDPOINT")]
    pub gke_endpoint: Option<String>,
    /// Azure Resource Manager endpoint (default https://management.azure.com; sovereign
    /// clouds have their own).
    #[arg(long, env = "ROTA_AZURE_ENDPOINT")]
    pub azure_endpoint: Option<String>,
}

/// What the flags resolve to, before anything is built (pure, so that it can be tested).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    #[cfg(feature = "sim")]
    Sim {
        endpoint: String,
    },
    Real {
        clouds: Vec<Cloud>,
    },
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            #[cfg(feature = "sim")]
            Choice::Sim { endpoint } => write!(f, "simulated ({endpoint})"),
            Choice::Real { clouds } => {
                let names: Vec<String> = clouds.iter().map(|c| c.to_string()).collect();
                write!(f, "{}", names.join(", "))
            }
        }
    }
}

/// Decide which cloud(s) to drive. `sim_endpoint` is what the kubeconfig names, if anything.
pub fn choose(args: &CloudArgs, sim_endpoint: Option<String>) -> Result<Choice, String> {
    #[cfg(feature = "sim")]
    let sim = args.cloud_endpoint.clone().or(sim_endpoint);
    // A build without the simulated fleet cannot reach one: say so rather than fall through
    // to real providers with a kubeconfig that points at a simulated API server.
    #[cfg(not(feature = "sim"))]
    if let Some(endpoint) = sim_endpoint {
        return Err(format!(
            "the kubeconfig names a simulated cloud ({endpoint}, cluster extension {SIM_CLOUD_EXTENSION}) but this rota was built without the `sim` feature; use a build with default features for the simulated fleet"
        ));
    }
    match args.cloud {
        #[cfg(feature = "sim")]
        CloudKind::Sim => sim.map(|endpoint| Choice::Sim { endpoint }).ok_or_else(|| {
            format!(
                "--cloud sim needs the simulated cloud's endpoint: the kubeconfig names none (cluster extension {SIM_CLOUD_EXTENSION}, written by `rota sim serve`); pass --cloud-endpoint"
            )
        }),
        #[cfg(feature = "sim")]
        CloudKind::Auto => Ok(match sim {
            Some(endpoint) => Choice::Sim { endpoint },
            None => Choice::Real {
                clouds: compiled_in(),
            },
        }),
        #[cfg(not(feature = "sim"))]
        CloudKind::Auto => Ok(Choice::Real {
            clouds: compiled_in(),
        }),
        CloudKind::Aws => only(Cloud::Aws),
        CloudKind::Gcp => only(Cloud::Gcp),
        CloudKind::Azure => only(Cloud::Azure),
    }
}

/// Whether this build has `cloud`'s provider (its Cargo feature).
pub fn is_compiled_in(cloud: Cloud) -> bool {
    match cloud {
        Cloud::Aws => cfg!(feature = "aws"),
        Cloud::Gcp => cfg!(feature = "gcp"),
        Cloud::Azure => cfg!(feature = "azure"),
    }
}

/// The clouds this build has a provider for.
fn compiled_in() -> Vec<Cloud> {
    [Cloud::Aws, Cloud::Gcp, Cloud::Azure]
        .into_iter()
        .filter(|c| is_compiled_in(*c))
        .collect()
}

/// `--cloud aws|gcp|azure`: that cloud alone, if this build has it.
fn only(cloud: Cloud) -> Result<Choice, String> {
    if !is_compiled_in(cloud) {
        return Err(format!(
            "--cloud {cloud}: this rota was built without the `{cloud}` Cargo feature (its SDK is left out); build with `--features {cloud}`"
        ));
    }
    Ok(Choice::Real {
        clouds: vec![cloud],
    })
}

/// The provider the flags ask for, and how to describe it in the start-up line.
pub fn build(
    args: &CloudArgs,
    kubeconfig: Option<&(Kubeconfig, Option<String>)>,
) -> Result<(Arc<dyn NodeGroups>, Choice), String> {
    let sim = kubeconfig.and_then(|(k, ctx)| sim_cloud_endpoint(k, ctx.as_deref()));
    let choice = choose(args, sim)?;
    let groups: Arc<dyn NodeGroups> = match &choice {
        #[cfg(feature = "sim")]
        Choice::Sim { endpoint } => Arc::new(HttpNodeGroups::new(endpoint)),
        Choice::Real { clouds } => {
            let mut p = Providers::new();
            for cloud in clouds {
                if let Some(factory) = provider(*cloud, args) {
                    p = p.with(*cloud, factory);
                }
            }
            Arc::new(p)
        }
    };
    Ok((groups, choice))
}

/// The owners of the managed pools an agent drives, one adapter per owner whose cloud the
/// real provider allows and this build has: EKS managed node groups (AWS), GKE node pools
/// (GCP, through `--gke-endpoint` when given), AKS agent
/// pools (Azure, through `--azure-endpoint`, the ARM endpoint). Each is made on its first
/// call. None on the simulated cloud (its owners are served in process only, not over
/// `rota sim serve`'s HTTP).
pub fn owners(
    args: &CloudArgs,
    choice: &Choice,
) -> Vec<Arc<dyn rota_core::cloud::managed::OwnerPools>> {
    // Without the `sim` feature a real provider is the only choice.
    #[allow(irrefutable_let_patterns)]
    let Choice::Real { clouds } = choice else {
        return Vec::new();
    };
    // A build without any cloud feature pushes nothing.
    #[allow(unused_mut)]
    let mut out: Vec<Arc<dyn rota_core::cloud::managed::OwnerPools>> = Vec::new();
    #[cfg(feature = "aws")]
    if clouds.contains(&Cloud::Aws) {
        use crate::cloud::aws::eks::{AwsEksPools, FACTS};
        use crate::cloud::lazy_owner::LazyOwner;
        let endpoint = args.aws_endpoint_url.clone();
        out.push(Arc::new(LazyOwner::new(FACTS, move || {
            let endpoint = endpoint.clone();
            async move {
                let retry = crate::cloud::retry::RetryPolicy::default();
                Ok(AwsEksPools::from_env(endpoint, retry).await)
            }
        })));
    }
    #[cfg(feature = "gcp")]
    if clouds.contains(&Cloud::Gcp) {
        use crate::cloud::gcp::node_pools::{FACTS, GkeNodePools, GkeOptions};
        use crate::cloud::lazy_owner::LazyOwner;
        let options = GkeOptions {
            endpoint: args.gke_endpoint.clone(),
            // The node pools' instance groups are read from Compute, at its root.
            compute_endpoint: args.gcp_endpoint.clone(),
            ..GkeOptions::default()
        };
        out.push(Arc::new(LazyOwner::new(FACTS, move || {
            let built = GkeNodePools::new(options.clone()).map_err(|e| format!("{e:#}"));
            async move { built }
        })));
    }
    #[cfg(feature = "azure")]
    if clouds.contains(&Cloud::Azure) {
        use crate::cloud::azure::AzureOptions;
        use crate::cloud::azure::agent_pools::{AksAgentPools, FACTS};
        use crate::cloud::lazy_owner::LazyOwner;
        let mut options = AzureOptions::default();
        if let Some(e) = &args.azure_endpoint {
            options.endpoint = e.clone();
        }
        out.push(Arc::new(LazyOwner::new(FACTS, move || {
            let built = AksAgentPools::with_workload_identity(options.clone());
            async move { built }
        })));
    }
    let _ = (args, clouds);
    out
}

/// How to build `cloud`'s provider on first use, with the platform's workload identity;
/// `None` when this build leaves it out.
fn provider(cloud: Cloud, args: &CloudArgs) -> Option<Factory> {
    match cloud {
        #[cfg(feature = "aws")]
        Cloud::Aws => {
            use crate::cloud::aws::AwsNodeGroups;
            use crate::cloud::retry::RetryPolicy;
            let endpoint = args.aws_endpoint_url.clone();
            Some(Box::new(move || {
                let endpoint = endpoint.clone();
                Box::pin(async move {
                    let g = AwsNodeGroups::from_env(endpoint, RetryPolicy::default()).await;
                    Ok(Arc::new(g) as Arc<dyn NodeGroups>)
                })
            }))
        }
        #[cfg(feature = "gcp")]
        Cloud::Gcp => {
            use crate::cloud::gcp::{GcpNodeGroups, GcpOptions};
            let endpoint = args.gcp_endpoint.clone();
            Some(Box::new(move || {
                let options = GcpOptions {
                    endpoint: endpoint.clone(),
                    ..GcpOptions::default()
                };
                Box::pin(async move {
                    GcpNodeGroups::new(options)
                        .await
                        .map(|g| Arc::new(g) as Arc<dyn NodeGroups>)
                        .map_err(|e| format!("{e:#}"))
                })
            }))
        }
        #[cfg(feature = "azure")]
        Cloud::Azure => {
            use crate::cloud::azure::{AzureNodeGroups, AzureOptions};
            let endpoint = args.azure_endpoint.clone();
            Some(Box::new(move || {
                let mut options = AzureOptions::default();
                if let Some(e) = &endpoint {
                    options.endpoint = e.clone();
                }
                Box::pin(async move {
                    AzureNodeGroups::with_workload_identity(options)
                        .map(|g| Arc::new(g) as Arc<dyn NodeGroups>)
                })
            }))
        }
        #[allow(unreachable_patterns)]
        _ => {
            let _ = args;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(cloud: CloudKind, endpoint: Option<&str>) -> CloudArgs {
        CloudArgs {
            cloud,
            cloud_endpoint: endpoint.map(str::to_string),
            aws_endpoint_url: None,
            gcp_endpoint: None,
            gke_endpoint: None,
            azure_endpoint: None,
        }
    }

    #[test]
    fn auto_prefers_the_simulated_cloud_a_kubeconfig_names() {
        let c = choose(
            &args(CloudKind::Auto, None),
            Some("http://127.0.0.1:1".into()),
        )
        .unwrap();
        assert_eq!(
            c,
            Choice::Sim {
                endpoint: "http://127.0.0.1:1".into()
            }
        );
        let c = choose(&args(CloudKind::Auto, None), None).unwrap();
        assert_eq!(
            c,
            Choice::Real {
                clouds: vec![Cloud::Aws, Cloud::Gcp, Cloud::Azure]
            }
        );
    }

    #[test]
    fn a_named_cloud_allows_only_that_cloud_and_sim_needs_an_endpoint() {
        assert_eq!(
            choose(&args(CloudKind::Gcp, None), Some("http://x".into())).unwrap(),
            Choice::Real {
                clouds: vec![Cloud::Gcp]
            }
        );
        let e = choose(&args(CloudKind::Sim, None), None).unwrap_err();
        assert!(e.contains("--cloud-endpoint"), "{e}");
        assert_eq!(
            choose(&args(CloudKind::Sim, Some("http://e")), None).unwrap(),
            Choice::Sim {
                endpoint: "http://e".into()
            }
        );
    }

    #[tokio::test]
    async fn an_unconfigured_cloud_pauses_with_a_clear_error() {
        let (groups, _) = build(&args(CloudKind::Aws, None), None).unwrap();
        let g = crate::cloud::GroupRef::Azure {
            subscription_id: "s".into(),
            resource_group: "rg".into(),
            scale_set: "vmss".into(),
        };
        let e = groups.describe(&g).await.unwrap_err();
        assert_eq!(e.kind, crate::cloud::CloudErrorKind::Permission);
        assert!(e.message.contains("no azure provider"), "{e}");
    }
}
