//! Simulated Karpenter: the NodePools (`karpenter.sh/v1`), EC2NodeClasses
//! (`karpenter.k8s.aws/v1`) and NodeClaims of a cluster's Karpenter pools, served by the API
//! server from Karpenter's published CRDs (release v1.14.1, vendored unchanged under
//! `tests/fixtures/karpenter/` with their source and checksums), and a controller that does
//! what Karpenter's does with them, as far as rota depends on it:
//!
//! - every instance of the pool has a NodeClaim (`karpenter.sh/nodepool` label, status
//!   `providerID`, `imageID`, `nodeName`, conditions `Launched`, `Registered`, `Initialized`,
//!   `Ready`); nodes carry `karpenter.sh/nodepool` (see `kubelet`);
//! - new instances boot from the AMI the NodeClass's `amiSelectorTerms` select by `id`;
//! - drift: a NodeClaim whose `imageID` is not selected any more gets `Drifted=True`;
//! - disruption of drifted NodeClaims within the NodePool's `spec.disruption.budgets` that
//!   apply to reason `Drifted` (the most restrictive one; a count or a percent of the pool;
//!   budgets with a `schedule` are not modelled and never apply): a replacement NodeClaim is
//!   launched first, and once it is Ready the old NodeClaim is deleted (`deletionTimestamp`,
//!   Karpenter's termination finalizer): its node is tainted and cordoned, its pods are evicted
//!   through the Eviction API (PodDisruptionBudgets hold them: a 429 is tried again on the next
//!   round), then its instance is terminated and the NodeClaim goes;
//! - a node with a pod (or itself) annotated `karpenter.sh/do-not-disrupt: "true"` is never
//!   chosen for disruption;
//! - a NodeClaim whose instance failed to boot, or whose launch the cloud refused or lost,
//!   is launched again until it has an instance, as Karpenter retries a NodeClaim's launch.
//!
//! Not modelled: provisioning for pending pods (the pool keeps its size), consolidation,
//! expiry, `terminationGracePeriod`, scheduled budgets.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::cloud::SimCloud;
use super::store::{ApiError, ListOptions, ResourceType, Store};
use rota_core::cloud::karpenter::{DRIFTED, NODEPOOL_LABEL};
use rota_core::cloud::{GroupRef, Lifecycle, NodeGroups};
use rota_core::fleet::owner::ManagedGroup;
use rota_core::rotate::observed::KARPENTER_DO_NOT_DISRUPT;

/// Karpenter's CRDs as its release v1.14.1 publishes them.
pub const CRDS: [&str; 3] = [
    include_str!("../../../tests/fixtures/karpenter/karpenter.sh_nodepools.yaml"),
    include_str!("../../../tests/fixtures/karpenter/karpenter.sh_nodeclaims.yaml"),
    include_str!("../../../tests/fixtures/karpenter/karpenter.k8s.aws_ec2nodeclasses.yaml"),
];

/// The finalizer Karpenter puts on a NodeClaim: it goes once the instance is terminated.
const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";
/// The taint Karpenter puts on a node it disrupts.
const DISRUPTED_TAINT: &str = "karpenter.sh/disrupted";
/// The simulation's note on an old NodeClaim: the replacement launched for it.
const REPLACEMENT: &str = "sim.rota.dev/replacement";
/// How often the controller looks (scaled by the world's speed).
const ROUND: Duration = Duration::from_secs(5);

pub fn node_pools() -> ResourceType {
    rt("karpenter.sh", "nodepools", "NodePool")
}
pub fn node_claims() -> ResourceType {
    rt("karpenter.sh", "nodeclaims", "NodeClaim")
}
pub fn ec2_node_classes() -> ResourceType {
    rt("karpenter.k8s.aws", "ec2nodeclasses", "EC2NodeClass")
}

fn rt(group: &str, plural: &str, kind: &str) -> ResourceType {
    ResourceType {
        group: group.into(),
        version: "v1".into(),
        plural: plural.into(),
        kind: kind.into(),
        namespaced: false,
        status: true,
        short_names: Vec::new(),
    }
}

/// The CRDs as JSON objects.
pub fn crd_objects() -> Vec<Value> {
    CRDS.iter()
        .map(|y| serde_yaml::from_str(y).expect("Karpenter's published CRD is YAML"))
        .collect()
}

