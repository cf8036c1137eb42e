//! One simulated cluster alive: its store, its cloud groups, and its controllers (kubelets,
//! scheduler, workload controllers) running on tokio.
//!
//! [`World::load`] puts a scenario's cluster in place as if it had been running for a while:
//! groups with instances in service, Ready nodes, workloads with their pods placed, Running
//! and Ready. [`World::spawn`] then runs the controllers in one task: a loop that waits for
//! watch events, instance changes or the next due timer, hands each to the controllers, then
//! lets them act on everything that changed. One task per cluster keeps the story
//! deterministic under paused time and a seed.
//!
//! Every delay goes through [`Ctx::after`], which divides it by the world's speed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::cloud::{GroupSpec, InstanceObserver, SimCloud};
use super::ctx::{Ctx, Timer};
use super::kubelet::{Kubelets, NodeShape, PoolNodes, pod_running, register};
use super::scenario::{ClusterScenario, Scenario, WorkloadProfile};
use super::scheduler::{NodeView, PodView, Scheduler, Usage, fit};
use super::store::{ApiError, ListOptions, ResourceType, Store, Watch, WatchEvent};
use super::workloads::{
    Workloads, daemonset_object, deployment_objects, pod_from_template, template_hash,
};
use rota_core::cloud::{CloudError, GroupState, Lifecycle};

/// One cluster of a scenario.
pub struct World {
    pub name: String,
    pub store: Store,
    kubelets: Kubelets,
    workloads_profile: WorkloadProfile,
    speed: f64,
}

/// How long debounced status writes wait.
const STATUS_DEBOUNCE: Duration = Duration::from_secs(1);
/// How often a kubelet polls an observer that cannot notify.
const POLL_INTERVAL: Duration = Duration::from_secs(10);

impl World {
    /// A cluster of `scenario` in a fresh store. With `cloud`, its pools' groups are created
    /// there (prebooted); `observer` is how its kubelets see instances (the same cloud, or
    /// any provider). Everything is in place before time starts.
    pub async fn load(
        cluster: &ClusterScenario,
        scenario: &Scenario,
        cloud: Option<&SimCloud>,
        observer: Arc<dyn InstanceObserver>,
        speed: f64,
    ) -> Result<World, LoadError> {
        let store = Store::new();
        store.timekeeping().set_speed(speed);
        let w = &scenario.workloads;
        if let Some(v) = w
            .control_planes
            .get(&cluster.name)
            .and_then(|v| rota_core::fleet::kubernetes::KubeMinor::parse(v))
        {
            store.set_kubernetes_version(v);
        }
        let shape = NodeShape {
            cpu: w.nodes.cpu.clone(),
            memory: w.nodes.memory.clone(),
            pods: w.nodes.pods,
            register_after: w.nodes.register_after.as_duration(),
            ready_after: w.nodes.ready_after.as_duration(),
        };
        let pools: Vec<PoolNodes> = cluster
            .pools
            .iter()
            .map(|p| PoolNodes {
                pool: p.name.clone(),
                group: p.group.clone(),
                labels: p.node_selector.clone(),
            })
            .collect();
        if let Some(cloud) = cloud {
            for p in &cluster.pools {
                let spec = GroupSpec::new(p.group.clone(), p.nodes, p.image.clone()).prebooted();
                cloud.create_group(spec).map_err(LoadError::Cloud)?;
                // The managed services drain their pools' nodes through this cluster's API.
                if let Some(m) = p.group.managed() {
                    cloud.serve_cluster(m, store.clone());
                }
            }
        }
        // Nodes for every instance already in service.
        for pool in &pools {
            let state = observe_retrying(observer.as_ref(), pool).await?;
            for inst in state
                .instances
                .iter()
                .filter(|i| i.lifecycle == Lifecycle::InService)
            {
                register(&store, pool, inst, &shape, true)
                    .map_err(|e| LoadError::Store("node", e))?;
            }
        }
        let karpenter = karpenter_pools(cluster);
        if !karpenter.is_empty() {
            crate::karpenter::install(&store).map_err(|e| LoadError::Store("karpenter CRD", e))?;
            for (m, image) in &karpenter {
                crate::karpenter::create_pool(&store, m, image)
                    .map_err(|e| LoadError::Store("karpenter NodePool", e))?;
            }
        }
        load_workloads(&store, w, cluster.node_count())?;
        let mut kubelets = Kubelets::new(pools, observer, shape);
        kubelets.adopt(&store);
        Ok(World {
            name: cluster.name.clone(),
            store,
            kubelets,
            workloads_profile: w.clone(),
            speed,
        })
    }

