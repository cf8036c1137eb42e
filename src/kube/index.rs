//! The cluster index: one watch-fed, trimmed copy of what rota reads from a cluster (nodes,
//! pods, PodDisruptionBudgets and, once a gate asks, a bounded window of events).
//!
//! Watches feed it; readers take a synchronous snapshot of it (`observe::pool_nodes`, the
//! gates' inputs). Objects are trimmed as they arrive ([`NodeSummary`], [`PodSummary`],
//! [`PdbSummary`], [`EventRecord`]): 150,000 full Pod objects would cost gigabytes, their
//! summaries a few tens of megabytes (the costs are in `docs/architecture.md`).
//!
//! Safety: a kind whose watch has not listed everything yet, or whose watch failed and has
//! not relisted since, is *not observed* ([`NotObserved`]); it never reads as an empty
//! cluster (which would look like a pool of drained nodes). A failed watch is dropped and
//! started afresh (a full, paged relist) rather than resumed, so "synced" always means "a
//! complete list plus every event since".
//!
//! Changes that may concern a pool (a node's summary changed, a pod on a node changed, a
//! PDB changed) are coalesced into a [`Changes`] set the controller waits on; a change that
//! leaves the summary as it was (a node's heartbeat, a pod's status timestamps) is not one.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::Api;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

use super::node_projection::NodeProjection;
use super::pods::PodsByNode;
use super::projection::PodProjection;
use super::summary::{
    EventRecord, Interner, NodeSummary, PRUNE_EVERY, PdbSummary, PodSummary, PodTally,
};

/// Events older than this (behind the newest one seen) are dropped: no events gate window
/// may look further back (`docs/fleet-repo` caps gate windows well below it).
pub const EVENT_HORIZON: chrono::Duration = chrono::Duration::hours(6);
/// At most this many events are kept; past it the oldest go first.
pub const MAX_EVENTS: usize = 20_000;

/// A kind of object the index holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Nodes,
    Pods,
    PodDisruptionBudgets,
    Events,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Nodes => "nodes",
            Kind::Pods => "pods",
            Kind::PodDisruptionBudgets => "poddisruptionbudgets",
            Kind::Events => "events",
        }
    }
}

/// Why the index cannot answer for a kind.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotObserved {
    #[error("{} not observed yet: the watch has not listed them", .0.as_str())]
    NotSynced(Kind),
    #[error("{} not observed: their watch failed ({why}) and has not relisted yet", kind.as_str())]
    WatchFailing {
        kind: Kind,
        why: String,
        /// The API server's HTTP status, when it answered one (403: RBAC, never heals).
        code: Option<u16>,
    },
}

/// Where the watch of one kind stands.
#[derive(Clone, Debug, PartialEq, Eq)]
enum WatchState {
    /// Listing (first time, or again after a failure that followed a sync).
    Listing,
    Synced,
    Failing(String, Option<u16>),
}

pub use super::pods::PodKey;

/// The index's contents. Readers get it through [`ClusterIndex::read`].
#[derive(Debug)]
pub struct State {
    sync: HashMap<Kind, WatchState>,
    nodes: HashMap<Arc<str>, NodeSummary>,
    /// Kept under their nodes (`kube::pods` says why).
    pods: PodsByNode,
    pdbs: BTreeMap<(String, String), PdbSummary>,
    events: HashMap<(String, String), EventRecord>,
    interner: Interner,
    /// Node and pod deletions since the interner was last pruned.
    deleted: u32,
}

impl Default for State {
    fn default() -> Self {
        State {
            sync: [
                Kind::Nodes,
                Kind::Pods,
                Kind::PodDisruptionBudgets,
                Kind::Events,
            ]
            .into_iter()
            .map(|k| (k, WatchState::Listing))
            .collect(),
            nodes: HashMap::new(),
            pods: PodsByNode::default(),
            pdbs: BTreeMap::new(),
            events: HashMap::new(),
            interner: Interner::default(),
            deleted: 0,
        }
    }
}