/// Installs Karpenter's CRDs in `store` (once).
pub fn install(store: &Store) -> Result<(), ApiError> {
    for crd in crd_objects() {
        match store.create(&ResourceType::crds(), None, crd) {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A Karpenter pool's NodePool and EC2NodeClass (both named after the NodePool), the
/// NodeClass pinned to `image`, with Karpenter's default budget.
pub fn create_pool(store: &Store, pool: &ManagedGroup, image: &str) -> Result<(), ApiError> {
    let name = pool.name();
    let class = json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "role": format!("KarpenterNodeRole-{}", pool.cluster()),
            "amiSelectorTerms": [{"id": image}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": pool.cluster()}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": pool.cluster()}}],
        },
    });
    let node_pool = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": name},
                "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
            }},
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "Never",
                "budgets": [{"nodes": "10%"}],
            },
        },
    });
    store.create(&ec2_node_classes(), None, class)?;
    store.create(&node_pools(), None, node_pool)?;
    Ok(())
}

/// Runs the controller for the Karpenter pools `pools` of the cluster in `store`.
pub fn spawn_controller(
    store: Store,
    cloud: SimCloud,
    pools: Vec<ManagedGroup>,
    speed: f64,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let round = ROUND.div_f64(speed.max(1e-9));
        loop {
            for p in &pools {
                if let Err(e) = reconcile(&store, &cloud, p).await {
                    tracing::debug!(pool = %p, error = %e, "simulated Karpenter: round failed");
                }
            }
            tokio::time::sleep(round).await;
        }
    })
}

fn s<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str)
}

fn cond(v: &Value, kind: &str) -> bool {
    v.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| s(c, "/type") == Some(kind) && s(c, "/status") == Some("True"))
        })
}

/// The one AMI the NodeClass selects by ID (`None`: not pinned; nothing drifts).
fn pinned(class: &Value) -> Option<String> {
    let terms = class.pointer("/spec/amiSelectorTerms")?.as_array()?;
    match terms.as_slice() {
        [t] if t.as_object().is_some_and(|o| o.len() == 1) => s(t, "/id").map(str::to_string),
        _ => None,
    }
}

/// The most restrictive budget for reason Drifted, in nodes, for a pool of `total`.
fn drift_budget(node_pool: &Value, total: u32) -> u32 {
    let budgets = node_pool
        .pointer("/spec/disruption/budgets")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_else(|| vec![json!({"nodes": "10%"})]);
    budgets
        .iter()
        .filter(|b| b.get("schedule").is_none())
        .filter(|b| {
            b.get("reasons")
                .and_then(Value::as_array)
                .is_none_or(|r| r.iter().any(|x| x.as_str() == Some(DRIFTED)))
        })
        .filter_map(|b| {
            let n = s(b, "/nodes")?;
            match n.strip_suffix('%') {
                Some(p) => p.parse::<u32>().ok().map(|p| (total * p).div_ceil(100)),
                None => n.parse().ok(),
            }
        })
        .min()
        .unwrap_or(u32::MAX)
}

