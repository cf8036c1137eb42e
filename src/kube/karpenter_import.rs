//! Karpenter NodePools as `rota clusters import --cloud aws --karpenter` lists them: read
//! through the cluster's Kubernetes API (`karpenter.sh/v1` NodePools, the EC2NodeClass each
//! references), read-only.
//!
//! Each NodePool is written as `group: {karpenterNodePool: NAME}`, its nodes selected by the
//! label Karpenter puts on them (`karpenter.sh/nodepool`), with `arch` when the NodePool's
//! `kubernetes.io/arch` requirement allows exactly one (rota pins one AMI on the NodeClass).
//! A NodePool whose NodeClass is not an EC2NodeClass, or that several NodePools share, is
//! listed with a comment saying what rota will refuse or need.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;

use super::karpenter::node_pools;
use rota_core::onboard::FoundPool;

/// The label Karpenter puts on a NodePool's nodes.
pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";

/// The pools of the NodePools listed (`items`, as JSON objects).
pub fn pools_of(items: &[Value]) -> Vec<FoundPool> {
    let class_of = |np: &Value| {
        let r = &np["spec"]["template"]["spec"]["nodeClassRef"];
        (
            r["kind"].as_str().unwrap_or_default().to_string(),
            r["name"].as_str().unwrap_or_default().to_string(),
        )
    };
    let mut sharing: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for np in items {
        if let Some(n) = np["metadata"]["name"].as_str() {
            sharing
                .entry(class_of(np))
                .or_default()
                .insert(n.to_string());
        }
    }
    let mut pools: Vec<FoundPool> = items
        .iter()
        .filter_map(|np| {
            let name = np["metadata"]["name"].as_str()?.to_string();
            let (kind, class) = class_of(np);
            let mut source =
                format!("Karpenter NodePool {name} ({kind} {class}; karpenter.sh/v1 NodePools)");
            if kind != "EC2NodeClass" {
                source.push_str("; not an EC2NodeClass: rota pins AMIs on EC2NodeClasses only");
            }
            let others: Vec<&String> = sharing[&(kind.clone(), class.clone())]
                .iter()
                .filter(|n| **n != name)
                .collect();
            if !others.is_empty() {
                let list: Vec<&str> = others.iter().map(|s| s.as_str()).collect();
                source.push_str(&format!(
                    "; shares its NodeClass with {}: give them the same channel and version, or rota refuses the pin",
                    list.join(", ")
                ));
            }
            let arch = arch_of(np);
            if arch.is_none() {
                source.push_str("; allows more than one architecture: pick one (arch:) for the AMI rota pins");
            }
            Some(FoundPool {
                name: name.clone(),
                group: vec![("karpenterNodePool", name.clone())],
                node_selector: BTreeMap::from([(NODEPOOL_LABEL.to_string(), name)]),
                arch,
                source,
            })
        })
        .collect();
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    pools
}

/// The one architecture a NodePool's requirements allow (`kubernetes.io/arch` `In` one
/// value), in the fleet repo's words; Karpenter's default without a requirement is amd64.
fn arch_of(np: &Value) -> Option<String> {
    let reqs = np["spec"]["template"]["spec"]["requirements"].as_array();
    let arch = reqs
        .into_iter()
        .flatten()
        .find(|r| r["key"] == "kubernetes.io/arch");
    let values: Vec<&str> = match arch {
        None => vec!["amd64"],
        Some(r) if r["operator"] == "In" => r["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect(),
        Some(_) => return None,
    };
    match values.as_slice() {
        ["amd64"] => Some("x86_64".into()),
        ["arm64"] => Some("arm64".into()),
        _ => None,
    }
}

/// The cluster's NodePools through `client`.
pub async fn list_node_pools(client: &kube::Client) -> Result<Vec<FoundPool>, String> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &node_pools());
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing Karpenter NodePools (karpenter.sh/v1): {e}"))?;
    let items: Vec<Value> = list
        .items
        .iter()
        .map(|o| serde_json::to_value(o).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    Ok(pools_of(&items))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn np(name: &str, class: &str, archs: Option<&[&str]>) -> Value {
        let mut reqs = vec![];
        if let Some(a) = archs {
            reqs.push(json!({"key": "kubernetes.io/arch", "operator": "In", "values": a}));
        }
        json!({"metadata": {"name": name}, "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class},
            "requirements": reqs}}}})
    }

    #[test]
    fn node_pools_become_pools_with_one_arch_and_shared_classes_named() {
        let pools = pools_of(&[
            np("default", "default", None),
            np("graviton", "arm", Some(&["arm64"])),
            np("mixed", "default", Some(&["amd64", "arm64"])),
        ]);
        let by: BTreeMap<_, _> = pools.iter().map(|p| (p.name.as_str(), p)).collect();
        assert_eq!(by["default"].arch.as_deref(), Some("x86_64"));
        assert_eq!(by["graviton"].arch.as_deref(), Some("arm64"));
        assert_eq!(by["mixed"].arch, None);
        assert!(by["mixed"].source.contains("more than one architecture"));
        assert!(
            by["default"]
                .source
                .contains("shares its NodeClass with mixed")
        );
        assert!(!by["graviton"].source.contains("shares"));
        assert_eq!(
            by["graviton"].group,
            vec![("karpenterNodePool", "graviton".to_string())]
        );
        assert_eq!(by["graviton"].node_selector[NODEPOOL_LABEL], "graviton");
    }
}