/// The HTTP status of a failed list or watch, when the API server answered one.
fn status_code(e: &kube::runtime::watcher::Error) -> Option<u16> {
    use kube::runtime::watcher::Error as W;
    match e {
        W::InitialListFailed(k) | W::WatchStartFailed(k) | W::WatchFailed(k) => match k {
            kube::Error::Api(s) => Some(s.code),
            _ => None,
        },
        W::WatchError(s) => Some(s.code),
        _ => None,
    }
}

impl State {
    /// `Ok` when nodes, pods and PDBs are all observed: what a pool's read needs.
    pub fn observed(&self) -> Result<(), NotObserved> {
        self.ready(Kind::Nodes)?;
        self.ready(Kind::Pods)?;
        self.ready(Kind::PodDisruptionBudgets)
    }

    /// `Ok` when `kind` is observed (listed, and its watch healthy).
    pub fn ready(&self, kind: Kind) -> Result<(), NotObserved> {
        match self.sync.get(&kind) {
            Some(WatchState::Synced) => Ok(()),
            Some(WatchState::Failing(why, code)) => Err(NotObserved::WatchFailing {
                kind,
                why: why.clone(),
                code: *code,
            }),
            _ => Err(NotObserved::NotSynced(kind)),
        }
    }

    /// The nodes a selector picks, each with its pods (pure read).
    pub fn nodes_matching<'a>(
        &'a self,
        selector: &'a BTreeMap<String, String>,
    ) -> impl Iterator<Item = (&'a NodeSummary, Vec<(&'a PodKey, &'a PodSummary)>)> + 'a {
        self.nodes
            .values()
            .filter(|n| n.labels.matches(selector))
            .map(|n| (n, self.pods_on(&n.name)))
    }

    /// The pods bound to a node.
    pub fn pods_on(&self, node: &str) -> Vec<(&PodKey, &PodSummary)> {
        self.pods.on(node).collect()
    }

    /// Every node of the cluster (trimmed).
    pub fn all_nodes(&self) -> impl Iterator<Item = &NodeSummary> {
        self.nodes.values()
    }

    pub fn pdbs(&self) -> impl Iterator<Item = &PdbSummary> {
        self.pdbs.values()
    }

    pub fn node(&self, name: &str) -> Option<&NodeSummary> {
        self.nodes.get(name)
    }

    /// Every pod's health counted per namespace, as the pods gate judges it.
    pub fn pod_tally(&self) -> Result<PodTally, NotObserved> {
        self.ready(Kind::Pods)?;
        let mut tally = PodTally::default();
        for ((ns, _), p) in self.pods.iter() {
            tally.add(ns, p.ready, p.pending());
        }
        Ok(tally)
    }

    /// The events of the window the index keeps.
    pub fn events(&self) -> Result<Vec<EventRecord>, NotObserved> {
        self.ready(Kind::Events)?;
        Ok(self.events.values().cloned().collect())
    }

    /// Counts, for sizing and tests.
    pub fn len(&self, kind: Kind) -> usize {
        match kind {
            Kind::Nodes => self.nodes.len(),
            Kind::Pods => self.pods.len(),
            Kind::PodDisruptionBudgets => self.pdbs.len(),
            Kind::Events => self.events.len(),
        }
    }

    fn set_sync(&mut self, kind: Kind, s: WatchState) {
        self.sync.insert(kind, s);
    }

    // --- updates, one per kind (pure functions of the state and the object) ---

    /// Returns whether the summary changed.
    pub fn apply_node(&mut self, node: &NodeProjection) -> Option<Change> {
        let s = NodeSummary::from_node(node, &mut self.interner);
        let name = self.interner.str(&s.name);
        if self.nodes.get(&name) == Some(&s) {
            return None;
        }
        self.nodes.insert(name.clone(), s);
        Some(Change::Node(name))
    }

    pub fn delete_node(&mut self, node: &NodeProjection) -> Option<Change> {
        let name = node.metadata.name.as_deref()?;
        let (name, _) = self.nodes.remove_entry(name)?;
        self.deleted_one();
        Some(Change::Node(name))
    }

    pub fn apply_pod(&mut self, pod: &PodProjection) -> Option<Change> {
        let key = self.pod_key(pod)?;
        let s = PodSummary::from_pod(pod, &mut self.interner);
        self.pods.upsert(key, s).map(Change::Pod)
    }

    pub fn delete_pod(&mut self, pod: &PodProjection) -> Option<Change> {
        let key = self.pod_key(pod)?;
        let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        let change = self.pods.remove(&key, node).map(Change::Pod);
        self.deleted_one();
        change
    }

    /// Counts a deletion; every [`PRUNE_EVERY`] of them the interner forgets what no object
    /// holds any more (a rotation replaces every node: new names, new hostnames).
    fn deleted_one(&mut self) {
        self.deleted += 1;
        if self.deleted >= PRUNE_EVERY {
            self.deleted = 0;
            self.interner.prune();
        }
    }

    fn pod_key(&mut self, pod: &PodProjection) -> Option<PodKey> {
        let name = pod.metadata.name.as_deref()?;
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        Some((self.interner.str(ns), Arc::from(name)))
    }

    pub fn apply_pdb(&mut self, pdb: &PodDisruptionBudget) -> Option<Change> {
        let s = PdbSummary::from_pdb(pdb);
        let key = (s.namespace.to_string(), s.name.to_string());
        if self.pdbs.get(&key) == Some(&s) {
            return None;
        }
        self.pdbs.insert(key.clone(), s);
        Some(Change::Pdb(key.0, key.1))
    }

    pub fn delete_pdb(&mut self, pdb: &PodDisruptionBudget) -> Option<Change> {
        let key = (
            pdb.metadata.namespace.clone().unwrap_or_default(),
            pdb.metadata.name.clone().unwrap_or_default(),
        );
        self.pdbs
            .remove(&key)
            .map(|_| Change::Pdb(key.0.clone(), key.1.clone()))
    }

    /// Events only feed the events gate, which samples on its own interval: no change.
    pub fn apply_event(&mut self, e: &CoreEvent) -> Option<Change> {
        let rec = event_record(e)?;
        let key = (
            e.metadata.namespace.clone().unwrap_or_default(),
            e.metadata.name.clone().unwrap_or_default(),
        );
        self.events.insert(key, rec);
        self.trim_events();
        None
    }

    pub fn delete_event(&mut self, e: &CoreEvent) -> Option<Change> {
        let key = (
            e.metadata.namespace.clone().unwrap_or_default(),
            e.metadata.name.clone().unwrap_or_default(),
        );
        self.events.remove(&key);
        None
    }

    /// Keep the window bounded: drop what is older than [`EVENT_HORIZON`] behind the newest
    /// event, then the oldest beyond [`MAX_EVENTS`] (down to 3/4 of it, so trimming is rare).
    fn trim_events(&mut self) {
        if self.events.len() <= MAX_EVENTS {
            return;
        }
        let newest = self.events.values().map(|e| e.last_seen).max();
        if let Some(newest) = newest {
            self.events
                .retain(|_, e| newest - e.last_seen <= EVENT_HORIZON);
        }
        if self.events.len() > MAX_EVENTS {
            let mut times: Vec<_> = self.events.values().map(|e| e.last_seen).collect();
            times.sort_unstable();
            let cut = times[times.len() - MAX_EVENTS * 3 / 4];
            self.events.retain(|_, e| e.last_seen >= cut);
        }
    }

    /// Start over for a kind (a watch restarted its list): everything of it is forgotten.
    fn clear(&mut self, kind: Kind) {
        match kind {
            Kind::Nodes => self.nodes.clear(),
            Kind::Pods => self.pods = PodsByNode::default(),
            Kind::PodDisruptionBudgets => self.pdbs.clear(),
            Kind::Events => self.events.clear(),
        }
    }
}