    pub fn workloads(&self) -> &WorkloadProfile {
        &self.workloads_profile
    }

    /// Run the cluster's controllers until the returned task is aborted.
    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(self.run())
    }

    /// The controllers' loop, by phase: follow every change, index what exists, then rounds
    /// that handle all that is queued before anything acts, and a wait for the next event.
    async fn run(mut self) {
        let mut c = Controllers::follow(&self.store, &self.kubelets, self.speed);
        self.index_existing(&mut c);
        if c.changes.is_none() {
            c.h.ctx.after(POLL_INTERVAL, Timer::Poll);
        }
        self.kubelets.sync(&mut c.h.ctx).await;
        loop {
            // Everything already queued is handled before anything acts, so that controllers
            // see a consistent picture (and a 150,000-pod start is indexed once).
            while self.round(&mut c).await {}
            self.wait(&mut c).await;
        }
    }

    /// Indexes what exists when the loop starts (the watches follow every change from then
    /// on): lists rather than a watch's initial events, and pods a page at a time, so that a
    /// 150,000-pod cluster is never held twice in memory. Replayed changes are harmless:
    /// every handler is idempotent.
    fn index_existing(&mut self, c: &mut Controllers) {
        let store = &self.store;
        let all = ListOptions::default();
        let existing = |rt: ResourceType, ns: Option<&str>| {
            store
                .list(&rt, ns, &all)
                .map(|(v, _)| v)
                .unwrap_or_default()
        };
        for n in existing(ResourceType::nodes(), None) {
            let ev = WatchEvent::Added(n);
            c.h.scheduler.on_node(&ev);
            c.h.workloads.on_node(&ev);
        }
        for d in existing(ResourceType::deployments(), None) {
            c.h.workloads.on_deployment(&WatchEvent::Added(d));
        }
        for r in existing(ResourceType::replicasets(), None) {
            c.h.workloads.on_replicaset(&WatchEvent::Added(r));
        }
        for d in existing(ResourceType::daemonsets(), None) {
            c.h.workloads.on_daemonset(&WatchEvent::Added(d));
        }
        // Pods a page at a time: one namespace may hold 100,000 of them (9 KiB each parsed).
        let mut after: Option<(String, String)> = None;
        while let Ok(page) = store.list_page(
            &ResourceType::pods(),
            None,
            &all,
            1000,
            after.as_ref().map(|(a, b)| (a.as_str(), b.as_str())),
        ) {
            for p in page.items {
                let ev = WatchEvent::Added(p);
                c.h.scheduler.on_pod(&ev);
                c.h.workloads.on_pod(&ev);
                self.kubelets.on_pod(&mut c.h.ctx, &ev);
            }
            match page.next {
                Some(k) => after = Some(k),
                None => break,
            }
        }
    }

    /// One round: the queued events, the instance changes and the due timers handed to the
    /// controllers, then the controllers act. Whether anything was handled (another round).
    async fn round(&mut self, c: &mut Controllers) -> bool {
        let round = Instant::now();
        // Deletions first, and again every so many pod events: a pod whose grace period is
        // over goes now, however long the queue (`timekeeping`).
        let mut late = self.reap_due();
        let (mut any, sync) = self.drain_queues(c, &mut late);
        let (timers, poll) = self.fire_timers(c, &mut late);
        any |= timers;
        if sync || poll {
            any = true;
            self.kubelets.sync(&mut c.h.ctx).await;
        }
        c.h.workloads.reconcile(&mut c.h.ctx);
        c.h.scheduler.schedule(&self.store);
        if c.h.workloads.status_pending() && !c.h.status_armed {
            c.h.status_armed = true;
            c.h.ctx.after(STATUS_DEBOUNCE, Timer::FlushStatus);
        }
        // What was queued when the round began waited for it: a long round is lag.
        if any {
            late = late.into_iter().chain([round]).min();
        }
        self.keep_time(late);
        any
    }

    /// Hands every queued watch event to its controllers. Returns whether any was queued and
    /// whether the instances changed (the kubelets then sync).
    fn drain_queues(&mut self, c: &mut Controllers, late: &mut Option<Instant>) -> (bool, bool) {
        let mut any = false;
        while let Ok(ev) = c.watches.nodes.try_recv() {
            any = true;
            c.h.on_node(&mut self.kubelets, &ev);
        }
        let mut handled = 0u32;
        while let Ok(ev) = c.watches.pods.try_recv() {
            any = true;
            c.h.on_pod(&mut self.kubelets, &ev);
            handled += 1;
            if handled.is_multiple_of(REAP_EVERY) {
                *late = (*late).into_iter().chain(self.reap_due()).min();
            }
        }
        while let Ok(ev) = c.watches.deployments.try_recv() {
            any = true;
            c.h.workloads.on_deployment(&ev);
        }
        while let Ok(ev) = c.watches.replicasets.try_recv() {
            any = true;
            c.h.workloads.on_replicaset(&ev);
        }
        while let Ok(ev) = c.watches.daemonsets.try_recv() {
            any = true;
            c.h.workloads.on_daemonset(&ev);
        }
        let mut sync = false;
        if let Some(rx) = c.changes.as_mut()
            && rx.has_changed().unwrap_or(false)
        {
            rx.borrow_and_update();
            sync = true;
        }
        (any, sync)
    }

    /// Fires the timers that are due. Returns whether any was, and whether a poll asks the
    /// kubelets to sync.
    fn fire_timers(&mut self, c: &mut Controllers, late: &mut Option<Instant>) -> (bool, bool) {
        let (mut any, mut sync) = (false, false);
        let now = Instant::now();
        while let Some((due, t)) = c.h.ctx.pop_due(now) {
            any = true;
            *late = (*late).into_iter().chain([due]).min();
            match t {
                Timer::FlushStatus => {
                    c.h.status_armed = false;
                    c.h.workloads.flush_status(&self.store);
                }
                Timer::Poll => {
                    sync = true;
                    c.h.ctx.after(POLL_INTERVAL, Timer::Poll);
                }
                t => self.kubelets.on_timer(&mut c.h.ctx, &t),
            }
        }
        (any, sync)
    }

    /// Waits for the next event, instance change or due timer, and hands an event over.
    async fn wait(&mut self, c: &mut Controllers) {
        let next = [c.h.ctx.next_due(), self.store.timekeeping().next_due()]
            .into_iter()
            .flatten()
            .min();
        let changes = &mut c.changes;
        let changed = async {
            match changes.as_mut() {
                Some(rx) => {
                    if rx.changed().await.is_err() {
                        std::future::pending::<()>().await
                    }
                }
                None => std::future::pending().await,
            }
        };
        let due = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            Some(ev) = c.watches.nodes.recv() => c.h.on_node(&mut self.kubelets, &ev),
            Some(ev) = c.watches.pods.recv() => c.h.on_pod(&mut self.kubelets, &ev),
            Some(ev) = c.watches.deployments.recv() => c.h.workloads.on_deployment(&ev),
            Some(ev) = c.watches.replicasets.recv() => c.h.workloads.on_replicaset(&ev),
            Some(ev) = c.watches.daemonsets.recv() => c.h.workloads.on_daemonset(&ev),
            _ = changed => self.kubelets.sync(&mut c.h.ctx).await,
            _ = due => {}
        }
    }
}

