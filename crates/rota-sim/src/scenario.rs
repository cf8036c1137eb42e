//! Scenarios: which simulated clusters exist, what runs on them and what goes wrong.
//!
//! A scenario is built from the fleet as rota resolves it (a list of
//! [`DesiredCluster`]): every pool becomes a cloud group of N prebooted instances on the image
//! its wave pins, so the simulated fleet starts exactly where the repo says it is. On top come
//! a workload profile (what runs in each cluster; YAML, see `docs/simulated-fleet.md`) and a
//! fault profile ([`FaultProfile`]). [`WorkloadProfile::default`] is a believable cluster:
//! replicated web tiers with PDBs, a stateful tier that tolerates one disruption at a time,
//! two DaemonSets and a singleton whose PDB blocks every drain of its node.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::faults::FaultProfile;
use rota_core::cloud::{Cloud, GroupRef};
use rota_core::fleet::duration::GoDuration;
use rota_core::fleet::resolved::DesiredCluster;

/// The node shape and count of simulated pools.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct NodeProfile {
    /// Nodes per pool unless overridden.
    pub per_pool: u32,
    /// `cluster/pool` → node count.
    pub overrides: BTreeMap<String, u32>,
    /// Allocatable CPU per node, Kubernetes quantity (`"4"`, `"3500m"`).
    pub cpu: String,
    /// Allocatable memory per node (`"16Gi"`).
    pub memory: String,
    /// Most pods per node.
    pub pods: u32,
    /// From in service to the node registered (kubelet start).
    pub register_after: GoDuration,
    /// From registered to Ready.
    pub ready_after: GoDuration,
}

impl Default for NodeProfile {
    fn default() -> Self {
        NodeProfile {
            per_pool: 3,
            overrides: BTreeMap::new(),
            cpu: "4".into(),
            memory: "16Gi".into(),
            pods: 110,
            register_after: GoDuration::from_secs(15),
            ready_after: GoDuration::from_secs(20),
        }
    }
}

/// A PodDisruptionBudget of a workload: exactly one of the two.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PdbSpec {
    /// An integer or a percentage string (`"80%"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<serde_json::Value>,
}

/// A replicated workload (a Deployment with its ReplicaSet).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeploymentProfile {
    pub name: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// Fixed replica count; or see `replicas_per_node`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// Replicas as a multiple of the cluster's node count (rounded up), for load scenarios.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas_per_node: Option<f64>,
    #[serde(default = "default_cpu")]
    pub cpu: String,
    #[serde(default = "default_memory")]
    pub memory: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pdb: Option<PdbSpec>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Delay from a pod starting on a node to Ready.
    #[serde(default = "default_ready_after")]
    pub ready_after: GoDuration,
    /// The pod's terminationGracePeriodSeconds.
    #[serde(default = "default_grace")]
    pub grace_period: GoDuration,
    /// Mounts an emptyDir volume (drains need `--delete-emptydir-data`).
    #[serde(default)]
    pub empty_dir: bool,
    /// Its pods carry `karpenter.sh/do-not-disrupt: "true"` (long jobs, training runs).
    #[serde(default)]
    pub do_not_disrupt: bool,
}

/// One pod per node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DaemonSetProfile {
    pub name: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    #[serde(default = "default_cpu")]
    pub cpu: String,
    #[serde(default = "default_memory")]
    pub memory: String,
    #[serde(default = "default_ready_after")]
    pub ready_after: GoDuration,
}

fn default_namespace() -> String {
    "default".into()
}
fn default_cpu() -> String {
    "100m".into()
}
fn default_memory() -> String {
    "128Mi".into()
}
fn default_ready_after() -> GoDuration {
    GoDuration::from_secs(10)
}
fn default_grace() -> GoDuration {
    GoDuration::from_secs(30)
}

/// What runs in every simulated cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct WorkloadProfile {
    pub nodes: NodeProfile,
    pub deployments: Vec<DeploymentProfile>,
    pub daemon_sets: Vec<DaemonSetProfile>,
    /// Cluster → the Kubernetes minor (`"1.30"`) its simulated API server reports on
    /// `/version`. A cluster not named here reports its Cluster's `spec.kubernetes`, else
    /// 1.33 (`store::DEFAULT_KUBERNETES`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub control_planes: BTreeMap<String, String>,
}

