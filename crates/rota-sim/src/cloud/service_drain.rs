//! The managed services' own drain of the nodes their updates replace (`managedUpdate:
//! service`): a node the update takes out is cordoned, its pods are evicted through the
//! cluster's Eviction API (`crate::eviction`, PodDisruptionBudgets respected: a 429 is asked
//! again next round), and its instance is terminated only once no pod but DaemonSets' is
//! left, or when the service's own drain timeout says so. Each service has its rules, from
//! its documentation:
//!
//! - EKS (<https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html>):
//!   when the update starts, every node not on the new AMI gets the taint
//!   `eks.amazonaws.com/nodegroup=unschedulable:NoSchedule`; the upgrade phase evicts a
//!   node's pods, cordons it once they are gone and terminates it; pods that do not leave
//!   within 15 minutes fail the update with `PodEvictionFailure`, unless the update was
//!   forced (`force` on `UpdateNodegroupVersion`, which rota sends for `drain.onTimeout:
//!   force`): then the pods left are deleted and the node goes;
//! - GKE (<https://cloud.google.com/kubernetes-engine/docs/concepts/node-pool-upgrade-strategies>,
//!   surge upgrades; <https://cloud.google.com/kubernetes-engine/docs/concepts/cluster-upgrades>):
//!   the node is cordoned and drained, PodDisruptionBudgets respected for up to one hour,
//!   after which the pods left are deleted and the node goes anyway;
//! - AKS (<https://learn.microsoft.com/azure/aks/upgrade-aks-node-pools-rolling>,
//!   `upgradeSettings.drainTimeoutInMinutes`, default 30, and `undrainableNodeBehavior`):
//!   the node is cordoned and drained honouring PodDisruptionBudgets; a drain that outlasts
//!   the timeout fails the upgrade, and (the default behaviour, `Schedule`) the blocked node
//!   is made schedulable again, not upgraded, and the surge taken back.
//!
//! The cloud knows each cluster's API server ([`SimCloud::serve_cluster`]), as the services
//! hold credentials to their clusters. The drain's calls go to it outside the cloud's lock,
//! once per [`ROUND`] while a node drains; its timeouts run on the cluster's own clock
//! (`Store::sim_now`, which `Timekeeping`'s speed drives), as the kubelets' Events do. A node
//! that never registered has nothing to drain and goes at once. Not modelled: EKS's 60
//! seconds between the cordon and the termination, AKS's `Cordon` behaviour (a blocked node
//! kept quarantined).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::account::{Inner, SimCloud, SimGroup};
use super::owner_state::{Drain, DrainRule, OnTimeout};
use crate::eviction::{DeleteOptions, daemon_pod, delete_pod, evict_node};
use crate::store::{ListOptions, ResourceType, Store};
use rota_core::cloud::{GroupRef, Lifecycle};
use rota_core::fleet::owner::{ManagedGroup, Owner};

/// How often a service looks at the nodes it drains, in fleet time.
pub(super) const ROUND: Duration = Duration::from_secs(5);

use rota_core::cloud::managed::EKS_UNSCHEDULABLE_TAINT as EKS_UNSCHEDULABLE;

/// The error a timed-out drain left for `group`'s update, if any (taken once).
pub(super) fn take_failure(group: &mut SimGroup) -> Option<String> {
    group.service.failed.take()
}

/// Whether the service is draining instance `id` of `group`.
pub(super) fn is_draining(group: &SimGroup, id: &str) -> bool {
    group.service.draining.iter().any(|d| d.instance == id)
}

/// Whether the service is draining any node of `group`.
pub(super) fn any_draining(group: &SimGroup) -> bool {
    !group.service.draining.is_empty()
}

/// Whether the service has work on `group`'s nodes: a drain or a taint.
pub(super) fn pending(group: &SimGroup) -> bool {
    !group.service.draining.is_empty() || !group.service.to_taint.is_empty()
}

/// The service starts draining `group`'s instance at `i`; its termination follows the drain.
pub(super) fn begin(group: &mut SimGroup, i: usize, floor: u32, rule: DrainRule) {
    let inst = &group.instances[i].public;
    if is_draining(group, &inst.id) {
        return;
    }
    let d = Drain {
        instance: inst.id.clone(),
        provider_id: inst.provider_id.clone(),
        rule,
        floor,
        started: None,
    };
    group.service.draining.push(d);
}

