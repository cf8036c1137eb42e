//! An AKS cluster's agent pools as ARM lists them, for `rota clusters import --cloud azure`
//! (`AgentPools_List`, paged by `nextLink`), read-only.
//!
//! Each agent pool is written as `group: {aksAgentPool: NAME}`, its nodes selected by the
//! label AKS puts on them (`kubernetes.azure.com/agentpool`). No `arch`: the version's `aks:
//! {nodeImageVersion}` names its own (`…arm64…`). A `System` mode pool is listed with a
//! comment: it runs the cluster's own add-ons, and a bad image there takes the cluster down
//! with it; a Virtual Machines pool (`type: VirtualMachines`) too: AKS's node image upgrade
//! of such pools is not what rota has been tested with.
//!
//! Not listed (loose ends, docs/cloud-azure.md): self-managed scale sets outside AKS, which
//! carry no tag naming their cluster that rota could trust.

use std::collections::BTreeMap;

use serde_json::Value;

use super::agent_pools::{AKS_API_VERSION, AksAgentPools};
use rota_core::cloud::CloudError;
use rota_core::cloud::managed::AKS_AGENTPOOL_LABEL;
use rota_core::onboard::FoundPool;

pub const LIST_AGENT_POOLS: &str = "AgentPools_List";

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
}