impl Default for WorkloadProfile {
    fn default() -> Self {
        let deploy =
            |name: &str, ns: &str, replicas: u32, pdb: Option<PdbSpec>| DeploymentProfile {
                name: name.into(),
                namespace: ns.into(),
                replicas: Some(replicas),
                replicas_per_node: None,
                cpu: "250m".into(),
                memory: "256Mi".into(),
                pdb,
                node_selector: BTreeMap::new(),
                ready_after: default_ready_after(),
                grace_period: default_grace(),
                empty_dir: false,
                do_not_disrupt: false,
            };
        let min = |v: serde_json::Value| PdbSpec {
            min_available: Some(v),
            max_unavailable: None,
        };
        let max = |v: serde_json::Value| PdbSpec {
            min_available: None,
            max_unavailable: Some(v),
        };
        let mut db = deploy("postgres", "data", 3, Some(max(1.into())));
        db.memory = "1Gi".into();
        db.empty_dir = true;
        db.grace_period = GoDuration::from_secs(60);
        WorkloadProfile {
            nodes: NodeProfile::default(),
            deployments: vec![
                deploy("web", "shop", 6, Some(min("50%".into()))),
                deploy("api", "shop", 4, Some(max("25%".into()))),
                deploy("worker", "shop", 3, None),
                db,
                // A singleton with minAvailable 1: evicting its only pod is always refused,
                // so a drain of its node blocks until someone relaxes the PDB.
                deploy("license-server", "legacy", 1, Some(min(1.into()))),
            ],
            daemon_sets: vec![
                DaemonSetProfile {
                    name: "node-exporter".into(),
                    namespace: "monitoring".into(),
                    cpu: "50m".into(),
                    memory: "64Mi".into(),
                    ready_after: GoDuration::from_secs(5),
                },
                DaemonSetProfile {
                    name: "log-shipper".into(),
                    namespace: "logging".into(),
                    cpu: "100m".into(),
                    memory: "128Mi".into(),
                    ready_after: GoDuration::from_secs(5),
                },
            ],
            control_planes: BTreeMap::new(),
        }
    }
}

/// A profile that cannot be used, naming the file and the field.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: {field}: {message}")]
    Invalid {
        path: String,
        field: String,
        message: String,
    },
}

impl WorkloadProfile {
    pub fn from_yaml(text: &str, origin: &str) -> Result<Self, ProfileError> {
        let p: WorkloadProfile = serde_yaml::from_str(text).map_err(|e| ProfileError::Parse {
            path: origin.into(),
            message: e.to_string(),
        })?;
        p.check(origin)?;
        Ok(p)
    }

    pub fn load(path: &Path) -> Result<Self, ProfileError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
            path: origin.clone(),
            source,
        })?;
        Self::from_yaml(&text, &origin)
    }

    fn check(&self, origin: &str) -> Result<(), ProfileError> {
        let invalid = |field: String, message: String| ProfileError::Invalid {
            path: origin.into(),
            field,
            message,
        };
        let q = |field: String, v: &str, memory: bool| {
            let ok = if memory {
                super::quantity::parse_memory(v).is_some()
            } else {
                super::quantity::parse_cpu_millis(v).is_some()
            };
            if ok {
                Ok(())
            } else {
                Err(invalid(
                    field,
                    format!("{v:?} is not a Kubernetes quantity"),
                ))
            }
        };
        for (cluster, v) in &self.control_planes {
            if rota_core::fleet::kubernetes::KubeMinor::parse(v).is_none() {
                return Err(invalid(
                    format!("controlPlanes.{cluster}"),
                    format!("{v:?} is not a Kubernetes major.minor such as \"1.31\""),
                ));
            }
        }
        q("nodes.cpu".into(), &self.nodes.cpu, false)?;
        q("nodes.memory".into(), &self.nodes.memory, true)?;
        let mut seen = std::collections::BTreeSet::new();
        for (i, d) in self.deployments.iter().enumerate() {
            let at = format!("deployments[{i}]");
            if !seen.insert((d.namespace.clone(), d.name.clone())) {
                return Err(invalid(
                    format!("{at}.name"),
                    format!("{}/{} appears twice", d.namespace, d.name),
                ));
            }
            match (d.replicas, d.replicas_per_node) {
                (Some(_), None) => {}
                (None, Some(x)) if x >= 0.0 => {}
                _ => {
                    return Err(invalid(
                        format!("{at}.replicas"),
                        "give exactly one of replicas and replicasPerNode (not negative)".into(),
                    ));
                }
            }
            q(format!("{at}.cpu"), &d.cpu, false)?;
            q(format!("{at}.memory"), &d.memory, true)?;
            if let Some(p) = &d.pdb
                && p.min_available.is_some() == p.max_unavailable.is_some()
            {
                return Err(invalid(
                    format!("{at}.pdb"),
                    "give exactly one of minAvailable and maxUnavailable".into(),
                ));
            }
        }
        for (i, d) in self.daemon_sets.iter().enumerate() {
            let at = format!("daemonSets[{i}]");
            if !seen.insert((d.namespace.clone(), d.name.clone())) {
                return Err(invalid(
                    format!("{at}.name"),
                    format!("{}/{} appears twice", d.namespace, d.name),
                ));
            }
            q(format!("{at}.cpu"), &d.cpu, false)?;
            q(format!("{at}.memory"), &d.memory, true)?;
        }
        Ok(())
    }
}