/// EKS taints the node of `group`'s instance at `i` unschedulable (once).
pub(super) fn taint(group: &mut SimGroup, i: usize) {
    let pid = group.instances[i].public.provider_id.clone();
    if group.service.tainted.insert(pid.clone()) {
        group.service.to_taint.push(pid);
    }
}

/// The key a cluster's API server is known by: the owner and its cluster's name (a twin
/// pool is in its origin's cluster).
fn cluster_key(m: &ManagedGroup) -> (Owner, String) {
    (m.owner(), m.cluster().to_string())
}

/// How one drain stands after a round.
enum Outcome {
    /// Still draining (with when it began).
    Waiting(DateTime<Utc>),
    /// No pod left: the instance goes.
    Drained,
    /// Timed out under [`OnTimeout::Fail`]: the update fails with this error.
    Failed(String),
}

/// A group's drains to run this round, taken under the cloud's lock.
struct Work {
    group: GroupRef,
    /// `None`: the cloud knows no API server for the pool's cluster, so nothing is drained
    /// and its nodes go with their instances.
    store: Option<Store>,
    drains: Vec<Drain>,
    to_taint: Vec<String>,
}

impl SimCloud {
    /// The services reach `pool`'s cluster (and its twins') through `store`: what they
    /// cordon, evict and taint. A cloud that knows no store for a pool drains nothing (its
    /// nodes go with their instances).
    pub fn serve_cluster(&self, pool: &ManagedGroup, store: Store) {
        let mut inner = self.inner.lock().unwrap();
        inner.clusters.insert(cluster_key(pool), store);
    }

    /// One round of every service's drains; returns when the next round is due, if any
    /// drain is left.
    pub(super) fn service_drains(&self, now: Instant) -> Option<Instant> {
        let work = self.drain_work();
        if work.is_empty() {
            return None;
        }
        let mut results = Vec::new();
        for w in &work {
            let Some(store) = &w.store else {
                let all = w
                    .drains
                    .iter()
                    .map(|d| (d.instance.clone(), Outcome::Drained));
                results.push(all.collect());
                continue;
            };
            for pid in &w.to_taint {
                taint_node(store, pid);
            }
            results.push(round(store, &w.drains));
        }
        let mut inner = self.inner.lock().unwrap();
        let mut changed = false;
        for (w, outcomes) in work.iter().zip(results) {
            let Some(mut group) = inner.groups.remove(&w.group) else {
                continue;
            };
            changed |= apply(&mut inner, &mut group, outcomes, now);
            inner.groups.insert(w.group.clone(), group);
        }
        let due = inner
            .groups
            .values()
            .any(pending)
            .then(|| now + inner.scale(ROUND));
        if changed {
            inner.snapshot(now);
        }
        drop(inner);
        if changed {
            self.changed();
        }
        due
    }

    fn drain_work(&self) -> Vec<Work> {
        let mut inner = self.inner.lock().unwrap();
        let inner = &mut *inner;
        let mut work = Vec::new();
        for (r, g) in inner.groups.iter_mut() {
            if g.service.draining.is_empty() && g.service.to_taint.is_empty() {
                continue;
            }
            let store = r
                .managed()
                .and_then(|m| inner.clusters.get(&cluster_key(m)));
            work.push(Work {
                group: r.clone(),
                store: store.cloned(),
                drains: g.service.draining.clone(),
                to_taint: std::mem::take(&mut g.service.to_taint),
            });
        }
        work
    }
}

/// One round of a group's drains against its cluster (outside the cloud's lock).
fn round(store: &Store, drains: &[Drain]) -> Vec<(String, Outcome)> {
    let now = store.sim_now();
    let speed = store.timekeeping().speed();
    let mut out = Vec::new();
    for d in drains {
        let started = d.started.unwrap_or(now);
        let node = node_named(store, &d.provider_id);
        let Some(node) = node else {
            // Never registered, or gone already: nothing to drain.
            out.push((d.instance.clone(), Outcome::Drained));
            continue;
        };
        if d.rule.cordon_first {
            set_cordon(store, &node, true);
        }
        let left = evict_node(store, &node, speed).unwrap_or(usize::MAX);
        let timed_out = (now - started).to_std().unwrap_or_default() >= d.rule.timeout;
        let outcome = match (left, timed_out, d.rule.on_timeout) {
            (0, _, _) => {
                set_cordon(store, &node, true);
                Outcome::Drained
            }
            (_, false, _) => Outcome::Waiting(started),
            (_, true, OnTimeout::Force) => {
                force(store, &node, speed);
                Outcome::Waiting(started)
            }
            (_, true, OnTimeout::Fail) => Outcome::Failed(blocked(store, &node)),
        };
        out.push((d.instance.clone(), outcome));
    }
    // An update that fails leaves its blocked nodes schedulable again (AKS's default
    // `Schedule`; EKS's failed update takes its surge back too).
    if out.iter().any(|(_, o)| matches!(o, Outcome::Failed(_))) {
        for d in drains {
            if let Some(node) = node_named(store, &d.provider_id) {
                release(store, &node);
            }
        }
    }
    out
}

