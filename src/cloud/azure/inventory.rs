//! An Azure cluster's pools as ARM lists them, for `rota clusters import --cloud azure`,
//! read-only: an AKS cluster's agent pools (`AgentPools_List`, paged by `nextLink`), and the
//! self-managed scale sets of the cluster's resource group tagged as the cluster's
//! (`VirtualMachineScaleSets_List`).
//!
//! Each agent pool is written as `group: {aksAgentPool: NAME}`, its nodes selected by the
//! label AKS puts on them (`kubernetes.azure.com/agentpool`). No `arch`: the version's `aks:
//! {nodeImageVersion}` names its own (`…arm64…`). A `System` mode pool is listed with a
//! comment: it runs the cluster's own add-ons, and a bad image there takes the cluster down
//! with it; a Virtual Machines pool (`type: VirtualMachines`) too: AKS's node image upgrade
//! of such pools is not what rota has been tested with.
//!
//! A self-managed scale set is the cluster's when it carries Cluster API for Azure's tag
//! `sigs.k8s.io_cluster-api-provider-azure_cluster_<cluster>` (CAPZ tags every resource of a
//! cluster it makes so) or `kubernetes.io_cluster_<cluster>`; a scale set AKS made for an
//! agent pool (tagged `aks-managed-poolName`) is the agent pool's and is left out. Its node
//! labels are read from cluster-autoscaler's node template tags
//! (`k8s.io_cluster-autoscaler_node-template_label_<key>`); a scale set without them is listed
//! with no labels (written commented out, see `rota_core::onboard`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::agent_pools::{AKS_API_VERSION, AksAgentPools};
use rota_core::cloud::CloudError;
use rota_core::cloud::managed::AKS_AGENTPOOL_LABEL;
use rota_core::onboard::FoundPool;

pub use super::agent_pools::{LIST_AGENT_POOLS, LIST_SCALE_SETS};
/// The tag prefixes naming a scale set's cluster: Cluster API for Azure's, and the Kubernetes
/// one in Azure's tag spelling (no `/` in an Azure tag name).
pub const CLUSTER_TAG_PREFIXES: [&str; 2] = [
    "sigs.k8s.io_cluster-api-provider-azure_cluster_",
    "kubernetes.io_cluster_",
];
/// The tag AKS puts on its agent pools' scale sets.
pub const AKS_POOL_TAG: &str = "aks-managed-poolName";
/// cluster-autoscaler's tag prefix (Azure's spelling) for the labels a scale set's nodes carry.
pub const NODE_LABEL_TAG_PREFIX: &str = "k8s.io_cluster-autoscaler_node-template_label_";

/// The scale set `vmss` (as `VirtualMachineScaleSets_List` answers it) as a pool of
/// `cluster`, if it is tagged as the cluster's and is not AKS's.
pub fn scale_set_pool(vmss: &Value, resource_group: &str, cluster: &str) -> Option<FoundPool> {
    let name = vmss["name"].as_str()?.to_string();
    let tags = vmss["tags"].as_object()?;
    if tags.contains_key(AKS_POOL_TAG) {
        return None;
    }
    let tag = CLUSTER_TAG_PREFIXES
        .iter()
        .map(|p| format!("{p}{cluster}"))
        .find(|t| tags.contains_key(t))?;
    let node_selector: BTreeMap<String, String> = tags
        .iter()
        .filter_map(|(k, v)| {
            let key = k.strip_prefix(NODE_LABEL_TAG_PREFIX)?;
            Some((key.to_string(), v.as_str()?.to_string()))
        })
        .collect();
    let mut source = format!(
        "scale set {name} in resource group {resource_group}, tagged {tag} ({LIST_SCALE_SETS})"
    );
    if node_selector.is_empty() {
        source.push_str(&format!(
            "; no {NODE_LABEL_TAG_PREFIX}* tag: write the labels its nodes carry"
        ));
    }
    Some(FoundPool {
        name: name.clone(),
        group: vec![("scaleSet", name)],
        node_selector,
        arch: None,
        source,
    })
}

/// The agent pools of one `AgentPools_List` page as pools of the Cluster.
pub fn pools_of(page: &Value, resource_group: &str, cluster: &str) -> Vec<FoundPool> {
    page["value"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ap| {
            let name = ap["name"].as_str()?.to_string();
            let p = &ap["properties"];
            let mut source = format!(
                "AKS agent pool {name} of cluster {cluster} in resource group {resource_group} ({LIST_AGENT_POOLS})"
            );
            if p["mode"].as_str() == Some("System") {
                source.push_str("; a System pool: it runs the cluster's own add-ons, rotate it last");
            }
            if p["type"].as_str() == Some("VirtualMachines") {
                source.push_str("; a VirtualMachines pool: rota's AKS upgrade is tested on scale set pools");
            }
            Some(FoundPool {
                name: name.clone(),
                group: vec![("aksAgentPool", name.clone())],
                node_selector: BTreeMap::from([(AKS_AGENTPOOL_LABEL.to_string(), name)]),
                arch: None,
                source,
            })
        })
        .collect()
}