/// One round of the controller for one pool.
async fn reconcile(store: &Store, cloud: &SimCloud, pool: &ManagedGroup) -> Result<(), String> {
    let name = pool.name();
    let group = GroupRef::Managed(pool.clone());
    let np = store
        .get(&node_pools(), None, name)
        .map_err(|e| e.message)?;
    let class_name = s(&np, "/spec/template/spec/nodeClassRef/name").unwrap_or(name);
    let class = store
        .get(&ec2_node_classes(), None, class_name)
        .map_err(|e| e.message)?;
    let image = pinned(&class);
    let state = cloud.describe(&group).await.map_err(|e| e.to_string())?;
    let opts = ListOptions::labels(&format!("{NODEPOOL_LABEL}={name}"));
    let mut claims = store
        .list(&node_claims(), None, &opts)
        .map_err(|e| e.message)?
        .0;
    let nodes: BTreeMap<String, Value> = store
        .list(&ResourceType::nodes(), None, &ListOptions::default())
        .map_err(|e| e.message)?
        .0
        .into_iter()
        .filter_map(|n| Some((s(&n, "/spec/providerID")?.to_string(), n)))
        .collect();
    // A NodeClaim whose instance failed to boot (the cloud dropped it and launches another in
    // its place) is launched again, as Karpenter relaunches a NodeClaim that never
    // registers: unbound here, the cloud's next instance of its image takes it below, and
    // the drifted NodeClaim it replaces keeps waiting for it.
    for c in claims.iter_mut() {
        let Some(pid) = s(c, "/status/providerID") else {
            continue;
        };
        let live = state
            .instances
            .iter()
            .any(|i| i.provider_id == pid && i.lifecycle != Lifecycle::Terminating);
        if live || c.pointer("/metadata/deletionTimestamp").is_some() {
            continue;
        }
        let cname = s(c, "/metadata/name").unwrap_or_default().to_string();
        *c = store
            .modify(&node_claims(), None, &cname, |c| {
                if let Some(st) = c["status"].as_object_mut() {
                    st.remove("providerID");
                    st.remove("nodeName");
                }
                c["status"]["conditions"] = json!([]);
                Ok(())
            })
            .map_err(|e| e.message)?;
    }
    // Every instance has its NodeClaim: a pending one of the same image takes it, else one
    // is made for it (the instances a scenario starts with).
    for inst in state
        .instances
        .iter()
        .filter(|i| i.lifecycle != Lifecycle::Terminating)
    {
        if claims
            .iter()
            .any(|c| s(c, "/status/providerID") == Some(inst.provider_id.as_str()))
        {
            continue;
        }
        let pending = claims.iter().position(|c| {
            s(c, "/status/providerID").is_none() && s(c, "/status/imageID") == Some(&inst.image)
        });
        let claim = match pending {
            Some(i) => claims.remove(i),
            None => store
                .create(
                    &node_claims(),
                    None,
                    new_claim(pool, class_name, &inst.image),
                )
                .map_err(|e| e.message)?,
        };
        let cname = s(&claim, "/metadata/name").unwrap_or_default().to_string();
        let c = store
            .modify(&node_claims(), None, &cname, |c| {
                c["status"]["providerID"] = json!(inst.provider_id);
                Ok(())
            })
            .map_err(|e| e.message)?;
        claims.push(c);
    }
    relaunch(cloud, &group, &state, &claims, image.as_deref()).await?;
    let now = store.timestamp();
    for c in &mut claims {
        *c = refresh_status(store, c, &nodes, image.as_deref(), &now)?;
    }
    terminate_deleted(store, cloud, &group, &claims, &nodes).await?;
    replace_ready(store, &claims)?;
    if let Some(image) = image {
        disrupt_drifted(store, cloud, pool, class_name, &np, &claims, &nodes, &image).await?;
    }
    Ok(())
}

/// NodeClaims without an instance (a launch the cloud refused or lost, a boot that failed)
/// are launched until they have one, as Karpenter retries a NodeClaim's launch: the group's
/// capacity covers every NodeClaim.
async fn relaunch(
    cloud: &SimCloud,
    group: &GroupRef,
    state: &rota_core::cloud::GroupState,
    claims: &[Value],
    image: Option<&str>,
) -> Result<(), String> {
    let unbound = claims
        .iter()
        .filter(|c| s(c, "/status/providerID").is_none())
        .filter(|c| c.pointer("/metadata/deletionTimestamp").is_none())
        .count() as u32;
    let live = state
        .instances
        .iter()
        .filter(|i| i.lifecycle != Lifecycle::Terminating)
        .count() as u32;
    let want = live + unbound;
    if unbound == 0 || state.desired >= want {
        return Ok(());
    }
    if let Some(image) = image {
        cloud
            .set_image(group, image)
            .await
            .map_err(|e| e.to_string())?;
    }
    cloud
        .set_capacity(group, want, Some(state.max.max(want)))
        .await
        .map_err(|e| e.to_string())
}

fn new_claim(pool: &ManagedGroup, class: &str, image: &str) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {
            "generateName": format!("{}-", pool.name()),
            "labels": {NODEPOOL_LABEL: pool.name(), "karpenter.k8s.aws/ec2nodeclass": class},
            "finalizers": [TERMINATION_FINALIZER],
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class},
            "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
        },
        "status": {"imageID": image, "conditions": []},
    })
}