/// One simulated pool: a cloud group and the labels its nodes register with.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolScenario {
    pub name: String,
    pub group: GroupRef,
    pub image: String,
    pub node_selector: BTreeMap<String, String>,
    pub nodes: u32,
}

/// One simulated cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterScenario {
    pub name: String,
    pub cloud: Cloud,
    pub pools: Vec<PoolScenario>,
}

impl ClusterScenario {
    pub fn node_count(&self) -> u32 {
        self.pools.iter().map(|p| p.nodes).sum()
    }
}

/// Everything a simulated fleet is made of.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub clusters: Vec<ClusterScenario>,
    pub workloads: WorkloadProfile,
    pub faults: FaultProfile,
    pub seed: u64,
}

impl Scenario {
    /// The fleet as resolved from the repo: each pool gets `workloads.nodes` nodes (or its
    /// override) on the image its wave pins.
    pub fn from_fleet(
        clusters: &[DesiredCluster],
        mut workloads: WorkloadProfile,
        faults: FaultProfile,
        seed: u64,
    ) -> Self {
        // What the repo declares, where the profile does not say otherwise.
        for c in clusters {
            if let Some(v) = &c.kubernetes {
                workloads
                    .control_planes
                    .entry(c.name.clone())
                    .or_insert_with(|| v.clone());
            }
        }
        let clusters = clusters
            .iter()
            .map(|c| ClusterScenario {
                name: c.name.clone(),
                cloud: c.cloud,
                pools: c
                    .pools
                    .iter()
                    .map(|p| PoolScenario {
                        name: p.name.clone(),
                        group: p.group.clone(),
                        image: p.image.clone(),
                        node_selector: p.node_selector.clone(),
                        nodes: workloads
                            .nodes
                            .overrides
                            .get(&format!("{}/{}", c.name, p.name))
                            .copied()
                            .unwrap_or(workloads.nodes.per_pool),
                    })
                    .collect(),
            })
            .collect();
        Scenario {
            clusters,
            workloads,
            faults,
            seed,
        }
    }

