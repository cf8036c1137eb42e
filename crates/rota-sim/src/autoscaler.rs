//! A simulated cluster autoscaler for one node group: the other writer of a group's capacity
//! that a rotation shares it with.
//!
//! Scale-up raises the desired capacity by one within the group's maximum size (as when
//! pods are pending). Scale-down removes one node the way the cluster autoscaler does for an
//! empty node: a Ready, schedulable node of the group that runs no workload pod and carries
//! no `scale-down-disabled` annotation has its instance terminated with decrement. Both go
//! through the cloud's API (so injected cloud faults hit them too) and read the cluster from
//! the store in the same step (a pod cannot land in between on the paused, single-threaded
//! runtime the simulation runs on).

use serde_json::Value;

use rota_core::cloud::{CloudError, GroupRef, GroupState, Lifecycle, NodeGroups};
use rota_core::rotate::observed::SCALE_DOWN_DISABLED;

/// What one autoscaler step did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scaled {
    /// Desired capacity raised to this.
    Up(u32),
    /// This node's instance terminated with decrement.
    Down { node: String, instance: String },
    /// Nothing to do (at the maximum size, or no node may go).
    Nothing,
}

/// The node a scale-down removes, with its instance (pure): the first by name of the group's
/// nodes that is Ready, schedulable, not protected, and runs nothing but DaemonSet pods.
pub fn scale_down_candidate(
    group: &GroupState,
    nodes: &[Value],
    pods: &[Value],
) -> Option<(String, String)> {
    scale_down_candidates(group, nodes, pods).into_iter().next()
}

/// Every node a scale-down may remove, by name, with its instance (pure; see
/// [`scale_down_candidate`]). The real autoscaler removes one only after it has been
/// unneeded for a while (`--scale-down-unneeded-time`, 10 minutes by default).
pub fn scale_down_candidates(
    group: &GroupState,
    nodes: &[Value],
    pods: &[Value],
) -> Vec<(String, String)> {
    if group.desired <= group.min {
        return Vec::new();
    }
    let mut found: Vec<(String, String)> = Vec::new();
    for n in nodes {
        let pid = n["spec"]["providerID"].as_str().unwrap_or_default();
        let Some(inst) = group
            .instances
            .iter()
            .find(|i| i.provider_id == pid && i.lifecycle == Lifecycle::InService)
        else {
            continue;
        };
        let name = n["metadata"]["name"].as_str().unwrap_or_default();
        let ready = n["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        let cordoned = n["spec"]["unschedulable"] == true;
        let protected = n["metadata"]["annotations"][SCALE_DOWN_DISABLED] == "true";
        let busy = pods.iter().any(|p| {
            p["spec"]["nodeName"].as_str() == Some(name)
                && !p["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|os| os.iter().any(|o| o["kind"] == "DaemonSet"))
                && !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
        });
        if ready && !cordoned && !protected && !busy {
            found.push((name.to_string(), inst.id.clone()));
        }
    }
    found.sort();
    found
}

/// Raise the group's desired capacity by one, within its maximum size.
pub async fn scale_up(cloud: &dyn NodeGroups, group: &GroupRef) -> Result<Scaled, CloudError> {
    let g = cloud.describe(group).await?;
    if g.desired >= g.max {
        return Ok(Scaled::Nothing);
    }
    cloud.set_capacity(group, g.desired + 1, None).await?;
    Ok(Scaled::Up(g.desired + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rota_core::cloud::Instance;
    use serde_json::json;

    #[test]
    fn only_empty_unprotected_ready_nodes_go() {
        let inst = |id: &str| Instance {
            id: id.into(),
            provider_id: format!("aws:///us-east-1a/{id}"),
            image: "ami-1".into(),
            zone: "us-east-1a".into(),
            lifecycle: Lifecycle::InService,
            launch_error: None,
        };
        let group = GroupState {
            group: GroupRef::Aws {
                region: "us-east-1".into(),
                auto_scaling_group: "g".into(),
            },
            desired: 4,
            min: 1,
            max: 6,
            template_image: "ami-1".into(),
            instances: vec![inst("i-a"), inst("i-b"), inst("i-c"), inst("i-d")],
        };
        let node = |name: &str, id: &str, extra: Value| {
            let mut n = json!({
                "metadata": {"name": name, "annotations": {}},
                "spec": {"providerID": format!("aws:///us-east-1a/{id}")},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}
            });
            if extra == json!("protected") {
                n["metadata"]["annotations"][SCALE_DOWN_DISABLED] = json!("true");
            }
            if extra == json!("cordoned") {
                n["spec"]["unschedulable"] = json!(true);
            }
            n
        };
        let nodes = vec![
            node("a", "i-a", json!(null)),
            node("b", "i-b", json!("protected")),
            node("c", "i-c", json!("cordoned")),
            node("d", "i-d", json!(null)),
        ];
        let pods = vec![
            json!({"spec": {"nodeName": "a"}, "metadata": {}, "status": {"phase": "Running"}}),
            json!({"spec": {"nodeName": "d"},
                   "metadata": {"ownerReferences": [{"kind": "DaemonSet"}]},
                   "status": {"phase": "Running"}}),
        ];
        assert_eq!(
            scale_down_candidate(&group, &nodes, &pods),
            Some(("d".into(), "i-d".into()))
        );
        let mut at_min = group.clone();
        at_min.desired = 1;
        assert_eq!(scale_down_candidate(&at_min, &nodes, &pods), None);
    }
}