/// Carries a round's outcomes into the group: drained instances terminated, a failure left
/// for the group's owner to fail its update with. True if anything changed.
fn apply(
    inner: &mut Inner,
    group: &mut SimGroup,
    outcomes: Vec<(String, Outcome)>,
    now: Instant,
) -> bool {
    let mut changed = false;
    let mut failed = None;
    for (id, outcome) in outcomes {
        let Some(pos) = group.service.draining.iter().position(|d| d.instance == id) else {
            continue;
        };
        match outcome {
            Outcome::Waiting(at) => group.service.draining[pos].started = Some(at),
            Outcome::Drained => {
                let d = group.service.draining.remove(pos);
                let live = group.instances.iter().position(|i| {
                    i.public.id == d.instance && i.public.lifecycle != Lifecycle::Terminating
                });
                if let Some(i) = live {
                    let mut inst = group.instances[i].clone();
                    inner.begin_termination(group, &mut inst, now);
                    group.instances[i] = inst;
                    group.desired = group.desired.saturating_sub(1).max(d.floor);
                }
                changed = true;
            }
            Outcome::Failed(why) => failed = failed.or(Some(why)),
        }
    }
    if let Some(why) = failed {
        group.service.draining.clear();
        // A later update marks its old nodes afresh.
        group.service.tainted.clear();
        group.service.failed = Some(why);
        changed = true;
    }
    changed
}

/// The name of the node whose providerID is `pid`.
fn node_named(store: &Store, pid: &str) -> Option<String> {
    let (nodes, _) = store
        .list(&ResourceType::nodes(), None, &ListOptions::default())
        .ok()?;
    nodes
        .iter()
        .find(|n| n.pointer("/spec/providerID").and_then(Value::as_str) == Some(pid))
        .and_then(|n| n.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_string)
}

fn set_cordon(store: &Store, node: &str, on: bool) {
    let _ = store.modify(&ResourceType::nodes(), None, node, |n| {
        if on {
            n["spec"]["unschedulable"] = json!(true);
        } else if let Some(spec) = n["spec"].as_object_mut() {
            spec.remove("unschedulable");
        }
        Ok(())
    });
}

fn is_eks_taint(t: &Value) -> bool {
    t["key"] == EKS_UNSCHEDULABLE.0 && t["value"] == EKS_UNSCHEDULABLE.1
}

/// EKS's `eks.amazonaws.com/nodegroup=unschedulable:NoSchedule` on the node of `pid`.
fn taint_node(store: &Store, pid: &str) {
    let Some(node) = node_named(store, pid) else {
        return;
    };
    let _ = store.modify(&ResourceType::nodes(), None, &node, |n| {
        let taint = json!({"key": EKS_UNSCHEDULABLE.0, "value": EKS_UNSCHEDULABLE.1,
                           "effect": "NoSchedule"});
        match n["spec"]["taints"].as_array_mut() {
            Some(ts) if ts.iter().any(is_eks_taint) => {}
            Some(ts) => ts.push(taint),
            None => n["spec"]["taints"] = json!([taint]),
        }
        Ok(())
    });
}

/// A blocked node made schedulable again: uncordoned, EKS's taint removed.
fn release(store: &Store, node: &str) {
    set_cordon(store, node, false);
    let _ = store.modify(&ResourceType::nodes(), None, node, |n| {
        if let Some(ts) = n["spec"]["taints"].as_array_mut() {
            ts.retain(|t| !is_eks_taint(t));
        }
        Ok(())
    });
}