/// What [`World::run`] loops over: the watches that feed the controllers, the instances'
/// changes, and the controllers beside the kubelets.
struct Controllers {
    watches: Watches,
    /// The instances' changes, when the observer can notify (else the kubelets poll).
    changes: Option<tokio::sync::watch::Receiver<u64>>,
    h: Handlers,
}

/// The store's changes the controllers follow (lazy watches: a queued event costs its
/// compact form until the loop takes it).
struct Watches {
    nodes: Watch,
    pods: Watch,
    deployments: Watch,
    replicasets: Watch,
    daemonsets: Watch,
}

/// The controllers that handle the events, with their timers.
struct Handlers {
    ctx: Ctx,
    scheduler: Scheduler,
    workloads: Workloads,
    /// A debounced status write is due.
    status_armed: bool,
}

impl Controllers {
    /// Follows every change of the store from now on.
    fn follow(store: &Store, kubelets: &Kubelets, speed: f64) -> Controllers {
        let rv = store.resource_version();
        let all = ListOptions::default();
        let watch = |rt: ResourceType| -> Watch {
            store
                .watch_lazy(&rt, None, &all, Some(&rv))
                .expect("built-in type")
        };
        Controllers {
            watches: Watches {
                nodes: watch(ResourceType::nodes()),
                pods: watch(ResourceType::pods()),
                deployments: watch(ResourceType::deployments()),
                replicasets: watch(ResourceType::replicasets()),
                daemonsets: watch(ResourceType::daemonsets()),
            },
            changes: kubelets.observer().changes(),
            h: Handlers {
                ctx: Ctx::new(store.clone(), speed),
                scheduler: Scheduler::default(),
                workloads: Workloads::default(),
                status_armed: false,
            },
        }
    }
}