impl AksAgentPools {
    /// The agent pools of AKS cluster `cluster` (every page).
    pub async fn list_cluster_pools(
        &self,
        subscription_id: &str,
        resource_group: &str,
        cluster: &str,
    ) -> Result<Vec<FoundPool>, CloudError> {
        let subject = format!("AKS cluster {cluster}");
        let mut url = self.arm.url(&format!(
            "/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/Microsoft.ContainerService/managedClusters/{cluster}/agentPools?api-version={AKS_API_VERSION}"
        ));
        let mut pools = Vec::new();
        // A bound on pages: ARM's nextLink chain ends; a double or a proxy that loops must not
        // hold the import forever.
        for _ in 0..100 {
            let page: Value = self.arm.get_json(LIST_AGENT_POOLS, &subject, &url).await?;
            pools.extend(pools_of(&page, resource_group, cluster));
            match page["nextLink"].as_str().filter(|l| !l.is_empty()) {
                Some(link) => url = self.arm.follow(link, LIST_AGENT_POOLS, &subject)?,
                None => break,
            }
        }
        pools.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(pools)
    }

    /// The scale sets of `resource_group` tagged as `cluster`'s (every page).
    pub async fn list_cluster_scale_sets(
        &self,
        subscription_id: &str,
        resource_group: &str,
        cluster: &str,
    ) -> Result<Vec<FoundPool>, CloudError> {
        let subject = format!("resource group {resource_group}");
        let mut url = self.arm.url(&format!(
            "/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/Microsoft.Compute/virtualMachineScaleSets?api-version={}",
            super::API_VERSION
        ));
        let mut pools = Vec::new();
        for _ in 0..100 {
            let page: Value = self.arm.get_json(LIST_SCALE_SETS, &subject, &url).await?;
            for vmss in page["value"].as_array().into_iter().flatten() {
                pools.extend(scale_set_pool(vmss, resource_group, cluster));
            }
            match page["nextLink"].as_str().filter(|l| !l.is_empty()) {
                Some(link) => url = self.arm.follow(link, LIST_SCALE_SETS, &subject)?,
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
    fn agent_pools_become_pools_selected_by_akss_label_with_warnings() {
        let page = json!({"value": [
            {"name": "system", "properties": {"mode": "System"}},
            {"name": "general", "properties": {"mode": "User", "type": "VirtualMachineScaleSets"}},
        ]});
        let pools = pools_of(&page, "rg", "prod");
        assert_eq!(pools.len(), 2);
        assert_eq!(
            pools[1].group,
            vec![("aksAgentPool", "general".to_string())]
        );
        assert_eq!(pools[1].node_selector[AKS_AGENTPOOL_LABEL], "general");
        assert!(pools[0].source.contains("System pool"));
        assert!(!pools[1].source.contains(';'));
    }

    /// A scale set is the cluster's by CAPZ's (or Kubernetes') cluster tag; AKS's own and
    /// another cluster's are not listed; its node labels come from the autoscaler's tags.
    #[test]
    fn scale_sets_tagged_for_the_cluster_become_self_managed_pools() {
        let ours = json!({"name": "prod-md-0", "tags": {
            "sigs.k8s.io_cluster-api-provider-azure_cluster_prod": "owned",
            "k8s.io_cluster-autoscaler_node-template_label_pool": "general",
        }});
        let p = scale_set_pool(&ours, "rg", "prod").unwrap();
        assert_eq!(p.group, vec![("scaleSet", "prod-md-0".to_string())]);
        assert_eq!(p.node_selector["pool"], "general");
        assert!(
            p.source
                .contains("tagged sigs.k8s.io_cluster-api-provider-azure_cluster_prod")
        );
        let aks = json!({"name": "aks-general-1-vmss", "tags": {
            "kubernetes.io_cluster_prod": "owned", "aks-managed-poolName": "general"}});
        assert!(scale_set_pool(&aks, "rg", "prod").is_none());
        let other = json!({"name": "x", "tags": {"kubernetes.io_cluster_staging": "owned"}});
        assert!(scale_set_pool(&other, "rg", "prod").is_none());
        let bare = json!({"name": "y", "tags": {"kubernetes.io_cluster_prod": "owned"}});
        let b = scale_set_pool(&bare, "rg", "prod").unwrap();
        assert!(b.node_selector.is_empty() && b.source.contains("write the labels"));
        assert!(scale_set_pool(&json!({"name": "z"}), "rg", "prod").is_none());
    }
}
