//! Karpenter's objects through the Kubernetes API: the [`DriftPools`] a Karpenter pool is
//! driven through. Reads the NodePool (`karpenter.sh/v1`), the EC2NodeClass it references
//! (`karpenter.k8s.aws/v1`) and its NodeClaims; writes two fields only, with merge patches:
//! the NodeClass's `spec.amiSelectorTerms` and the NodePool's `spec.disruption.budgets`
//! (guarded by the resourceVersion the budgets were read at).
//!
//! The same code runs against a real cluster and the simulated fleet's API server, which
//! serves Karpenter's published CRDs. What Karpenter answers is input like any other: a
//! field that is missing or of the wrong shape is an `Invalid` error naming the object and
//! the field, and nothing is written on it.

use async_trait::async_trait;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::{Value, json};

use rota_core::cloud::karpenter::{
    Budget, DriftPoolState, DriftPools, NODEPOOL_LABEL, NodeClaimState,
};
use rota_core::cloud::{CloudError, CloudErrorKind, GroupRef};
use rota_core::fleet::owner::ManagedGroup;

fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural)
}

/// `karpenter.sh/v1` NodePools.
pub fn node_pools() -> ApiResource {
    resource("karpenter.sh", "NodePool", "nodepools")
}

/// `karpenter.sh/v1` NodeClaims.
pub fn node_claims() -> ApiResource {
    resource("karpenter.sh", "NodeClaim", "nodeclaims")
}

/// `karpenter.k8s.aws/v1` EC2NodeClasses.
pub fn ec2_node_classes() -> ApiResource {
    resource("karpenter.k8s.aws", "EC2NodeClass", "ec2nodeclasses")
}

/// Karpenter's objects in one cluster.
#[derive(Clone)]
pub struct KubeKarpenter {
    client: kube::Client,
}

impl KubeKarpenter {
    pub fn new(client: kube::Client) -> Self {
        KubeKarpenter { client }
    }

    fn api(&self, r: &ApiResource) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), r)
    }
}

fn group(pool: &ManagedGroup) -> GroupRef {
    GroupRef::Managed(pool.clone())
}

/// A Kubernetes API error as a cloud error of `call`: classified by its status code.
fn api_error(pool: &ManagedGroup, call: &'static str, e: kube::Error) -> CloudError {
    let kind = match &e {
        kube::Error::Api(s) => match s.code {
            404 => CloudErrorKind::NotFound,
            401 | 403 => CloudErrorKind::Permission,
            429 => CloudErrorKind::Throttled,
            400 | 422 => CloudErrorKind::Invalid,
            // 409: the NodePool changed since it was read; read again and retry.
            _ => CloudErrorKind::Transient,
        },
        _ => CloudErrorKind::Transient,
    };
    CloudError::new(kind, call, &group(pool), e.to_string())
}

fn invalid(pool: &ManagedGroup, call: &'static str, what: String) -> CloudError {
    CloudError::new(CloudErrorKind::Invalid, call, &group(pool), what)
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn condition_true(claim: &Value, kind: &str) -> bool {
    claim
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| str_at(c, "/type") == Some(kind) && str_at(c, "/status") == Some("True"))
        })
}

fn as_value(o: &DynamicObject) -> Value {
    serde_json::to_value(o).unwrap_or(Value::Null)
}

/// The NodeClass a NodePool references, checked to be an EC2NodeClass.
fn node_class_of(pool: &ManagedGroup, np: &Value) -> Result<String, CloudError> {
    let name = np
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("?");
    let kind = str_at(np, "/spec/template/spec/nodeClassRef/kind");
    match (str_at(np, "/spec/template/spec/nodeClassRef/name"), kind) {
        (Some(c), Some("EC2NodeClass")) => Ok(c.to_string()),
        (Some(_), other) => Err(invalid(
            pool,
            "GetNodePool",
            format!(
                "NodePool {name}: spec.template.spec.nodeClassRef.kind is {other:?}, not EC2NodeClass"
            ),
        )),
        (None, _) => Err(invalid(
            pool,
            "GetNodePool",
            format!("NodePool {name}: spec.template.spec.nodeClassRef.name is missing"),
        )),
    }
}

/// The NodePool's disruption budgets (none: Karpenter's default applies, and rota's is the
/// only one it adds).
fn budgets_of(pool: &ManagedGroup, np: &Value) -> Result<Vec<Budget>, CloudError> {
    match np.pointer("/spec/disruption/budgets") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(b) => serde_json::from_value(b.clone()).map_err(|e| {
            invalid(
                pool,
                "GetNodePool",
                format!("NodePool {}: spec.disruption.budgets: {e}", pool.name()),
            )
        }),
    }
}

/// The NodeClass's `amiSelectorTerms`: the IDs, and every other term as written.
fn terms_of(pool: &ManagedGroup, nc: &Value) -> Result<(Vec<String>, Vec<String>), CloudError> {
    let name = str_at(nc, "/metadata/name").unwrap_or("?");
    let terms = nc
        .pointer("/spec/amiSelectorTerms")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            invalid(
                pool,
                "GetEC2NodeClass",
                format!("EC2NodeClass {name}: spec.amiSelectorTerms is missing or not a list"),
            )
        })?;
    let (mut ids, mut other) = (Vec::new(), Vec::new());
    for t in terms {
        match (
            t.get("id").and_then(Value::as_str),
            t.as_object().map(|o| o.len()),
        ) {
            (Some(id), Some(1)) => ids.push(id.to_string()),
            _ => other.push(t.to_string()),
        }
    }
    Ok((ids, other))
}