impl Handlers {
    fn on_node(&mut self, kubelets: &mut Kubelets, ev: &WatchEvent) {
        self.scheduler.on_node(ev);
        self.workloads.on_node(ev);
        if let WatchEvent::Deleted(n) = ev {
            kubelets.on_node_deleted(&mut self.ctx, n);
        }
    }

    fn on_pod(&mut self, kubelets: &mut Kubelets, ev: &WatchEvent) {
        self.scheduler.on_pod(ev);
        self.workloads.on_pod(ev);
        kubelets.on_pod(&mut self.ctx, ev);
    }
}

impl World {
    /// Removes the pods whose grace period is over; returns when the earliest was due.
    fn reap_due(&self) -> Option<Instant> {
        let due = self.store.timekeeping().take_due(Instant::now());
        self.kubelets.reap(&self.store, &due);
        due.first().map(|d| d.due)
    }

    /// Records how late a round handled what was due at `late` (the lag), warning when the
    /// cluster cannot keep up with its speed.
    fn keep_time(&self, late: Option<Instant>) {
        // A round that handled nothing says nothing: the gauge keeps the last round's.
        if let Some(due) = late
            && let Some(w) = self.store.timekeeping().observe(due, Instant::now())
        {
            tracing::warn!(cluster = %self.name, "{w}");
        }
    }
}

/// While working through a queue of pod events, the world reaps due deletions every this
/// many events (a 2,000-node batch's evictions queue tens of thousands).
const REAP_EVERY: u32 = 1024;

/// The group's state, retrying what a retry may fix (a throttled or failed describe) a few
/// times, so that a provider with injected API faults can still be loaded.
async fn observe_retrying(
    observer: &dyn InstanceObserver,
    pool: &PoolNodes,
) -> Result<GroupState, LoadError> {
    let mut attempt = 0;
    loop {
        match observer.observe(&pool.group).await {
            Ok(s) => return Ok(s),
            Err(e) if e.kind.is_retryable() && attempt < 8 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100 << attempt.min(5))).await;
            }
            Err(e) => return Err(LoadError::Cloud(e)),
        }
    }
}

/// Why a scenario could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cloud: {0}")]
    Cloud(CloudError),
    #[error("creating a {0}: {1}")]
    Store(&'static str, ApiError),
}