/// The pods left on `node` (not DaemonSets') deleted with their grace period, as GKE does
/// once its hour of respecting budgets is over.
fn force(store: &Store, node: &str, speed: f64) {
    let opts = ListOptions::fields(&format!("spec.nodeName={node}"));
    let Ok((pods, _)) = store.list(&ResourceType::pods(), None, &opts) else {
        return;
    };
    for p in pods.iter().filter(|p| !daemon_pod(p)) {
        let ns = p["metadata"]["namespace"].as_str().unwrap_or("default");
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        let _ = delete_pod(store, ns, name, &DeleteOptions::default(), speed);
    }
}

/// The service's error for a drain that timed out, naming the node and a pod still on it.
fn blocked(store: &Store, node: &str) -> String {
    let opts = ListOptions::fields(&format!("spec.nodeName={node}"));
    let pod = store
        .list(&ResourceType::pods(), None, &opts)
        .ok()
        .and_then(|(pods, _)| {
            pods.into_iter().find(|p| !daemon_pod(p)).map(|p| {
                format!(
                    "{}/{}",
                    p["metadata"]["namespace"].as_str().unwrap_or_default(),
                    p["metadata"]["name"].as_str().unwrap_or_default()
                )
            })
        })
        .unwrap_or_default();
    format!(
        "node {node}: pod {pod} could not be evicted within the drain timeout (Cannot evict pod as it would violate the pod's disruption budget)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::FaultProfile;
    use crate::scenario::{ClusterScenario, PoolScenario, Scenario, WorkloadProfile};
    use crate::world::Fleet;
    use rota_core::cloud::NodeGroups;
    use rota_core::cloud::managed::{MaxUnavailable, OwnerPools, UpdateRequest, UpdateStatus};
    use rota_core::fleet::resolved::Cloud;

    /// One service's pool of one node, the images it goes between and its adapter.
    struct Case {
        pool: ManagedGroup,
        label: &'static str,
        cloud: Cloud,
        old: &'static str,
        new: &'static str,
    }

    fn eks() -> Case {
        Case {
            pool: ManagedGroup::EksNodegroup {
                region: "us-east-1".into(),
                eks_cluster: "c1".into(),
                nodegroup: "general".into(),
            },
            label: "eks.amazonaws.com/nodegroup",
            cloud: Cloud::Aws,
            old: "ami-0000000000000old1",
            new: "ami-0000000000000new2",
        }
    }

    fn gke() -> Case {
        Case {
            pool: ManagedGroup::GkeNodePool {
                project: "acme".into(),
                location: "europe-west1".into(),
                gke_cluster: "c1".into(),
                node_pool: "general".into(),
            },
            label: "cloud.google.com/gke-nodepool",
            cloud: Cloud::Gcp,
            old: "1.31.4-gke.1183000/COS_CONTAINERD",
            new: "1.31.5-gke.1023000/COS_CONTAINERD",
        }
    }

    fn aks() -> Case {
        Case {
            pool: ManagedGroup::AksAgentPool {
                subscription_id: "s".into(),
                resource_group: "rg".into(),
                aks_cluster: "c1".into(),
                agent_pool: "general".into(),
            },
            label: "kubernetes.azure.com/agentpool",
            cloud: Cloud::Azure,
            old: "AKSUbuntu-2204gen2containerd-202610.01.0",
            new: "AKSUbuntu-2204gen2containerd-202611.02.0",
        }
    }

    /// A cluster whose one pool (one node) runs both replicas of `db` under `pdb`.
    async fn fleet(case: &Case, pdb: &str) -> Fleet {
        let workloads = WorkloadProfile::from_yaml(
            &format!(
                "nodes: {{perPool: 1}}\n\
                 deployments:\n  - {{name: db, namespace: shop, replicas: 2, pdb: {pdb}}}\n"
            ),
            "workloads",
        )
        .unwrap();
        let scenario = Scenario {
            clusters: vec![ClusterScenario {
                name: "c1".into(),
                cloud: case.cloud,
                pools: vec![PoolScenario {
                    name: "general".into(),
                    group: GroupRef::Managed(case.pool.clone()),
                    image: case.old.into(),
                    node_selector: [(case.label.to_string(), "general".to_string())].into(),
                    nodes: 1,
                }],
            }],
            workloads,
            faults: FaultProfile::default(),
            seed: 7,
        };
        let fleet = Fleet::start(&scenario, 1.0).await.unwrap();
        fleet.cloud.set_aks_latest_node_image(case.new);
        // Pods Ready, the budget's status current.
        tokio::time::sleep(Duration::from_secs(60)).await;
        fleet
    }

    fn owner(fleet: &Fleet, case: &Case) -> std::sync::Arc<dyn OwnerPools> {
        let owners = fleet.cloud.owners();
        owners
            .into_iter()
            .find(|o| o.owner() == case.pool.owner())
            .expect("the simulated cloud serves every owner")
    }

    async fn start(fleet: &Fleet, case: &Case, drain_timeout_minutes: Option<u32>, force: bool) {
        let req = UpdateRequest {
            image: case.new.into(),
            max_unavailable: MaxUnavailable::Count(1),
            token: "t1".into(),
            drain_timeout_minutes,
            node_soak_minutes: None,
            drain_first: false,
            force,
        };
        owner(fleet, case)
            .start_update(&case.pool, &req)
            .await
            .unwrap();
    }

    /// The pool's first node (on the old image) as the cluster has it, if it is there.
    fn old_node(fleet: &Fleet, old_pid: &str) -> Option<Value> {
        let store = fleet.store("c1").unwrap();
        let (nodes, _) = store
            .list(&ResourceType::nodes(), None, &ListOptions::default())
            .unwrap();
        nodes
            .into_iter()
            .find(|n| n["spec"]["providerID"] == old_pid)
    }

    /// `db`'s pods on `node` that are not going.
    fn db_pods_on(fleet: &Fleet, node: &str) -> usize {
        let store = fleet.store("c1").unwrap();
        let opts = ListOptions::fields(&format!("spec.nodeName={node}"));
        let (pods, _) = store.list(&ResourceType::pods(), None, &opts).unwrap();
        pods.iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .filter(|p| !daemon_pod(p))
            .count()
    }

    /// Kept off the node by its service: cordoned, or (EKS) tainted unschedulable.
    fn kept_off(node: &Value) -> bool {
        node["spec"]["unschedulable"] == true
            || node["spec"]["taints"]
                .as_array()
                .is_some_and(|ts| ts.iter().any(is_eks_taint))
    }

    async fn old_instance(fleet: &Fleet, case: &Case) -> (String, String) {
        let g = NodeGroups::describe(&fleet.cloud, &GroupRef::Managed(case.pool.clone()))
            .await
            .unwrap();
        let i = &g.instances[0];
        (i.id.clone(), i.provider_id.clone())
    }

    async fn live(fleet: &Fleet, case: &Case, id: &str) -> bool {
        let g = NodeGroups::describe(&fleet.cloud, &GroupRef::Managed(case.pool.clone()))
            .await
            .unwrap();
        g.instances
            .iter()
            .any(|i| i.id == id && i.lifecycle != Lifecycle::Terminating)
    }

    /// A budget that allows no disruption holds the old node, cordoned with its pods on it,
    /// for `held` (before the change its instance went as soon as the surge was in
    /// service); what the service does after its timeout is the caller's to check.
    async fn held_by_the_budget(
        case: &Case,
        timeout: Option<u32>,
        force: bool,
        held: Duration,
    ) -> Fleet {
        let fleet = fleet(case, "{minAvailable: 2}").await;
        let (id, pid) = old_instance(&fleet, case).await;
        let name = old_node(&fleet, &pid).unwrap()["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            db_pods_on(&fleet, &name),
            2,
            "both replicas on the one node"
        );
        start(&fleet, case, timeout, force).await;
        let begun = Instant::now();
        while begun.elapsed() < held {
            tokio::time::sleep(Duration::from_secs(10)).await;
            assert!(
                live(&fleet, case, &id).await,
                "{id} went at {:?}",
                begun.elapsed()
            );
            assert_eq!(db_pods_on(&fleet, &name), 2, "at {:?}", begun.elapsed());
        }
        let node = old_node(&fleet, &pid).unwrap();
        assert!(kept_off(&node), "{node}");
        fleet
    }

    /// With a budget that lets one pod go at a time: the node is kept off (cordoned, or
    /// EKS's taint) before its first pod goes, and goes once its pods are gone.
    async fn kept_off_before_its_pods_go(case: &Case) {
        let fleet = fleet(case, "{maxUnavailable: 1}").await;
        let (id, pid) = old_instance(&fleet, case).await;
        let name = old_node(&fleet, &pid).unwrap()["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_string();
        start(&fleet, case, None, false).await;
        let mut first_pod_went = false;
        for _ in 0..1800 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let Some(node) = old_node(&fleet, &pid) else {
                break;
            };
            if db_pods_on(&fleet, &name) < 2 && !first_pod_went {
                first_pod_went = true;
                assert!(
                    kept_off(&node),
                    "a pod went before the node was cordoned: {node}"
                );
            }
        }
        assert!(first_pod_went, "the service drained the node");
        assert!(!live(&fleet, case, &id).await, "the drained node went");
    }

    fn update_of(fleet: &Fleet, case: &Case) -> rota_core::cloud::managed::OwnerUpdate {
        let updates = match case.pool.owner() {
            Owner::EksNodegroup => fleet.cloud.eks_updates(&case.pool),
            Owner::GkeNodePool => fleet.cloud.gke_operations(&case.pool),
            _ => fleet.cloud.aks_upgrades(&case.pool),
        };
        updates.last().cloned().expect("an update")
    }

    #[tokio::test(start_paused = true)]
    async fn eks_holds_a_blocked_node_15_minutes_then_fails_the_update() {
        let case = eks();
        let fleet = held_by_the_budget(&case, None, false, Duration::from_secs(14 * 60)).await;
        tokio::time::sleep(Duration::from_secs(3 * 60)).await;
        let u = update_of(&fleet, &case);
        assert_eq!(u.status, UpdateStatus::Failed, "{u:?}");
        assert!(u.errors[0].starts_with("PodEvictionFailure"), "{u:?}");
        let (_, pid) = old_instance(&fleet, &case).await;
        let node = old_node(&fleet, &pid).unwrap();
        assert!(
            !kept_off(&node),
            "a failed update leaves the node schedulable: {node}"
        );
    }

    /// Ten minutes past a held node's timeout, the service deleted the pods left: its update
    /// is `Successful` with every instance on the new image.
    async fn went_on_to_the_end(fleet: &Fleet, case: &Case) {
        tokio::time::sleep(Duration::from_secs(10 * 60)).await;
        let u = update_of(fleet, case);
        assert_eq!(u.status, UpdateStatus::Successful, "{u:?}");
        let g = NodeGroups::describe(&fleet.cloud, &GroupRef::Managed(case.pool.clone()))
            .await
            .unwrap();
        assert!(g.instances.iter().all(|i| i.image == case.new), "{g:?}");
    }

    /// `drain.onTimeout: force` (EKS `force`): after its 15 minutes EKS deletes the pods a
    /// budget holds and the update goes on to the end.
    #[tokio::test(start_paused = true)]
    async fn a_forced_eks_update_deletes_a_blocked_nodes_pods_after_15_minutes() {
        let case = eks();
        let fleet = held_by_the_budget(&case, None, true, Duration::from_secs(14 * 60)).await;
        went_on_to_the_end(&fleet, &case).await;
    }

    #[tokio::test(start_paused = true)]
    async fn gke_holds_a_blocked_node_an_hour_then_deletes_its_pods() {
        let case = gke();
        let fleet = held_by_the_budget(&case, None, false, Duration::from_secs(59 * 60)).await;
        went_on_to_the_end(&fleet, &case).await;
    }

    #[tokio::test(start_paused = true)]
    async fn aks_holds_a_blocked_node_for_its_drain_timeout_then_fails_the_upgrade() {
        let case = aks();
        let fleet = held_by_the_budget(&case, Some(20), false, Duration::from_secs(19 * 60)).await;
        tokio::time::sleep(Duration::from_secs(3 * 60)).await;
        let u = update_of(&fleet, &case);
        assert_eq!(u.status, UpdateStatus::Failed, "{u:?}");
        assert!(
            u.errors[0].starts_with("UpgradeFailed: Drain node"),
            "{u:?}"
        );
        let (_, pid) = old_instance(&fleet, &case).await;
        let node = old_node(&fleet, &pid).unwrap();
        assert!(!kept_off(&node), "undrainableNodeBehavior Schedule: {node}");
    }

    #[tokio::test(start_paused = true)]
    async fn eks_taints_a_node_before_its_pods_go() {
        kept_off_before_its_pods_go(&eks()).await;
    }

    #[tokio::test(start_paused = true)]
    async fn gke_cordons_a_node_before_its_pods_go() {
        kept_off_before_its_pods_go(&gke()).await;
    }

    #[tokio::test(start_paused = true)]
    async fn aks_cordons_a_node_before_its_pods_go() {
        kept_off_before_its_pods_go(&aks()).await;
    }
}
