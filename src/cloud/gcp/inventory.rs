//! A GKE cluster's node pools as GKE lists them, for `rota clusters import --cloud gcp`
//! (`projects.locations.clusters.nodePools.list`), read-only.
//!
//! Each node pool is written as `group: {gkeNodePool: NAME}`, its nodes selected by the label
//! GKE puts on them (`cloud.google.com/gke-nodepool`). No `arch`: a GKE pool takes the
//! version's `gke: {nodeVersion, imageType}`, and GKE picks the node image for the pool's
//! machine type itself. Autopilot's and node auto-provisioning's pools (which GKE creates
//! and deletes on its own) are listed with a comment saying so: rota must not be given them.
//!
//! Not listed (loose ends, docs/cloud-gcp.md): self-managed managed instance groups outside
//! GKE (a kops or self-built cluster on GCE), which carry no label or tag naming their
//! cluster that rota could trust.

use std::collections::BTreeMap;

use serde_json::Value;

use super::node_pools::GkeNodePools;
use rota_core::cloud::CloudError;
use rota_core::cloud::managed::GKE_NODEPOOL_LABEL;
use rota_core::onboard::FoundPool;

pub const LIST_NODE_POOLS: &str = "nodePools.list";

/// The node pools of `nodePools.list`'s answer as pools of the Cluster.
pub fn pools_of(answer: &Value, project: &str, location: &str, cluster: &str) -> Vec<FoundPool> {
    let mut pools: Vec<FoundPool> = answer["nodePools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|np| {
            let name = np["name"].as_str()?.to_string();
            let mut source = format!(
                "GKE node pool {name} of cluster {cluster} in {project}/{location} ({LIST_NODE_POOLS})"
            );
            if np["autopilotConfig"]["enabled"].as_bool() == Some(true)
                || name.starts_with("nap-")
            {
                source.push_str("; made by GKE's node auto-provisioning: remove it, GKE replaces such pools on its own");
            }
            if np["management"]["autoUpgrade"].as_bool() == Some(true) {
                source.push_str(
                    "; GKE auto-upgrades it (management.autoUpgrade): turn that off before rota drives it",
                );
            }
            Some(FoundPool {
                name: name.clone(),
                group: vec![("gkeNodePool", name.clone())],
                node_selector: BTreeMap::from([(GKE_NODEPOOL_LABEL.to_string(), name)]),
                arch: None,
                source,
            })
        })
        .collect();
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    pools
}

impl GkeNodePools {
    /// The node pools of GKE cluster `cluster` at `location` (a region or a zone).
    pub async fn list_cluster_pools(
        &self,
        project: &str,
        location: &str,
        cluster: &str,
    ) -> Result<Vec<FoundPool>, CloudError> {
        let path = format!("projects/{project}/locations/{location}/clusters/{cluster}/nodePools");
        let subject = format!("GKE cluster {cluster}");
        let answer = self
            .request(LIST_NODE_POOLS, &subject, http::Method::GET, &path, None)
            .await?;
        Ok(pools_of(&answer, project, location, cluster))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn node_pools_become_pools_selected_by_gkes_label_with_warnings() {
        let answer = json!({"nodePools": [
            {"name": "spot", "management": {"autoUpgrade": true}},
            {"name": "general"},
            {"name": "nap-e2-standard-4-1a2b"},
        ]});
        let pools = pools_of(&answer, "acme", "europe-west1", "prod");
        let names: Vec<_> = pools.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["general", "nap-e2-standard-4-1a2b", "spot"]);
        assert_eq!(pools[0].group, vec![("gkeNodePool", "general".to_string())]);
        assert_eq!(pools[0].node_selector[GKE_NODEPOOL_LABEL], "general");
        assert!(pools[1].source.contains("auto-provisioning"));
        assert!(pools[2].source.contains("autoUpgrade"));
        assert!(pools_of(&json!({}), "a", "b", "c").is_empty());
    }
}
