//! A Karpenter NodePool as rota drives it: Kubernetes objects, not a cloud API, so its own
//! small trait ([`DriftPools`]) beside [`super::managed::OwnerPools`]. Karpenter replaces a
//! pool's nodes by its drift: rota pins the EC2NodeClass's image (`amiSelectorTerms: [{id}]`)
//! and paces the drift with the NodePool's disruption budgets for reason `Drifted`. Nothing
//! else of Karpenter's is written: not the NodeClaims, not the nodes, not the NodePool's
//! template.
//!
//! The planner decides from [`DriftPoolState`] (data, as the edge read it); the edge reads
//! NodePools, EC2NodeClasses and NodeClaims and writes the two fields above.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::CloudError;
use crate::fleet::owner::ManagedGroup;

/// The label Karpenter puts on a NodePool's NodeClaims and nodes: the NodePool's name.
pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";
/// The disruption reason of a node whose NodeClaim no longer matches its NodePool or
/// NodeClass (Karpenter's status condition type and budget reason alike).
pub const DRIFTED: &str = "Drifted";

/// One of a NodePool's disruption budgets (`spec.disruption.budgets[]`, karpenter.sh/v1):
/// at most `nodes` (a count or a percent) disrupted at once for `reasons` (all when absent),
/// during `schedule` + `duration` when given. The most restrictive budget applies.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    pub nodes: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasons: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
}

impl Budget {
    /// The budget rota adds while it paces a drift: `nodes` at once for reason `Drifted`
    /// only, always in force (no schedule).
    pub fn drift(nodes: u32) -> Budget {
        Budget {
            nodes: nodes.to_string(),
            reasons: Some(vec![DRIFTED.to_string()]),
            schedule: None,
            duration: None,
        }
    }

    /// Whether this is a budget of the shape rota adds (reason `Drifted` only, no schedule):
    /// how rota tells its own budget from the user's ones behind it.
    pub fn is_drift_only(&self) -> bool {
        self.schedule.is_none()
            && self.duration.is_none()
            && self.reasons.as_deref() == Some(&[DRIFTED.to_string()][..])
            && self.nodes.parse::<u32>().is_ok()
    }
}

/// One NodeClaim of the pool, as Karpenter reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimState {
    pub name: String,
    /// `status.nodeName`, once the node registered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `status.imageID`: the AMI the instance was launched from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Condition `Ready` is `True`.
    pub ready: bool,
    /// Condition `Drifted` is `True`.
    pub drifted: bool,
    /// `metadata.deletionTimestamp` is set: Karpenter is disrupting (draining) it.
    pub deleting: bool,
}

/// A Karpenter pool at one moment: the NodePool, the EC2NodeClass it references, its
/// NodeClaims.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftPoolState {
    pub pool: ManagedGroup,
    /// The EC2NodeClass the NodePool references (`spec.template.spec.nodeClassRef.name`).
    pub node_class: String,
    /// The `id`s of the NodeClass's `amiSelectorTerms`.
    pub ami_ids: Vec<String>,
    /// Terms that select by something else (`alias`, `tags`, `name`, `owner`), as written:
    /// the pool is not pinned while one is there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_terms: Vec<String>,
    /// Other NodePools referencing the same NodeClass: a pin moves them too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_with: Vec<String>,
    /// The NodePool's `spec.disruption.budgets`, in order.
    pub budgets: Vec<Budget>,
    /// The NodePool's `metadata.resourceVersion` when read: a budget write based on it is
    /// refused if someone changed the NodePool since (optimistic concurrency).
    pub resource_version: String,
    pub claims: Vec<NodeClaimState>,
}

impl DriftPoolState {
    /// The one AMI the NodeClass is pinned to, if it selects exactly one by ID.
    pub fn pinned(&self) -> Option<&str> {
        match (self.ami_ids.as_slice(), self.other_terms.is_empty()) {
            ([id], true) => Some(id.as_str()),
            _ => None,
        }
    }

    /// The image a node of the pool runs, from its NodeClaim.
    pub fn image_of_node(&self, node: &str) -> Option<&str> {
        self.claims
            .iter()
            .find(|c| c.node.as_deref() == Some(node))
            .and_then(|c| c.image.as_deref())
    }
}

/// Karpenter's objects for rota's pools. Contracts as for [`super::NodeGroups`]: errors are
/// classified once by [`super::CloudErrorKind`] (a NodePool or NodeClass that does not
/// exist is `NotFound`, a write refused for a stale resourceVersion `Transient`);
/// `describe` is read-only; both writes are absolute (the same call twice changes nothing).
#[async_trait]
pub trait DriftPools: Send + Sync {
    /// The NodePool, its NodeClass and its NodeClaims now.
    async fn describe(&self, pool: &ManagedGroup) -> Result<DriftPoolState, CloudError>;

    /// Set the NodeClass's `amiSelectorTerms` to `[{id: image}]` and nothing else.
    async fn pin_image(
        &self,
        pool: &ManagedGroup,
        node_class: &str,
        image: &str,
    ) -> Result<(), CloudError>;

    /// Set the NodePool's `spec.disruption.budgets` to `budgets`, only if the NodePool is
    /// still at `resource_version`.
    async fn set_budgets(
        &self,
        pool: &ManagedGroup,
        budgets: &[Budget],
        resource_version: &str,
    ) -> Result<(), CloudError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rota_tells_its_drift_budget_from_the_users() {
        assert!(Budget::drift(2).is_drift_only());
        assert!(Budget::drift(0).is_drift_only());
        let user = Budget {
            nodes: "10%".into(),
            reasons: Some(vec![DRIFTED.into()]),
            ..Default::default()
        };
        assert!(!user.is_drift_only(), "a percent is the user's");
        let scheduled = Budget {
            schedule: Some("0 9 * * mon-fri".into()),
            duration: Some("8h".into()),
            ..Budget::drift(0)
        };
        assert!(!scheduled.is_drift_only());
        let all = Budget {
            nodes: "1".into(),
            ..Default::default()
        };
        assert!(!all.is_drift_only(), "no reasons means every reason");
    }
}
