//! A GCP cluster's pools as their owners list them, for `rota clusters import --cloud gcp`,
//! read-only: a GKE cluster's node pools (`projects.locations.clusters.nodePools.list`), and
//! the self-managed managed instance groups whose instance template carries the cluster's
//! label (`instanceGroupManagers.aggregatedList`, then each group's `instanceTemplates.get`).
//!
//! Each node pool is written as `group: {gkeNodePool: NAME}`, its nodes selected by the label
//! GKE puts on them (`cloud.google.com/gke-nodepool`). No `arch`: a GKE pool takes the
//! version's `gke: {nodeVersion, imageType}`, and GKE picks the node image for the pool's
//! machine type itself. Autopilot's and node auto-provisioning's pools (which GKE creates
//! and deletes on its own) are listed with a comment saying so: rota must not be given them.
//!
//! A self-managed group (a kops cluster on GCE, or one built the same way) is the cluster's
//! when its instance template is labelled `k8s-io-cluster-name: <cluster>` (kops's label, the
//! cluster's name with its dots as dashes, as GCE label values take them); a group GKE made
//! for a node pool (its template labelled `goog-gke-node`) is the node pool's, not a pool of
//! its own: it is left out. Its nodes are picked by `kops.k8s.io/instancegroup`, which kops
//! sets to the template's `k8s-io-instance-group`; a group without it is listed with no labels
//! (written commented out, see `rota_core::onboard`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::node_pools::GkeNodePools;
use rota_core::cloud::CloudError;
use rota_core::cloud::managed::GKE_NODEPOOL_LABEL;
use rota_core::onboard::FoundPool;

pub const LIST_NODE_POOLS: &str = "nodePools.list";
/// Compute's list of a project's managed instance groups, every zone and region.
pub const LIST_MIGS: &str = "instanceGroupManagers.aggregatedList";
/// Compute's read of a group's instance template.
pub const GET_TEMPLATE: &str = "instanceTemplates.get";
/// kops's label on a cluster's instance templates: the cluster's name.
pub const CLUSTER_LABEL: &str = "k8s-io-cluster-name";
/// kops's label on an instance group's template; its nodes carry [`KOPS_NODE_LABEL`].
pub const INSTANCE_GROUP_LABEL: &str = "k8s-io-instance-group";
/// The node label kops puts on an instance group's nodes.
pub const KOPS_NODE_LABEL: &str = "kops.k8s.io/instancegroup";
/// The label GKE puts on its node pools' templates.
pub const GKE_NODE_LABEL: &str = "goog-gke-node";

/// The self-managed group `mig` (in `scope`: `zones/Z` or `regions/R`) as a pool of
/// `cluster`, if its `template` carries the cluster's label and is not GKE's.
pub fn mig_pool(mig: &Value, template: &Value, scope: &str, cluster: &str) -> Option<FoundPool> {
    let name = mig["name"].as_str()?.to_string();
    let labels = &template["properties"]["labels"];
    let value = cluster.replace('.', "-").to_ascii_lowercase();
    if labels.get(GKE_NODE_LABEL).is_some() || labels[CLUSTER_LABEL].as_str() != Some(&value) {
        return None;
    }
    let (kind, location) = scope.split_once('/')?;
    let key = match kind {
        "zones" => "zone",
        "regions" => "region",
        _ => return None,
    };
    let node_selector: BTreeMap<String, String> = labels[INSTANCE_GROUP_LABEL]
        .as_str()
        .map(|ig| BTreeMap::from([(KOPS_NODE_LABEL.to_string(), ig.to_string())]))
        .unwrap_or_default();
    let mut source = format!(
        "managed instance group {name} in {location}, its template labelled {CLUSTER_LABEL}={value} ({LIST_MIGS})"
    );
    if node_selector.is_empty() {
        source.push_str(&format!(
            "; no {INSTANCE_GROUP_LABEL} label: write the labels its nodes carry"
        ));
    }
    Some(FoundPool {
        name: name.clone(),
        group: vec![("instanceGroupManager", name), (key, location.to_string())],
        node_selector,
        arch: None,
        source,
    })
}

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

    /// The self-managed managed instance groups of `cluster` in `project` (by their
    /// templates' cluster label), in every zone and region.
    pub async fn list_cluster_migs(
        &self,
        project: &str,
        cluster: &str,
    ) -> Result<Vec<FoundPool>, CloudError> {
        let subject = format!("project {project}");
        let mut pools = Vec::new();
        let mut page: Option<String> = None;
        // A bound on pages, as for ARM's nextLink: a double or a proxy that loops must not
        // hold the import forever.
        for _ in 0..100 {
            let path = match &page {
                Some(t) => {
                    format!("projects/{project}/aggregated/instanceGroupManagers?pageToken={t}")
                }
                None => format!("projects/{project}/aggregated/instanceGroupManagers"),
            };
            let answer = self.compute_get(LIST_MIGS, &subject, &path).await?;
            for (scope, list) in answer["items"].as_object().into_iter().flatten() {
                for mig in list["instanceGroupManagers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    let Some(t) = mig["instanceTemplate"].as_str() else {
                        continue;
                    };
                    let Some((_, t)) = t.split_once("/compute/v1/") else {
                        continue;
                    };
                    let template = self.compute_get(GET_TEMPLATE, &subject, t).await?;
                    pools.extend(mig_pool(mig, &template, scope, cluster));
                }
            }
            match answer["nextPageToken"].as_str().filter(|t| !t.is_empty()) {
                Some(t) => page = Some(t.to_string()),
                None => break,
            }
        }
        pools.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(pools)
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

    /// A group is the cluster's by its template's kops label; GKE's own groups and other
    /// clusters' are not listed; its nodes are picked by kops's instance group label.
    #[test]
    fn migs_labelled_for_the_cluster_become_self_managed_pools() {
        let mig = json!({"name": "nodes-europe-west1-b"});
        let tpl = |labels: Value| json!({"properties": {"labels": labels}});
        let ours = tpl(
            json!({CLUSTER_LABEL: "prod-k8s-local", INSTANCE_GROUP_LABEL: "nodes-europe-west1-b"}),
        );
        let p = mig_pool(&mig, &ours, "zones/europe-west1-b", "prod.k8s.local").unwrap();
        assert_eq!(
            p.group,
            vec![
                ("instanceGroupManager", "nodes-europe-west1-b".to_string()),
                ("zone", "europe-west1-b".to_string())
            ]
        );
        assert_eq!(p.node_selector[KOPS_NODE_LABEL], "nodes-europe-west1-b");
        assert!(
            p.source.contains("k8s-io-cluster-name=prod-k8s-local"),
            "{}",
            p.source
        );
        let gke = tpl(json!({CLUSTER_LABEL: "prod-k8s-local", GKE_NODE_LABEL: ""}));
        assert!(mig_pool(&mig, &gke, "zones/z", "prod.k8s.local").is_none());
        let other = tpl(json!({CLUSTER_LABEL: "staging"}));
        assert!(mig_pool(&mig, &other, "zones/z", "prod.k8s.local").is_none());
        let bare = tpl(json!({CLUSTER_LABEL: "prod-k8s-local"}));
        let r = mig_pool(&mig, &bare, "regions/europe-west1", "prod.k8s.local").unwrap();
        assert_eq!(r.group[1], ("region", "europe-west1".to_string()));
        assert!(r.node_selector.is_empty() && r.source.contains("no k8s-io-instance-group"));
    }
}