/// Namespaces, Deployments with their ReplicaSets, PDBs, DaemonSets, and every pod placed on
/// a node, Running and Ready: the steady state a controller would reach, written directly so
/// that 150,000 pods load in seconds rather than through 150,000 scheduling rounds.
fn load_workloads(store: &Store, w: &WorkloadProfile, node_count: u32) -> Result<(), LoadError> {
    let err = |what| move |e| LoadError::Store(what, e);
    create_namespaces(store, w)?;
    let mut placer = Placer::on_nodes_of(store)?;
    // Daemon pods first: one per node.
    for d in &w.daemon_sets {
        let ds = store
            .create(&ResourceType::daemonsets(), None, daemonset_object(d))
            .map_err(err("daemonset"))?;
        let owner = owner(&ds, "DaemonSet");
        for i in 0..placer.nodes.len() {
            let pod = pod_from_template(
                &ds["spec"]["template"],
                &format!("{}-", d.name),
                &d.namespace,
                owner.clone(),
                None,
            );
            placer.place(store, pod, i).map_err(err("pod"))?;
        }
    }
    // Replicas round robin over the nodes they fit, which spreads them like the scheduler.
    for d in &w.deployments {
        let replicas = Scenario::replicas(d, node_count);
        let (rs, rs_name) = create_deployment(store, d, replicas)?;
        let rs_owner = owner(&rs, "ReplicaSet");
        for _ in 0..replicas {
            let pod = pod_from_template(
                &rs["spec"]["template"],
                &format!("{rs_name}-"),
                &d.namespace,
                rs_owner.clone(),
                None,
            );
            match placer.next_fit(&PodView::from_json(&pod)) {
                Some(i) => placer.place(store, pod, i).map_err(err("pod"))?,
                // No room: it stays Pending for the scheduler, as in a real cluster.
                None => {
                    store
                        .create(&ResourceType::pods(), None, pod)
                        .map_err(err("pod"))?;
                }
            }
        }
    }
    Ok(())
}

/// The namespaces the workloads live in (one already there is fine).
fn create_namespaces(store: &Store, w: &WorkloadProfile) -> Result<(), LoadError> {
    let mut namespaces: Vec<&str> = w
        .deployments
        .iter()
        .map(|d| d.namespace.as_str())
        .chain(w.daemon_sets.iter().map(|d| d.namespace.as_str()))
        .collect();
    namespaces.sort();
    namespaces.dedup();
    for ns in namespaces {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        match store.create(&ResourceType::namespaces(), None, obj) {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(LoadError::Store("namespace", e)),
        }
    }
    Ok(())
}

/// A Deployment with its PodDisruptionBudget and its first ReplicaSet, as the Deployment
/// controller would have made it; returns the ReplicaSet and its name.
fn create_deployment(
    store: &Store,
    d: &crate::scenario::DeploymentProfile,
    replicas: u32,
) -> Result<(Value, String), LoadError> {
    let err = |what| move |e| LoadError::Store(what, e);
    let (deploy, pdb) = deployment_objects(d, replicas);
    let deploy = store
        .create(&ResourceType::deployments(), None, deploy)
        .map_err(err("deployment"))?;
    if let Some(pdb) = pdb {
        store
            .create(&ResourceType::pdbs(), None, pdb)
            .map_err(err("poddisruptionbudget"))?;
    }
    let hash = template_hash(&deploy["spec"]["template"]);
    let mut t = deploy["spec"]["template"].clone();
    t["metadata"]["labels"]["pod-template-hash"] = json!(hash);
    let mut selector = deploy["spec"]["selector"].clone();
    selector["matchLabels"]["pod-template-hash"] = json!(hash);
    let rs_name = format!("{}-{hash}", d.name);
    let rs = store
        .create(
            &ResourceType::replicasets(),
            None,
            json!({
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": rs_name, "namespace": d.namespace,
                    "labels": t["metadata"]["labels"],
                    "ownerReferences": [owner(&deploy, "Deployment")],
                    "annotations": {"deployment.kubernetes.io/revision": "1"},
                },
                "spec": {"replicas": replicas, "selector": selector, "template": t},
            }),
        )
        .map_err(err("replicaset"))?;
    Ok((rs, rs_name))
}