/// An event as the events gate needs it; `None` without a timestamp.
pub fn event_record(e: &CoreEvent) -> Option<EventRecord> {
    let t = e
        .last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| e.event_time.as_ref().map(|t| t.0))?;
    Some(EventRecord {
        reason: e.reason.clone().unwrap_or_default(),
        last_seen: chrono::DateTime::from_timestamp(t.as_second(), 0)?,
        count: e.count.map_or(1, |c| c.max(1) as u32),
    })
}

/// Something that may concern a pool.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Change {
    /// A node's summary changed (or it came or went).
    Node(Arc<str>),
    /// A pod changed; the node it is (or was) bound to.
    Pod(Option<Arc<str>>),
    /// A PodDisruptionBudget (namespace, name) changed.
    Pdb(String, String),
    /// A whole kind was relisted (after a failed watch): everything may have changed.
    Relisted(Kind),
}

/// The changes since the controller last looked, coalesced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Nodes whose summary changed (or that came or went).
    pub nodes: HashSet<Arc<str>>,
    /// Nodes a pod on which changed.
    pub pods_on: HashSet<Arc<str>>,
    pub pdbs: HashSet<(String, String)>,
    /// Something was relisted: every pool should look again.
    pub all: bool,
}

impl Changes {
    fn add(&mut self, c: Change) {
        match c {
            Change::Node(n) => {
                self.nodes.insert(n);
            }
            Change::Pod(Some(n)) => {
                self.pods_on.insert(n);
            }
            Change::Pod(None) => {}
            Change::Pdb(ns, name) => {
                self.pdbs.insert((ns, name));
            }
            Change::Relisted(_) => self.all = true,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.pods_on.is_empty() && self.pdbs.is_empty() && !self.all
    }
}

struct Shared {
    state: RwLock<State>,
    changes: Mutex<Changes>,
    changed: Notify,
}

impl Shared {
    fn update(&self, f: impl FnOnce(&mut State) -> Option<Change>) {
        let c = {
            let mut s = self.state.write().unwrap_or_else(|p| p.into_inner());
            f(&mut s)
        };
        if let Some(c) = c {
            self.changes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .add(c);
            self.changed.notify_one();
        }
    }
}

/// The index of one cluster and the watches that feed it (stopped when it is dropped).
pub struct ClusterIndex {
    shared: Arc<Shared>,
    client: kube::Client,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    events_started: std::sync::atomic::AtomicBool,
}

impl Drop for ClusterIndex {
    fn drop(&mut self) {
        for t in self.tasks.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            t.abort();
        }
    }
}