fn claim_of(c: &Value) -> NodeClaimState {
    NodeClaimState {
        name: str_at(c, "/metadata/name").unwrap_or_default().to_string(),
        node: str_at(c, "/status/nodeName").map(str::to_string),
        image: str_at(c, "/status/imageID").map(str::to_string),
        ready: condition_true(c, "Ready"),
        drifted: condition_true(c, "Drifted"),
        deleting: c
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|d| !d.is_null()),
    }
}

#[async_trait]
impl DriftPools for KubeKarpenter {
    async fn describe(&self, pool: &ManagedGroup) -> Result<DriftPoolState, CloudError> {
        let name = pool.name();
        let pools = self.api(&node_pools());
        let np = as_value(
            &pools
                .get(name)
                .await
                .map_err(|e| api_error(pool, "GetNodePool", e))?,
        );
        let node_class = node_class_of(pool, &np)?;
        let budgets = budgets_of(pool, &np)?;
        let nc = as_value(
            &self
                .api(&ec2_node_classes())
                .get(&node_class)
                .await
                .map_err(|e| api_error(pool, "GetEC2NodeClass", e))?,
        );
        let (ami_ids, other_terms) = terms_of(pool, &nc)?;
        let all = pools
            .list(&ListParams::default())
            .await
            .map_err(|e| api_error(pool, "ListNodePools", e))?;
        let shared_with = all
            .items
            .iter()
            .map(as_value)
            .filter(|p| str_at(p, "/metadata/name") != Some(name))
            .filter(|p| str_at(p, "/spec/template/spec/nodeClassRef/name") == Some(&node_class))
            .filter_map(|p| str_at(&p, "/metadata/name").map(str::to_string))
            .collect();
        let claims = self
            .api(&node_claims())
            .list(&ListParams::default().labels(&format!("{NODEPOOL_LABEL}={name}")))
            .await
            .map_err(|e| api_error(pool, "ListNodeClaims", e))?
            .items
            .iter()
            .map(|c| claim_of(&as_value(c)))
            .collect();
        Ok(DriftPoolState {
            pool: pool.clone(),
            node_class,
            ami_ids,
            other_terms,
            shared_with,
            budgets,
            resource_version: str_at(&np, "/metadata/resourceVersion")
                .unwrap_or_default()
                .to_string(),
            claims,
        })
    }

    async fn pin_image(
        &self,
        pool: &ManagedGroup,
        node_class: &str,
        image: &str,
    ) -> Result<(), CloudError> {
        let patch = json!({"spec": {"amiSelectorTerms": [{"id": image}]}});
        self.api(&ec2_node_classes())
            .patch(node_class, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(drop)
            .map_err(|e| api_error(pool, "PatchEC2NodeClass", e))
    }

    async fn set_budgets(
        &self,
        pool: &ManagedGroup,
        budgets: &[Budget],
        resource_version: &str,
    ) -> Result<(), CloudError> {
        // The resourceVersion makes the merge patch conditional: a NodePool changed since
        // the describe answers 409, and the next pass decides from the new budgets.
        let patch = json!({
            "metadata": {"resourceVersion": resource_version},
            "spec": {"disruption": {"budgets": budgets}},
        });
        self.api(&node_pools())
            .patch(pool.name(), &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(drop)
            .map_err(|e| api_error(pool, "PatchNodePool", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn np() -> ManagedGroup {
        ManagedGroup::KarpenterNodePool {
            region: "us-east-1".into(),
            eks_cluster: "prod".into(),
            node_pool: "default".into(),
        }
    }

    #[test]
    fn a_nodepool_without_its_nodeclass_or_with_bad_budgets_is_refused_naming_the_field() {
        let missing = json!({"metadata": {"name": "default"}, "spec": {"template": {"spec": {}}}});
        let e = node_class_of(&np(), &missing).unwrap_err();
        assert!(
            e.message.contains("spec.template.spec.nodeClassRef.name"),
            "{e}"
        );
        let other = json!({"metadata": {"name": "default"},
            "spec": {"template": {"spec": {"nodeClassRef": {"name": "x", "kind": "AKSNodeClass"}}}}});
        assert!(
            node_class_of(&np(), &other)
                .unwrap_err()
                .message
                .contains("AKSNodeClass")
        );
        let bad = json!({"spec": {"disruption": {"budgets": [{"nodes": 3}]}}});
        let e = budgets_of(&np(), &bad).unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Invalid);
        assert!(e.message.contains("spec.disruption.budgets"), "{e}");
    }

    #[test]
    fn only_a_term_with_an_id_alone_counts_as_a_pin() {
        let nc = json!({"metadata": {"name": "default"}, "spec": {"amiSelectorTerms": [
            {"id": "ami-1"}, {"alias": "al2023@latest"}, {"id": "ami-2", "owner": "self"}]}});
        let (ids, other) = terms_of(&np(), &nc).unwrap();
        assert_eq!(ids, ["ami-1"]);
        assert_eq!(other.len(), 2);
        let none = json!({"metadata": {"name": "default"}, "spec": {}});
        assert!(
            terms_of(&np(), &none)
                .unwrap_err()
                .message
                .contains("amiSelectorTerms")
        );
    }
}