/// Places the loaded pods on the nodes as if they had been running: each node's usage,
/// a pod IP each, and the round-robin cursor of the replicas.
struct Placer {
    nodes: Vec<(NodeView, Usage)>,
    now: String,
    ip: u32,
    cursor: usize,
}

impl Placer {
    fn on_nodes_of(store: &Store) -> Result<Placer, LoadError> {
        let (node_objs, _) = store
            .list(&ResourceType::nodes(), None, &ListOptions::default())
            .map_err(|e| LoadError::Store("node list", e))?;
        Ok(Placer {
            nodes: node_objs
                .iter()
                .map(|n| (NodeView::from_json(n), Usage::default()))
                .collect(),
            now: store.timestamp(),
            ip: 1 << 20,
            cursor: 0,
        })
    }

    /// The next node from the cursor that `demand` fits on (the cursor moves past it).
    fn next_fit(&mut self, demand: &PodView) -> Option<usize> {
        let n = self.nodes.len();
        let found = (0..n)
            .map(|i| (self.cursor + i) % n)
            .find(|&i| fit(&self.nodes[i].0, &self.nodes[i].1, demand).is_ok())?;
        self.cursor = found + 1;
        Some(found)
    }

    /// `pod` created Running on node `node`.
    fn place(&mut self, store: &Store, mut pod: Value, node: usize) -> Result<(), ApiError> {
        let demand = PodView::from_json(&pod);
        self.nodes[node].1.add(&demand);
        let name = self.nodes[node].0.name.clone();
        pod["spec"]["nodeName"] = json!(name);
        self.ip += 1;
        let ip = self.ip;
        let pod_ip = format!(
            "100.{}.{}.{}",
            64 + (ip >> 16) % 64,
            (ip >> 8) & 0xff,
            ip & 0xff
        );
        pod_running(&mut pod, &name, &pod_ip, &self.now, true);
        store.create(&ResourceType::pods(), None, pod).map(|_| ())
    }
}

fn owner(obj: &Value, kind: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// The cluster's Karpenter pools and the AMI each starts on.
fn karpenter_pools(
    cluster: &ClusterScenario,
) -> Vec<(rota_core::fleet::owner::ManagedGroup, String)> {
    cluster
        .pools
        .iter()
        .filter_map(|p| match &p.group {
            rota_core::cloud::GroupRef::Managed(
                m @ rota_core::fleet::owner::ManagedGroup::KarpenterNodePool { .. },
            ) => Some((m.clone(), p.image.clone())),
            _ => None,
        })
        .collect()
}

/// Every cluster of a scenario, each with its own store, all clouds in one [`SimCloud`].
pub struct Fleet {
    pub cloud: SimCloud,
    pub clusters: BTreeMap<String, Store>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Fleet {
    /// Load every cluster of `scenario` and start the cloud and all controllers.
    pub async fn start(scenario: &Scenario, speed: f64) -> Result<Fleet, LoadError> {
        let cloud = SimCloud::new(scenario.seed, scenario.faults.clone(), speed);
        let mut clusters = BTreeMap::new();
        let mut tasks = vec![cloud.spawn()];
        for c in &scenario.clusters {
            let world = World::load(c, scenario, Some(&cloud), cloud.observer(), speed).await?;
            clusters.insert(c.name.clone(), world.store.clone());
            // The disruption controller keeps PDB statuses current (the API side's).
            tasks.push(super::pdb::spawn_controller(world.store.clone()));
            let karpenter: Vec<_> = karpenter_pools(c).into_iter().map(|(m, _)| m).collect();
            if !karpenter.is_empty() {
                tasks.push(super::karpenter::spawn_controller(
                    world.store.clone(),
                    cloud.clone(),
                    karpenter,
                    speed,
                ));
            }
            tasks.push(world.spawn());
        }
        Ok(Fleet {
            cloud,
            clusters,
            tasks,
        })
    }

    pub fn store(&self, cluster: &str) -> Option<&Store> {
        self.clusters.get(cluster)
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}