impl ClusterIndex {
    /// Start watching nodes, pods and PDBs. Events are watched only once a gate asks for
    /// them ([`ClusterIndex::want_events`]).
    pub fn start(client: kube::Client) -> ClusterIndex {
        let shared = Arc::new(Shared {
            state: RwLock::new(State::default()),
            changes: Mutex::new(Changes::default()),
            changed: Notify::new(),
        });
        let tasks = vec![
            // Nodes and pods decoded as far as the index reads them (`node_projection`,
            // `projection`).
            tokio::spawn(feed::<NodeProjection>(
                Api::all(client.clone()),
                Kind::Nodes,
                shared.clone(),
                State::apply_node,
                State::delete_node,
            )),
            tokio::spawn(feed::<PodProjection>(
                Api::all(client.clone()),
                Kind::Pods,
                shared.clone(),
                State::apply_pod,
                State::delete_pod,
            )),
            tokio::spawn(feed::<PodDisruptionBudget>(
                Api::all(client.clone()),
                Kind::PodDisruptionBudgets,
                shared.clone(),
                State::apply_pdb,
                State::delete_pdb,
            )),
        ];
        ClusterIndex {
            shared,
            client,
            tasks: Mutex::new(tasks),
            events_started: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Start the events watch (idempotent): only an events gate needs it, and a cluster's
    /// events are many.
    pub fn want_events(&self) {
        use std::sync::atomic::Ordering;
        if self.events_started.swap(true, Ordering::Relaxed) {
            return;
        }
        let t = tokio::spawn(feed::<CoreEvent>(
            Api::all(self.client.clone()),
            Kind::Events,
            self.shared.clone(),
            State::apply_event,
            State::delete_event,
        ));
        self.tasks.lock().unwrap_or_else(|p| p.into_inner()).push(t);
    }

    /// A read of the index (hold it briefly: watches wait while it is held).
    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.shared.state.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait until something changed, and take what did.
    pub async fn changed(&self) -> Changes {
        loop {
            let notified = self.shared.changed.notified();
            let c = std::mem::take(
                &mut *self
                    .shared
                    .changes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()),
            );
            if !c.is_empty() {
                return c;
            }
            notified.await;
        }
    }

    /// Whether nodes, pods and PDBs are observed now.
    pub fn is_synced(&self) -> bool {
        let s = self.read();
        [Kind::Nodes, Kind::Pods, Kind::PodDisruptionBudgets]
            .iter()
            .all(|k| s.ready(*k).is_ok())
    }

    /// Wait until nodes, pods and PDBs are observed (tests and tools; the controller never
    /// waits, it plans nothing for a pool while they are not).
    pub async fn synced(&self) {
        loop {
            let notified = self.shared.changed.notified();
            if self.is_synced() {
                return;
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {}
            }
        }
    }
}

/// Feed one kind into the index, forever: list (paged) and watch; on any failure mark the
/// kind failing, back off and start over with a fresh list.
async fn feed<K>(
    api: Api<K>,
    kind: Kind,
    shared: Arc<Shared>,
    apply: fn(&mut State, &K) -> Option<Change>,
    delete: fn(&mut State, &K) -> Option<Change>,
) where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let mut backoff = std::time::Duration::from_millis(500);
    loop {
        let stream = watcher(api.clone(), watcher::Config::default());
        tokio::pin!(stream);
        // A list under way is built aside and swapped in whole at its end, so readers
        // never see half a list.
        let mut relist: Option<State> = None;
        let mut failed = None;
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Init) => relist = Some(State::default()),
                Ok(watcher::Event::InitApply(o)) => {
                    if let Some(r) = relist.as_mut() {
                        // Share the live interner's strings by building into the state.
                        let _ = apply(r, &o);
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    let fresh = relist.take().unwrap_or_default();
                    shared.update(|s| {
                        s.clear(kind);
                        adopt(s, fresh, kind);
                        s.set_sync(kind, WatchState::Synced);
                        Some(Change::Relisted(kind))
                    });
                    backoff = std::time::Duration::from_millis(500);
                }
                Ok(watcher::Event::Apply(o)) => shared.update(|s| apply(s, &o)),
                Ok(watcher::Event::Delete(o)) => shared.update(|s| delete(s, &o)),
                Err(e) => {
                    failed = Some((e.to_string(), status_code(&e)));
                    break;
                }
            }
        }
        let (why, code) = failed.unwrap_or_else(|| ("the watch ended".into(), None));
        tracing::warn!(kind = kind.as_str(), error = %why, "watch failed; relisting");
        shared.update(|s| {
            s.set_sync(kind, WatchState::Failing(why, code));
            None
        });
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(std::time::Duration::from_secs(30));
    }
}