/// A NodeClaim's status from its instance's node and the NodeClass's pin; written only when
/// it changed.
fn refresh_status(
    store: &Store,
    c: &Value,
    nodes: &BTreeMap<String, Value>,
    image: Option<&str>,
    now: &str,
) -> Result<Value, String> {
    let node = s(c, "/status/providerID").and_then(|p| nodes.get(p));
    let ready = node.is_some_and(|n| cond(n, "Ready"));
    let launched = s(c, "/status/providerID").is_some();
    let drifted = launched && image.is_some_and(|i| s(c, "/status/imageID") != Some(i));
    let want = [
        ("Launched", launched),
        ("Registered", node.is_some()),
        ("Initialized", ready),
        ("Ready", ready),
        (DRIFTED, drifted),
    ];
    let old = c.pointer("/status/conditions").and_then(Value::as_array);
    let mut conditions = Vec::new();
    for (kind, on) in want {
        let status = if on { "True" } else { "False" };
        let prev = old.and_then(|cs| cs.iter().find(|x| s(x, "/type") == Some(kind)));
        match prev {
            Some(p) if s(p, "/status") == Some(status) => conditions.push(p.clone()),
            // Karpenter removes Drifted rather than set it False.
            None if kind == DRIFTED && !on => {}
            _ if kind == DRIFTED && !on => {}
            _ => conditions.push(json!({
                "type": kind, "status": status, "lastTransitionTime": now,
                "reason": kind, "message": "",
            })),
        }
    }
    let node_name = node.and_then(|n| s(n, "/metadata/name"));
    let unchanged = old.map(|o| o.as_slice()) == Some(conditions.as_slice())
        && s(c, "/status/nodeName") == node_name;
    if unchanged {
        return Ok(c.clone());
    }
    let name = s(c, "/metadata/name").unwrap_or_default().to_string();
    store
        .modify(&node_claims(), None, &name, |c| {
            c["status"]["conditions"] = json!(conditions);
            if let Some(n) = node_name {
                c["status"]["nodeName"] = json!(n);
            }
            Ok(())
        })
        .map_err(|e| e.message)
}

/// Old NodeClaims whose replacement is Ready are deleted (their drain starts).
fn replace_ready(store: &Store, claims: &[Value]) -> Result<(), String> {
    for c in claims {
        let Some(r) = c.pointer(&format!(
            "/metadata/annotations/{}",
            REPLACEMENT.replace('/', "~1")
        )) else {
            continue;
        };
        let ready = claims
            .iter()
            .any(|x| s(x, "/metadata/name") == r.as_str() && cond(x, "Ready"));
        if ready && c.pointer("/metadata/deletionTimestamp").is_none() {
            let name = s(c, "/metadata/name").unwrap_or_default();
            store
                .delete(&node_claims(), None, name)
                .map_err(|e| e.message)?;
        }
    }
    Ok(())
}

/// Deleted NodeClaims: taint and cordon the node, evict its pods (PDBs answer 429: next
/// round), terminate the instance once no pod but DaemonSets' is left, drop the finalizer.
async fn terminate_deleted(
    store: &Store,
    cloud: &SimCloud,
    group: &GroupRef,
    claims: &[Value],
    nodes: &BTreeMap<String, Value>,
) -> Result<(), String> {
    for c in claims
        .iter()
        .filter(|c| c.pointer("/metadata/deletionTimestamp").is_some())
    {
        let name = s(c, "/metadata/name").unwrap_or_default().to_string();
        let node = s(c, "/status/providerID").and_then(|p| nodes.get(p));
        if let Some(n) = node {
            let nname = s(n, "/metadata/name").unwrap_or_default().to_string();
            if !cordoned(n) {
                store
                    .modify(&ResourceType::nodes(), None, &nname, |n| {
                        n["spec"]["unschedulable"] = json!(true);
                        let taint = json!({"key": DISRUPTED_TAINT, "effect": "NoSchedule"});
                        match n["spec"]["taints"].as_array_mut() {
                            Some(ts) => ts.push(taint),
                            None => n["spec"]["taints"] = json!([taint]),
                        }
                        Ok(())
                    })
                    .map_err(|e| e.message)?;
            }
            // 429: a PodDisruptionBudget holds a pod; asked again next round.
            if super::eviction::evict_node(store, &nname, 1.0).map_err(|e| e.message)? > 0 {
                continue;
            }
        }
        if let Some(inst) =
            s(c, "/status/providerID").and_then(|p| p.rsplit('/').next().map(str::to_string))
        {
            cloud
                .terminate(group, &inst, true)
                .await
                .map_err(|e| e.to_string())?;
        }
        store
            .modify(&node_claims(), None, &name, |c| {
                c["metadata"]["finalizers"] = json!([]);
                Ok(())
            })
            .map_err(|e| e.message)?;
        let _ = store.delete(&node_claims(), None, &name);
    }
    Ok(())
}