    /// The replicas of `d` in a cluster of `nodes` nodes.
    pub fn replicas(d: &DeploymentProfile, nodes: u32) -> u32 {
        match (d.replicas, d.replicas_per_node) {
            (Some(n), _) => n,
            (None, Some(x)) => (f64::from(nodes) * x).ceil() as u32,
            (None, None) => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rota_core::fleet::resolved::{DesiredPool, EffectivePolicy, Mode};

    pub(crate) fn cluster(name: &str, pools: &[(&str, &str)]) -> DesiredCluster {
        DesiredCluster {
            name: name.into(),
            labels: BTreeMap::new(),
            cloud: Cloud::Aws,
            wave: "main".into(),
            wave_index: 0,
            mode: Mode::Reconcile,
            kubernetes: None,
            pools: pools
                .iter()
                .map(|(pool, image)| DesiredPool {
                    owner_image: None,
                    cluster: name.into(),
                    name: (*pool).into(),
                    channel: "general".into(),
                    version: "2026.11.1".into(),
                    image: (*image).into(),
                    arch: Default::default(),
                    kubelet: None,
                    released: None,
                    max_age: None,
                    group: GroupRef::Aws {
                        region: "us-east-1".into(),
                        auto_scaling_group: format!("{name}-{pool}"),
                    },
                    node_selector: [("eks.amazonaws.com/nodegroup".to_string(), pool.to_string())]
                        .into(),
                    policy: EffectivePolicy::default(),
                    gates: vec![],
                    mode: Mode::Reconcile,
                })
                .collect(),
        }
    }

    #[test]
    fn fleet_pools_become_groups_on_their_pinned_image() {
        let mut w = WorkloadProfile::default();
        w.nodes.overrides.insert("prod/gpu".into(), 7);
        let s = Scenario::from_fleet(
            &[cluster("prod", &[("general", "ami-1"), ("gpu", "ami-2")])],
            w,
            FaultProfile::default(),
            1,
        );
        let pools = &s.clusters[0].pools;
        assert_eq!((pools[0].nodes, pools[0].image.as_str()), (3, "ami-1"));
        assert_eq!((pools[1].nodes, pools[1].image.as_str()), (7, "ami-2"));
        assert_eq!(s.clusters[0].node_count(), 10);
    }

    #[test]
    fn default_profile_has_the_believable_pieces() {
        let w = WorkloadProfile::default();
        let singleton = w
            .deployments
            .iter()
            .find(|d| d.replicas == Some(1))
            .unwrap();
        assert_eq!(
            singleton.pdb.as_ref().unwrap().min_available,
            Some(1.into())
        );
        assert!(
            w.deployments.iter().any(|d| {
                d.pdb.as_ref().and_then(|p| p.max_unavailable.clone()) == Some(1.into())
            })
        );
        assert_eq!(w.daemon_sets.len(), 2);
        // It survives a YAML round trip, so the docs can print it.
        let text = serde_yaml::to_string(&w).unwrap();
        assert_eq!(WorkloadProfile::from_yaml(&text, "<t>").unwrap(), w);
    }

    #[test]
    fn bad_profiles_name_file_and_field() {
        let e = WorkloadProfile::from_yaml(
            "deployments: [{name: a, replicas: 1, cpu: lots}]",
            "w.yaml",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "w.yaml: deployments[0].cpu: \"lots\" is not a Kubernetes quantity"
        );
        let e =
            WorkloadProfile::from_yaml("deployments: [{name: a, replicas: 1, pdb: {}}]", "w.yaml")
                .unwrap_err();
        assert!(e.to_string().contains("deployments[0].pdb"), "{e}");
        let e = WorkloadProfile::from_yaml("deployments: [{name: a}]", "w.yaml").unwrap_err();
        assert!(e.to_string().contains("deployments[0].replicas"), "{e}");
        let e = WorkloadProfile::from_yaml("nodez: {}", "w.yaml").unwrap_err();
        assert!(
            e.to_string().starts_with("w.yaml: unknown field `nodez`"),
            "{e}"
        );
    }

    #[test]
    fn replicas_per_node_scale_with_the_cluster() {
        let w = WorkloadProfile::from_yaml("deployments: [{name: a, replicasPerNode: 2.5}]", "<t>")
            .unwrap();
        assert_eq!(Scenario::replicas(&w.deployments[0], 3), 8);
    }
}

#[cfg(test)]
mod example_tests {
    use super::*;

    #[test]
    fn shipped_examples_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sim");
        WorkloadProfile::load(&dir.join("workloads.yaml")).unwrap();
        let scale = WorkloadProfile::load(&dir.join("scale.yaml")).unwrap();
        let per_node: u32 = scale
            .deployments
            .iter()
            .map(|d| Scenario::replicas(d, 1))
            .sum::<u32>()
            + scale.daemon_sets.len() as u32;
        assert_eq!(per_node, 30, "150,000 pods on 5,000 nodes");
        FaultProfile::load(&dir.join("faults.yaml")).unwrap();
    }
}