/// Move one kind's freshly listed contents into the live state.
fn adopt(s: &mut State, fresh: State, kind: Kind) {
    match kind {
        Kind::Nodes => s.nodes = fresh.nodes,
        Kind::Pods => s.pods = fresh.pods,
        Kind::PodDisruptionBudgets => s.pdbs = fresh.pdbs,
        Kind::Events => s.events = fresh.events,
    }
    // The fresh list interned its own strings; keep both sets (they are shared by value),
    // less what the objects it replaced alone held.
    s.interner.absorb(fresh.interner);
    s.interner.prune();
}

impl rota_core::errors::Classify for NotObserved {
    /// Not listed yet: transient. A watch the API server refuses (403, 401) needs RBAC and
    /// never heals by retrying: stalled, as any observe call with that answer.
    fn classify(&self) -> rota_core::errors::Classified {
        match self {
            NotObserved::NotSynced(_) => rota_core::errors::Classified::new(
                rota_core::errors::Class::Transient,
                "NotObserved",
            ),
            NotObserved::WatchFailing {
                code: Some(code), ..
            } => rota_core::errors::kube_status(*code, rota_core::errors::KubeCall::Observe),
            NotObserved::WatchFailing { code: None, .. } => rota_core::errors::Classified::new(
                rota_core::errors::Class::Transient,
                "WatchFailing",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::observe::pool_nodes;
    use serde_json::json;

    fn node(name: &str, pool: &str, heartbeat: &str) -> NodeProjection {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"pool": pool}},
            "spec": {"providerID": format!("aws:///us-east-1a/{name}")},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                                       "lastHeartbeatTime": heartbeat}]}
        }))
        .unwrap()
    }

    fn pod(name: &str, node: Option<&str>) -> PodProjection {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "app", "labels": {"app": "web"}},
            "spec": {"containers": [], "nodeName": node},
            "status": {"phase": "Running"}
        }))
        .unwrap()
    }

    fn selector() -> BTreeMap<String, String> {
        [("pool".to_string(), "general".to_string())].into()
    }

    fn synced() -> State {
        let mut s = State::default();
        for k in [Kind::Nodes, Kind::Pods, Kind::PodDisruptionBudgets] {
            s.set_sync(k, WatchState::Synced);
        }
        s
    }

    #[test]
    fn an_index_that_has_not_listed_is_not_an_empty_cluster() {
        // Nothing listed yet: not observed, never "a pool with no nodes".
        let s = State::default();
        assert_eq!(
            pool_nodes(&s, &selector()),
            Err(NotObserved::NotSynced(Kind::Nodes))
        );
        // Nodes and PDBs listed but not pods: a node would look drained. Not observed.
        let mut s = State::default();
        s.set_sync(Kind::Nodes, WatchState::Synced);
        s.set_sync(Kind::PodDisruptionBudgets, WatchState::Synced);
        s.apply_node(&node("n1", "general", "2026-11-24T00:00:01Z"));
        assert_eq!(
            pool_nodes(&s, &selector()),
            Err(NotObserved::NotSynced(Kind::Pods))
        );
        assert!(s.pod_tally().is_err());
        // Listed, then the pods watch failed: not observed until it has relisted.
        s.set_sync(Kind::Pods, WatchState::Synced);
        assert_eq!(pool_nodes(&s, &selector()).unwrap().len(), 1);
        s.set_sync(
            Kind::Pods,
            WatchState::Failing("connection reset".into(), None),
        );
        assert!(matches!(
            pool_nodes(&s, &selector()),
            Err(NotObserved::WatchFailing {
                kind: Kind::Pods,
                ..
            })
        ));
        // A synced, genuinely empty cluster is an empty pool.
        assert_eq!(pool_nodes(&synced(), &selector()), Ok(vec![]));
    }

    #[test]
    fn pods_follow_their_node_and_leave_with_their_deletion() {
        let mut s = synced();
        assert_eq!(
            s.apply_node(&node("n1", "general", "2026-11-24T00:00:01Z")),
            Some(Change::Node("n1".into()))
        );
        // A heartbeat changes nothing rota reads: no change, nobody is woken.
        assert_eq!(
            s.apply_node(&node("n1", "general", "2026-11-24T00:00:02Z")),
            None
        );
        s.apply_node(&node("n2", "other", "2026-11-24T00:00:01Z"));
        assert_eq!(s.apply_pod(&pod("web-1", None)), Some(Change::Pod(None)));
        assert_eq!(
            s.apply_pod(&pod("web-1", Some("n1"))),
            Some(Change::Pod(Some("n1".into())))
        );
        s.apply_pod(&pod("web-2", Some("n2")));
        let nodes = pool_nodes(&s, &selector()).unwrap();
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].pods.len(), 1);
        assert_eq!(&*nodes[0].pods[0].name, "web-1");
        assert_eq!(
            s.delete_pod(&pod("web-1", Some("n1"))),
            Some(Change::Pod(Some("n1".into())))
        );
        assert!(pool_nodes(&s, &selector()).unwrap()[0].pods.is_empty());
        assert_eq!(s.len(Kind::Pods), 1);
        // Both pods share one label set.
        assert_eq!(s.interner.label_sets(), 1);
    }

    #[test]
    fn nodes_replaced_by_a_rotation_leave_nothing_behind_in_the_interner() {
        // A rotation replaces every node (new names, new hostnames): after the old ones are
        // deleted, the interner holds what the new ones need, not both generations.
        let mut s = synced();
        let labelled = |name: &str| -> NodeProjection {
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {
                    "pool": "general", "kubernetes.io/hostname": name,
                    "topology.kubernetes.io/zone": "us-east-1a"}},
                "spec": {"providerID": format!("aws:///us-east-1a/{name}")}
            }))
            .unwrap()
        };
        let generation = |g: u32| (0..PRUNE_EVERY).map(move |i| format!("g{g}-n{i}"));
        for n in generation(0) {
            s.apply_node(&labelled(&n));
        }
        let one_generation = s.interner.len();
        for g in 1..4 {
            for (new, old) in generation(g).zip(generation(g - 1)) {
                s.apply_node(&labelled(&new));
                s.delete_node(&labelled(&old));
            }
        }
        assert_eq!(s.len(Kind::Nodes), PRUNE_EVERY as usize);
        // Pruned as the deletions came: at most one generation's leftovers between prunes.
        assert!(
            s.interner.len() <= 2 * one_generation,
            "{} entries kept for {} nodes ({one_generation} for one generation)",
            s.interner.len(),
            s.len(Kind::Nodes)
        );
        // What the nodes hold is still theirs, and shared: the zone is one string.
        let zones: HashSet<*const u8> = s
            .all_nodes()
            .map(|n| {
                let (_, z) = n
                    .labels
                    .iter()
                    .find(|(k, _)| *k == "topology.kubernetes.io/zone")
                    .unwrap();
                z.as_ptr()
            })
            .collect();
        assert_eq!(zones.len(), 1);
        assert_eq!(
            s.node("g3-n7")
                .unwrap()
                .labels
                .get("kubernetes.io/hostname"),
            Some(&"g3-n7".to_string())
        );
    }

    #[test]
    fn the_events_window_stays_bounded() {
        let mut s = State::default();
        for i in 0..(MAX_EVENTS + 10) {
            let e: CoreEvent = serde_json::from_value(json!({
                "metadata": {"name": format!("e{i}"), "namespace": "app"},
                "involvedObject": {},
                "reason": "BackOff",
                "lastTimestamp": chrono::DateTime::from_timestamp(1_790_000_000 + i as i64, 0)
                    .unwrap().to_rfc3339(),
            }))
            .unwrap();
            s.apply_event(&e);
        }
        assert!(s.len(Kind::Events) <= MAX_EVENTS);
        // The newest are the ones kept.
        assert!(
            s.events
                .contains_key(&("app".into(), format!("e{}", MAX_EVENTS + 9)))
        );
        assert!(!s.events.contains_key(&("app".into(), "e0".into())));
    }
}