fn cordoned(node: &Value) -> bool {
    node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true)
}

/// Whether `karpenter.sh/do-not-disrupt: "true"` is on the node or one of its pods.
fn do_not_disrupt(store: &Store, node: &Value) -> bool {
    let key = format!(
        "/metadata/annotations/{}",
        KARPENTER_DO_NOT_DISRUPT.replace('/', "~1")
    );
    if s(node, &key) == Some("true") {
        return true;
    }
    let name = s(node, "/metadata/name").unwrap_or_default();
    store
        .list(
            &ResourceType::pods(),
            None,
            &ListOptions::fields(&format!("spec.nodeName={name}")),
        )
        .map(|(pods, _)| pods.iter().any(|p| s(p, &key) == Some("true")))
        .unwrap_or(true)
}

/// Starts replacements for drifted NodeClaims, as many as the Drifted budget leaves.
#[allow(clippy::too_many_arguments)]
async fn disrupt_drifted(
    store: &Store,
    cloud: &SimCloud,
    pool: &ManagedGroup,
    class: &str,
    np: &Value,
    claims: &[Value],
    nodes: &BTreeMap<String, Value>,
    image: &str,
) -> Result<(), String> {
    let replacing = |c: &&Value| {
        c.pointer("/metadata/deletionTimestamp").is_some()
            || c.pointer(&format!(
                "/metadata/annotations/{}",
                REPLACEMENT.replace('/', "~1")
            ))
            .is_some()
    };
    let total = claims
        .iter()
        .filter(|c| c.pointer("/metadata/deletionTimestamp").is_none())
        .count() as u32;
    let disrupting = claims.iter().filter(replacing).count() as u32;
    let mut room = drift_budget(np, total).saturating_sub(disrupting);
    let group = GroupRef::Managed(pool.clone());
    for c in claims
        .iter()
        .filter(|c| cond(c, DRIFTED) && cond(c, "Ready") && !replacing(c))
    {
        if room == 0 {
            break;
        }
        let Some(node) = s(c, "/status/providerID").and_then(|p| nodes.get(p)) else {
            continue;
        };
        if do_not_disrupt(store, node) {
            continue;
        }
        room -= 1;
        let fresh = store
            .create(&node_claims(), None, new_claim(pool, class, image))
            .map_err(|e| e.message)?;
        let fresh = s(&fresh, "/metadata/name").unwrap_or_default().to_string();
        let name = s(c, "/metadata/name").unwrap_or_default();
        store
            .modify(&node_claims(), None, name, |c| {
                c["metadata"]["annotations"][REPLACEMENT] = json!(fresh);
                Ok(())
            })
            .map_err(|e| e.message)?;
        let g = cloud.describe(&group).await.map_err(|e| e.to_string())?;
        cloud
            .set_image(&group, image)
            .await
            .map_err(|e| e.to_string())?;
        cloud
            .set_capacity(&group, g.desired + 1, Some(g.max.max(g.desired + 1)))
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_crds_register_the_three_kinds() {
        let store = Store::new();
        install(&store).unwrap();
        install(&store).unwrap();
        for (g, p) in [
            ("karpenter.sh", "nodepools"),
            ("karpenter.sh", "nodeclaims"),
            ("karpenter.k8s.aws", "ec2nodeclasses"),
        ] {
            let t = store.resource_type(g, p).expect(p);
            assert_eq!(t.version, "v1");
            assert!(!t.namespaced);
        }
    }

    #[test]
    fn the_drift_budget_is_the_most_restrictive_for_drifted() {
        let np = |b: Value| json!({"spec": {"disruption": {"budgets": b}}});
        assert_eq!(drift_budget(&np(json!([{"nodes": "10%"}])), 25), 3);
        let both = json!([{"nodes": "50%"}, {"nodes": "2", "reasons": ["Drifted"]}]);
        assert_eq!(drift_budget(&np(both), 10), 2);
        let other = json!([{"nodes": "0", "reasons": ["Underutilized"]}]);
        assert_eq!(drift_budget(&np(other), 10), u32::MAX);
        assert_eq!(drift_budget(&json!({}), 10), 1, "Karpenter's default 10%");
    }
}
