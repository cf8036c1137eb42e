//! The object store of one simulated cluster: what etcd plus the generic registry are to a real
//! API server. Objects are `serde_json::Value`s in their Kubernetes JSON form, so every kind,
//! custom resources included, is stored the same way.
//!
//! What it keeps faithful, because rota and kubectl depend on it:
//! - one cluster-wide, strictly increasing `resourceVersion`; a write that changes nothing does
//!   not bump it; `update` with a stale `resourceVersion` is a 409 Conflict;
//! - `generation` moves only when something outside `metadata` and `status` changes;
//! - watches see every change after the version they start from, in order, with the
//!   ADDED/MODIFIED/DELETED translation a selector implies (an object that stops matching is
//!   DELETED for that watcher); starting before the retained history is a 410 Gone;
//! - finalizers hold a deleted object (with `deletionTimestamp`) until they are emptied;
//!   deleting a namespace deletes what is in it;
//! - creating a CustomResourceDefinition registers its resource, deleting it drops it.
//!
//! Scale (5,000 nodes and 150,000 pods is the target): objects rest as compact JSON text with
//! their labels and node beside it (a `Value` tree costs ~9 KiB per pod, the text ~1.5 KiB);
//! pods are indexed by `spec.nodeName`, so `fieldSelector=spec.nodeName=X` scans nothing; and
//! results are parsed after the lock is released.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::events;
use super::selector::{FieldSelector, LabelSelector};

/// How many changes per resource type a watch can resume from; older starts get 410 Gone,
/// as after an etcd compaction.
const HISTORY_PER_TYPE: usize = 10_000;

/// Which resource, as discovery names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResourceType {
    /// API group, "" for the core group.
    pub group: String,
    pub version: String,
    /// Lower-case plural, the path segment (`pods`).
    pub plural: String,
    pub kind: String,
    pub namespaced: bool,
    /// Whether the resource has a `/status` subresource: then updates of the main resource
    /// leave `.status` alone and `/status` updates change nothing else.
    pub status: bool,
    pub short_names: Vec<String>,
}

impl ResourceType {
    fn new(
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
        status: bool,
        short: &[&str],
    ) -> Self {
        ResourceType {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            kind: kind.into(),
            namespaced,
            status,
            short_names: short.iter().map(|s| s.to_string()).collect(),
        }
    }
    pub fn nodes() -> Self {
        Self::new("", "v1", "nodes", "Node", false, true, &["no"])
    }
    pub fn pods() -> Self {
        Self::new("", "v1", "pods", "Pod", true, true, &["po"])
    }
    pub fn pdbs() -> Self {
        Self::new(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            true,
            true,
            &["pdb"],
        )
    }
    pub fn daemonsets() -> Self {
        Self::new("apps", "v1", "daemonsets", "DaemonSet", true, true, &["ds"])
    }
    pub fn deployments() -> Self {
        Self::new(
            "apps",
            "v1",
            "deployments",
            "Deployment",
            true,
            true,
            &["deploy"],
        )
    }
    pub fn replicasets() -> Self {
        Self::new(
            "apps",
            "v1",
            "replicasets",
            "ReplicaSet",
            true,
            true,
            &["rs"],
        )
    }
    pub fn statefulsets() -> Self {
        Self::new(
            "apps",
            "v1",
            "statefulsets",
            "StatefulSet",
            true,
            true,
            &["sts"],
        )
    }
    pub fn namespaces() -> Self {
        Self::new("", "v1", "namespaces", "Namespace", false, true, &["ns"])
    }
    pub fn leases() -> Self {
        Self::new(
            "coordination.k8s.io",
            "v1",
            "leases",
            "Lease",
            true,
            false,
            &[],
        )
    }
    /// Core v1 events (what `kubectl get events` and `kubectl describe` read).
    pub fn events() -> Self {
        Self::new("", "v1", "events", "Event", true, false, &["ev"])
    }
    /// events.k8s.io/v1 events (what kube-rs' `Recorder` writes).
    pub fn events_v1() -> Self {
        Self::new(
            "events.k8s.io",
            "v1",
            "events",
            "Event",
            true,
            false,
            &["ev"],
        )
    }
    pub fn crds() -> Self {
        Self::new(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
            true,
            &["crd", "crds"],
        )
    }

    /// Kinds the simulation stores and serves without acting on them (enough for
    /// `kubectl apply -k deploy/` to install rota itself): RBAC, ServiceAccounts, Services,
    /// ConfigMaps, NetworkPolicies.
    pub fn stored_only() -> Vec<Self> {
        let rbac = "rbac.authorization.k8s.io";
        vec![
            Self::new(
                "",
                "v1",
                "serviceaccounts",
                "ServiceAccount",
                true,
                false,
                &["sa"],
            ),
            Self::new("", "v1", "services", "Service", true, true, &["svc"]),
            Self::new("", "v1", "configmaps", "ConfigMap", true, false, &["cm"]),
            Self::new(
                "networking.k8s.io",
                "v1",
                "networkpolicies",
                "NetworkPolicy",
                true,
                false,
                &["netpol"],
            ),
            Self::new(rbac, "v1", "clusterroles", "ClusterRole", false, false, &[]),
            Self::new(
                rbac,
                "v1",
                "clusterrolebindings",
                "ClusterRoleBinding",
                false,
                false,
                &[],
            ),
            Self::new(rbac, "v1", "roles", "Role", true, false, &[]),
            Self::new(rbac, "v1", "rolebindings", "RoleBinding", true, false, &[]),
            // Stored only: the one policy rota ships is modelled natively
            // (`apiserver::admission`), not evaluated from these objects.
            Self::new(
                "admissionregistration.k8s.io",
                "v1",
                "validatingadmissionpolicies",
                "ValidatingAdmissionPolicy",
                false,
                true,
                &[],
            ),
            Self::new(
                "admissionregistration.k8s.io",
                "v1",
                "validatingadmissionpolicybindings",
                "ValidatingAdmissionPolicyBinding",
                false,
                false,
                &[],
            ),
        ]
    }

    /// The built-in types every simulated cluster serves.
    pub fn builtins() -> Vec<Self> {
        let mut all = vec![
            Self::namespaces(),
            Self::nodes(),
            Self::pods(),
            Self::events(),
            Self::events_v1(),
            Self::pdbs(),
            Self::daemonsets(),
            Self::deployments(),
            Self::replicasets(),
            Self::statefulsets(),
            Self::leases(),
            Self::crds(),
        ];
        all.extend(Self::stored_only());
        all
    }

    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `poddisruptionbudgets.policy`: how Kubernetes names the resource in errors.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    fn key(&self) -> (String, String) {
        (self.group.clone(), self.plural.clone())
    }
}

/// An API error, rendered as a `metav1.Status` by the API server.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub code: u16,
    /// `NotFound`, `Conflict`, `AlreadyExists`, `Gone`, `TooManyRequests`, `Invalid`,
    /// `BadRequest`, `MethodNotAllowed`, `InternalError`, `Forbidden`, ...
    pub reason: String,
    pub message: String,
    /// `metav1.StatusDetails` (name, group, kind, causes, retryAfterSeconds), if any.
    pub details: Option<Value>,
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.into(),
            message: message.into(),
            details: None,
        }
    }
    fn with_details(mut self, rt: &ResourceType, name: &str) -> Self {
        self.details = Some(json!({"name": name, "group": rt.group, "kind": rt.plural}));
        self
    }
    pub fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", rt.qualified()),
        )
        .with_details(rt, name)
    }
    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", rt.qualified()),
        )
        .with_details(rt, name)
    }
    pub fn conflict(rt: &ResourceType, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                rt.qualified()
            ),
        )
        .with_details(rt, name)
    }
    pub fn stale(rt: &ResourceType, name: &str) -> Self {
        Self::conflict(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }
    pub fn invalid(rt: &ResourceType, name: &str, message: impl Into<String>) -> Self {
        Self::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {}", rt.kind, message.into()),
        )
        .with_details(rt, name)
    }
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `metav1.Status` body.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// What a watcher receives.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchEvent {
    Added(Value),
    Modified(Value),
    Deleted(Value),
    /// Everything up to this resourceVersion has been delivered.
    Bookmark(String),
}

/// One page of a list (`Store::list_page`).
#[derive(Clone, Debug, PartialEq)]
pub struct Page {
    pub items: Vec<Value>,
    /// The cluster's resourceVersion when the page was read.
    pub resource_version: String,
    /// (namespace, name) of the last item, when more items match after it.
    pub next: Option<(String, String)>,
}

/// Filters of list and watch.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
}

impl ListOptions {
    pub fn labels(s: &str) -> Self {
        ListOptions {
            label_selector: Some(s.into()),
            field_selector: None,
        }
    }
    pub fn fields(s: &str) -> Self {
        ListOptions {
            label_selector: None,
            field_selector: Some(s.into()),
        }
    }
    fn parse(&self) -> Result<Filter, ApiError> {
        let labels = match &self.label_selector {
            Some(s) => LabelSelector::parse(s).map_err(ApiError::bad_request)?,
            None => LabelSelector::default(),
        };
        let fields = match &self.field_selector {
            Some(s) => FieldSelector::parse(s).map_err(ApiError::bad_request)?,
            None => FieldSelector::default(),
        };
        Ok(Filter { labels, fields })
    }
}

#[derive(Clone, Debug)]
struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn matches(&self, o: &Stored) -> bool {
        if !self.labels.matches_with(|k| o.label(k)) {
            return false;
        }
        match self.fields.reqs.as_slice() {
            [] => true,
            // The common one needs no parsing.
            [(path, eq, want)] if path == "spec.nodeName" => {
                (o.node.as_deref().unwrap_or("") == want.as_str()) == *eq
            }
            _ => self.fields.matches(&o.value()),
        }
    }
}

/// An object at rest: its compact JSON text plus what lookups need without parsing it.
/// (`serde_json::Value` trees cost about 9 KiB per pod; the text about 1 KiB.)
struct Stored {
    json: Box<str>,
    ns: Box<str>,
    labels: Box<[(Box<str>, Box<str>)]>,
    node: Option<Box<str>>,
}

impl Stored {
    fn new(v: &Value) -> Self {
        let labels = super::selector::label_pairs(v).collect();
        Stored {
            json: v.to_string().into_boxed_str(),
            ns: ns_of(v).into(),
            labels,
            node: node_of(v).map(Into::into),
        }
    }

    fn value(&self) -> Value {
        serde_json::from_str(&self.json).expect("the store only holds JSON it wrote")
    }

    fn label(&self, k: &str) -> Option<&str> {
        super::selector::label_in(&self.labels, k)
    }
}

/// One cluster's objects: the etcd of a simulated API server. Cheap to clone (Arc inside).
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    start_wall: DateTime<Utc>,
    start: tokio::time::Instant,
    uid_prefix: u32,
    /// The Kubernetes minor `/version` reports (`1.33` unless the scenario says).
    kubernetes: std::sync::RwLock<rota_core::fleet::kubernetes::KubeMinor>,
    /// When marked pods are due to go, and how late the world runs (`timekeeping`).
    time: super::timekeeping::Timekeeping,
}

struct State {
    rv: u64,
    uids: u64,
    types: HashMap<(String, String), Table>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

struct Change {
    rv: u64,
    kind: ChangeKind,
    obj: Arc<Stored>,
    prev: Option<Arc<Stored>>,
}

struct Watcher {
    ns: Option<String>,
    /// Deliver events as events.k8s.io/v1 (a view of the core events).
    events_v1: bool,
    filter: Filter,
    sink: Sink,
}

/// A change on its way to a lazy watcher: the object still in its compact stored form, so a
/// backlog costs ~1.5 KiB per event rather than a parsed tree.
enum RawEvent {
    Added(Arc<Stored>),
    Modified(Arc<Stored>),
    Deleted(Arc<Stored>),
    Bookmark(String),
}

/// Where a watcher's events go: parsed by the store (`watch`) or by the receiver (`watch_lazy`).
enum Sink {
    Parsed(UnboundedSender<WatchEvent>),
    Raw(UnboundedSender<RawEvent>),
}

impl Sink {
    /// Sends one change; false once the receiver is gone.
    fn send(
        &self,
        kind: ChangeKind,
        obj: &Arc<Stored>,
        parsed: &mut Option<Value>,
        events_v1: bool,
    ) -> bool {
        match self {
            Sink::Raw(tx) => tx
                .send(match kind {
                    ChangeKind::Added => RawEvent::Added(obj.clone()),
                    ChangeKind::Modified => RawEvent::Modified(obj.clone()),
                    ChangeKind::Deleted => RawEvent::Deleted(obj.clone()),
                })
                .is_ok(),
            Sink::Parsed(tx) => {
                let v = parsed.get_or_insert_with(|| obj.value()).clone();
                let v = if events_v1 { events::to_v1(v) } else { v };
                tx.send(match kind {
                    ChangeKind::Added => WatchEvent::Added(v),
                    ChangeKind::Modified => WatchEvent::Modified(v),
                    ChangeKind::Deleted => WatchEvent::Deleted(v),
                })
                .is_ok()
            }
        }
    }

    fn bookmark(&self, rv: &str) -> bool {
        match self {
            Sink::Raw(tx) => tx.send(RawEvent::Bookmark(rv.to_string())).is_ok(),
            Sink::Parsed(tx) => tx.send(WatchEvent::Bookmark(rv.to_string())).is_ok(),
        }
    }

    fn is_closed(&self) -> bool {
        match self {
            Sink::Raw(tx) => tx.is_closed(),
            Sink::Parsed(tx) => tx.is_closed(),
        }
    }
}

/// A watch whose objects are parsed as they are received (`Store::watch_lazy`). Same events
/// as `Store::watch`; much less memory while the receiver lags behind.
pub struct Watch {
    rx: UnboundedReceiver<RawEvent>,
    events_v1: bool,
}

impl Watch {
    fn parse(&self, ev: RawEvent) -> WatchEvent {
        let v = |o: Arc<Stored>| {
            let v = o.value();
            if self.events_v1 { events::to_v1(v) } else { v }
        };
        match ev {
            RawEvent::Added(o) => WatchEvent::Added(v(o)),
            RawEvent::Modified(o) => WatchEvent::Modified(v(o)),
            RawEvent::Deleted(o) => WatchEvent::Deleted(v(o)),
            RawEvent::Bookmark(rv) => WatchEvent::Bookmark(rv),
        }
    }

    /// The next event; None once the type is gone (its CRD deleted).
    pub async fn recv(&mut self) -> Option<WatchEvent> {
        let ev = self.rx.recv().await?;
        Some(self.parse(ev))
    }

    /// The next event if one is queued.
    pub fn try_recv(&mut self) -> Result<WatchEvent, tokio::sync::mpsc::error::TryRecvError> {
        let ev = self.rx.try_recv()?;
        Ok(self.parse(ev))
    }
}

struct Table {
    rt: ResourceType,
    /// namespace ("" when cluster-scoped) → name → object.
    objects: BTreeMap<String, BTreeMap<String, Arc<Stored>>>,
    /// Pods only: spec.nodeName → (namespace, name).
    by_node: Option<HashMap<String, BTreeSet<(String, String)>>>,
    count: usize,
    watchers: Vec<Watcher>,
    history: VecDeque<Change>,
    /// Watches may start at any version >= this one.
    compacted: u64,
}

fn ns_of(o: &Value) -> &str {
    o.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
}
fn name_of(o: &Value) -> &str {
    o.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}
fn node_of(o: &Value) -> Option<&str> {
    o.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}
fn rv_of(o: &Value) -> Option<&str> {
    o.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// `metadata` must be an object for anything below to make sense.
fn meta_mut(o: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    if !o.is_object() {
        return Err(ApiError::bad_request("the object must be a JSON object"));
    }
    let m = o
        .as_object_mut()
        .expect("checked above")
        .entry("metadata")
        .or_insert_with(|| json!({}));
    m.as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

/// Is the name a DNS-1123 subdomain (what most kinds require)?
fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 253
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && n.starts_with(|c: char| c.is_ascii_alphanumeric())
        && n.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// The part of an object whose change bumps `generation`.
fn spec_part(o: &Value) -> Value {
    let mut c = o.clone();
    if let Some(m) = c.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    c
}

impl Table {
    fn new(rt: ResourceType, compacted: u64) -> Self {
        let by_node = (rt.group.is_empty() && rt.plural == "pods").then(HashMap::new);
        Table {
            rt,
            objects: BTreeMap::new(),
            by_node,
            count: 0,
            watchers: Vec::new(),
            history: VecDeque::new(),
            compacted,
        }
    }

    fn get(&self, ns: &str, name: &str) -> Option<&Arc<Stored>> {
        self.objects.get(ns).and_then(|m| m.get(name))
    }

    /// The current object, parsed.
    fn value(&self, ns: &str, name: &str) -> Option<Value> {
        self.get(ns, name).map(|o| o.value())
    }

    fn index(&mut self, ns: &str, name: &str, node: Option<&str>, add: bool) {
        if let (Some(idx), Some(node)) = (self.by_node.as_mut(), node) {
            let key = (ns.to_string(), name.to_string());
            if add {
                idx.entry(node.to_string()).or_default().insert(key);
            } else if let Some(set) = idx.get_mut(node) {
                set.remove(&key);
                if set.is_empty() {
                    idx.remove(node);
                }
            }
        }
    }

    /// Stores `obj` (already stamped with its new rv), tells the watchers, returns `obj`.
    fn put(&mut self, rv: u64, obj: Value) -> Value {
        let ns = ns_of(&obj).to_string();
        let name = name_of(&obj).to_string();
        let stored = Arc::new(Stored::new(&obj));
        let prev = self
            .objects
            .entry(ns.clone())
            .or_default()
            .insert(name.clone(), stored.clone());
        if let Some(p) = &prev {
            self.index(&ns, &name, p.node.as_deref(), false);
        } else {
            self.count += 1;
        }
        self.index(&ns, &name, stored.node.as_deref(), true);
        let kind = if prev.is_some() {
            ChangeKind::Modified
        } else {
            ChangeKind::Added
        };
        self.record(Change {
            rv,
            kind,
            obj: stored,
            prev,
        });
        obj
    }

    /// Removes an object; the DELETED event carries `final_obj` (stamped with the delete rv).
    fn remove(&mut self, rv: u64, ns: &str, name: &str, final_obj: &Value) -> bool {
        let Some(m) = self.objects.get_mut(ns) else {
            return false;
        };
        let Some(prev) = m.remove(name) else {
            return false;
        };
        if m.is_empty() {
            self.objects.remove(ns);
        }
        self.count -= 1;
        self.index(ns, name, prev.node.as_deref(), false);
        self.record(Change {
            rv,
            kind: ChangeKind::Deleted,
            obj: Arc::new(Stored::new(final_obj)),
            prev: Some(prev),
        });
        true
    }

    fn record(&mut self, c: Change) {
        // Parsed once, however many watchers get it.
        let mut parsed = None;
        self.watchers.retain(|w| match translate(w, &c) {
            Some(kind) => w.sink.send(kind, &c.obj, &mut parsed, w.events_v1),
            None => !w.sink.is_closed(),
        });
        self.history.push_back(c);
        if self.history.len() > HISTORY_PER_TYPE
            && let Some(old) = self.history.pop_front()
        {
            self.compacted = old.rv;
        }
    }
}

/// What one change means to one watcher, given its namespace and selectors.
fn translate(w: &Watcher, c: &Change) -> Option<ChangeKind> {
    if let Some(ns) = &w.ns
        && &*c.obj.ns != ns
    {
        return None;
    }
    let now = w.filter.matches(&c.obj);
    let before = || c.prev.as_ref().is_some_and(|p| w.filter.matches(p));
    match c.kind {
        ChangeKind::Added if now => Some(ChangeKind::Added),
        ChangeKind::Deleted if now || before() => Some(ChangeKind::Deleted),
        ChangeKind::Modified => match (before(), now) {
            (true, true) => Some(ChangeKind::Modified),
            (false, true) => Some(ChangeKind::Added),
            (true, false) => Some(ChangeKind::Deleted),
            (false, false) => None,
        },
        _ => None,
    }
}

/// events.k8s.io/v1 Events are a view of the core ones: the same objects, other field names.
fn is_events_v1(rt: &ResourceType) -> bool {
    rt.group == "events.k8s.io" && rt.plural == "events"
}

fn events_opts(opts: &ListOptions) -> ListOptions {
    ListOptions {
        label_selector: opts.label_selector.clone(),
        field_selector: opts
            .field_selector
            .as_deref()
            .map(events::field_selector_to_core),
    }
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

/// The Kubernetes minor a simulated API server reports unless its scenario says otherwise.
pub const DEFAULT_KUBERNETES: rota_core::fleet::kubernetes::KubeMinor =
    rota_core::fleet::kubernetes::KubeMinor {
        major: 1,
        minor: 33,
    };

impl Store {
    /// The Kubernetes minor this cluster's API server reports on `/version`.
    pub fn kubernetes_version(&self) -> rota_core::fleet::kubernetes::KubeMinor {
        *self
            .inner
            .kubernetes
            .read()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Report `v` on `/version` from now on (a scenario's control plane, or an upgrade).
    pub fn set_kubernetes_version(&self, v: rota_core::fleet::kubernetes::KubeMinor) {
        *self
            .inner
            .kubernetes
            .write()
            .unwrap_or_else(|e| e.into_inner()) = v;
    }

    /// A cluster with the built-in types and the namespaces every cluster has.
    pub fn new() -> Self {
        let store = Store {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    rv: 1,
                    uids: 0,
                    types: HashMap::new(),
                }),
                start_wall: Utc::now(),
                start: tokio::time::Instant::now(),
                uid_prefix: rand::random(),
                kubernetes: std::sync::RwLock::new(DEFAULT_KUBERNETES),
                time: Default::default(),
            }),
        };
        for rt in ResourceType::builtins() {
            store.register(rt);
        }
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            store
                .create(
                    &ResourceType::namespaces(),
                    None,
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                )
                .expect("fresh store");
        }
        store
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic in a test thread must not wedge every other user of the store.
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// The simulated wall clock: the real time the store was made plus tokio's elapsed time,
    /// so that timestamps follow paused and sped-up time alike.
    pub fn now(&self) -> DateTime<Utc> {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(self.inner.start);
        self.inner.start_wall + chrono::Duration::from_std(elapsed).unwrap_or_default()
    }

    /// The cluster's simulated time: the wall time the store started plus the tokio time
    /// since, times the world's speed (`timekeeping`), as the controllers' clock counts it.
    /// What an Event a gate reads must carry, so that the gate (on that clock) sees it when
    /// it happens; `now()` stays the wall's, as objects' metadata has always had it.
    /// When the world shares a process with controllers, they share one anchor
    /// ([`super::timekeeping::Timekeeping::anchor_at`]).
    pub fn sim_now(&self) -> DateTime<Utc> {
        let (wall, start) = self
            .inner
            .time
            .anchor()
            .unwrap_or((self.inner.start_wall, self.inner.start));
        let elapsed = tokio::time::Instant::now()
            .saturating_duration_since(start)
            .mul_f64(self.inner.time.speed());
        wall + chrono::Duration::from_std(elapsed).unwrap_or_default()
    }

    /// `now()` in the RFC 3339 form metadata timestamps use.
    pub fn timestamp(&self) -> String {
        self.now().to_rfc3339_opts(SecondsFormat::Secs, true)
    }

    /// Adds a resource type (CRDs do this at run time). Re-registering keeps the objects.
    pub fn register(&self, rt: ResourceType) {
        let mut st = self.lock();
        let rv = st.rv;
        match st.types.get_mut(&rt.key()) {
            Some(t) => t.rt = rt,
            None => {
                st.types.insert(rt.key(), Table::new(rt, rv));
            }
        }
    }

    /// Drops a resource type and its objects (watchers see their channels close).
    pub fn unregister(&self, group: &str, plural: &str) {
        self.lock()
            .types
            .remove(&(group.to_string(), plural.to_string()));
    }

    /// Every registered type, sorted by group then plural.
    pub fn types(&self) -> Vec<ResourceType> {
        let mut v: Vec<_> = self.lock().types.values().map(|t| t.rt.clone()).collect();
        v.sort_by(|a, b| (&a.group, &a.plural).cmp(&(&b.group, &b.plural)));
        v
    }

    /// The type served at `group`/`plural`, if any.
    pub fn resource_type(&self, group: &str, plural: &str) -> Option<ResourceType> {
        self.lock()
            .types
            .get(&(group.to_string(), plural.to_string()))
            .map(|t| t.rt.clone())
    }

    /// The current (latest) resourceVersion of the whole cluster.
    pub fn resource_version(&self) -> String {
        self.lock().rv.to_string()
    }

    /// How many objects of a type exist.
    pub fn count(&self, rt: &ResourceType) -> usize {
        if is_events_v1(rt) {
            return self.count(&ResourceType::events());
        }
        self.lock().types.get(&rt.key()).map_or(0, |t| t.count)
    }

    fn table<'a>(st: &'a mut State, rt: &ResourceType) -> Result<&'a mut Table, ApiError> {
        st.types.get_mut(&rt.key()).ok_or_else(|| {
            ApiError::new(
                404,
                "NotFound",
                format!(
                    "the server could not find the requested resource ({})",
                    rt.qualified()
                ),
            )
        })
    }

    /// The namespace an object lives in: "" for cluster-scoped types; for namespaced types the
    /// given one, which must agree with the object's own if it has one.
    fn scope(rt: &ResourceType, ns: Option<&str>, obj: &Value) -> Result<String, ApiError> {
        if !rt.namespaced {
            return Ok(String::new());
        }
        let own = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        match (ns, own) {
            (Some(a), Some(b)) if a != b => Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            )),
            (Some(a), _) | (None, Some(a)) => Ok(a.to_string()),
            (None, None) => Err(ApiError::bad_request(format!(
                "{} is namespaced: a namespace is required",
                rt.qualified()
            ))),
        }
    }

    /// Creates an object: sets uid, resourceVersion, creationTimestamp, generation; fills
    /// `metadata.name` from `generateName`. 409 AlreadyExists if the name is taken.
    pub fn create(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        mut obj: Value,
    ) -> Result<Value, ApiError> {
        if is_events_v1(rt) {
            return self
                .create(&ResourceType::events(), ns, events::to_core(obj))
                .map(events::to_v1);
        }
        let ns = Self::scope(rt, ns, &obj)?;
        let now = self.timestamp();
        let mut st = self.lock();
        if rt.namespaced
            && st
                .types
                .get(&ResourceType::namespaces().key())
                .is_none_or(|t| t.get("", &ns).is_none())
        {
            return Err(ApiError::not_found(&ResourceType::namespaces(), &ns));
        }
        st.uids += 1;
        let uid = format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            self.inner.uid_prefix,
            (st.uids >> 24) & 0xffff,
            (st.uids >> 12) & 0xfff,
            st.uids & 0xfff,
            st.uids
        );
        let meta = meta_mut(&mut obj)?;
        let mut name = meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if name.is_empty() {
            let Some(prefix) = meta.get("generateName").and_then(Value::as_str) else {
                return Err(ApiError::invalid(
                    rt,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            };
            // Deterministic suffix from the uid counter: unique within the store.
            const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
            let mut n = st.uids.wrapping_mul(2654435761);
            let suffix: String = (0..5)
                .map(|_| {
                    let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
                    n /= ALPHABET.len() as u64;
                    c
                })
                .collect();
            name = format!("{prefix}{suffix}");
        }
        if !valid_name(&name) && rt.plural != "events" {
            return Err(ApiError::invalid(
                rt,
                &name,
                format!(
                    "metadata.name: Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
                ),
            ));
        }
        meta.insert("name".into(), json!(name));
        if rt.namespaced {
            meta.insert("namespace".into(), json!(ns));
        } else {
            meta.remove("namespace");
        }
        meta.insert("uid".into(), json!(uid));
        meta.insert("creationTimestamp".into(), json!(now));
        meta.insert("generation".into(), json!(1));
        meta.remove("deletionTimestamp");
        obj["apiVersion"] = json!(rt.api_version());
        obj["kind"] = json!(rt.kind);
        if rt == &ResourceType::crds() {
            crd_accepted(&mut obj);
        }
        if rt == &ResourceType::namespaces() && obj.pointer("/status/phase").is_none() {
            obj["status"] = json!({"phase": "Active"});
        }
        let table = Self::table(&mut st, rt)?;
        if table.get(&ns, &name).is_some() {
            return Err(ApiError::already_exists(rt, &name));
        }
        st.rv += 1;
        let rv = st.rv;
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        let out = Self::table(&mut st, rt)?.put(rv, obj);
        drop(st);
        if rt == &ResourceType::crds() {
            self.register_crd(&out)?;
        }
        Ok(out)
    }

    /// Reads one object.
    pub fn get(&self, rt: &ResourceType, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        if is_events_v1(rt) {
            return self
                .get(&ResourceType::events(), ns, name)
                .map(events::to_v1);
        }
        let mut st = self.lock();
        let t = Self::table(&mut st, rt)?;
        let ns = if rt.namespaced { ns.unwrap_or("") } else { "" };
        let o = t.get(ns, name).cloned();
        drop(st);
        o.map(|o| o.value())
            .ok_or_else(|| ApiError::not_found(rt, name))
    }

    /// Lists objects (all namespaces when `ns` is None), sorted by namespace then name, with the
    /// cluster's current resourceVersion.
    pub fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<(Vec<Value>, String), ApiError> {
        if is_events_v1(rt) {
            let (items, rv) = self.list(&ResourceType::events(), ns, &events_opts(opts))?;
            return Ok((items.into_iter().map(events::to_v1).collect(), rv));
        }
        let filter = opts.parse()?;
        let mut st = self.lock();
        let rv = st.rv.to_string();
        let t = Self::table(&mut st, rt)?;
        let ns = if rt.namespaced { ns } else { None };
        // Matching happens under the lock (labels and the node need no parsing); parsing the
        // results happens after it is released.
        let mut out: Vec<Arc<Stored>> = Vec::new();
        if let (Some(idx), Some(node)) = (&t.by_node, filter.fields.equals("spec.nodeName"))
            && !node.is_empty()
        {
            for (ons, name) in idx.get(node).into_iter().flatten() {
                if ns.is_some_and(|n| n != ons) {
                    continue;
                }
                if let Some(o) = t.get(ons, name)
                    && filter.matches(o)
                {
                    out.push(o.clone());
                }
            }
        } else {
            let mut push = |m: &BTreeMap<String, Arc<Stored>>| {
                for o in m.values() {
                    if filter.matches(o) {
                        out.push(o.clone());
                    }
                }
            };
            match ns {
                Some(n) => {
                    if let Some(m) = t.objects.get(n) {
                        push(m)
                    }
                }
                None => t.objects.values().for_each(push),
            }
        }
        drop(st);
        Ok((out.iter().map(|o| o.value()).collect(), rv))
    }

    /// One page of a list, in (namespace, name) order: at most `limit` matching objects after
    /// the key `after`, the cluster's resourceVersion, and the key to continue after when more
    /// objects match. Pages are read at the time of each call (not at one snapshot); the API
    /// server hands out the first page's resourceVersion for all pages, so a watch started
    /// from it replays whatever changed meanwhile.
    pub fn list_page(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
        limit: usize,
        after: Option<(&str, &str)>,
    ) -> Result<Page, ApiError> {
        if is_events_v1(rt) {
            let mut page = self.list_page(
                &ResourceType::events(),
                ns,
                &events_opts(opts),
                limit,
                after,
            )?;
            page.items = page.items.into_iter().map(events::to_v1).collect();
            return Ok(page);
        }
        let filter = opts.parse()?;
        let limit = limit.max(1);
        let mut st = self.lock();
        let rv = st.rv.to_string();
        let t = Self::table(&mut st, rt)?;
        let ns = if rt.namespaced { ns } else { None };
        let is_after = |ons: &str, name: &str| after.is_none_or(|(a, b)| (ons, name) > (a, b));
        let mut out: Vec<(String, String, Arc<Stored>)> = Vec::new();
        let mut more = false;
        let mut consider = |ons: &str, name: &str, o: &Arc<Stored>| -> bool {
            if !is_after(ons, name) || !filter.matches(o) {
                return true;
            }
            if out.len() == limit {
                more = true;
                return false;
            }
            out.push((ons.to_string(), name.to_string(), o.clone()));
            true
        };
        if let (Some(idx), Some(node)) = (&t.by_node, filter.fields.equals("spec.nodeName"))
            && !node.is_empty()
        {
            for (ons, name) in idx.get(node).into_iter().flatten() {
                if ns.is_some_and(|n| n != ons) {
                    continue;
                }
                if let Some(o) = t.get(ons, name)
                    && !consider(ons, name, o)
                {
                    break;
                }
            }
        } else {
            let start = after.map(|(a, _)| a.to_string()).unwrap_or_default();
            'outer: for (ons, m) in t.objects.range(start..) {
                if ns.is_some_and(|n| n != ons) {
                    continue;
                }
                let from = match after {
                    Some((a, b)) if a == ons => b.to_string(),
                    _ => String::new(),
                };
                for (name, o) in m.range(from..) {
                    if !consider(ons, name, o) {
                        break 'outer;
                    }
                }
            }
        }
        drop(st);
        let next = if more {
            out.last().map(|(a, b, _)| (a.clone(), b.clone()))
        } else {
            None
        };
        Ok(Page {
            items: out.iter().map(|(_, _, o)| o.value()).collect(),
            resource_version: rv,
            next,
        })
    }

    /// Objects matching a `LabelSelector` (as PDBs and workloads hold them), filtered before
    /// they are copied out: what controllers use on large namespaces.
    pub fn list_selected(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        selector: &LabelSelector,
    ) -> Result<Vec<Value>, ApiError> {
        if is_events_v1(rt) {
            let items = self.list_selected(&ResourceType::events(), ns, selector)?;
            return Ok(items.into_iter().map(events::to_v1).collect());
        }
        let mut st = self.lock();
        let t = Self::table(&mut st, rt)?;
        let ns = if rt.namespaced { ns } else { None };
        let pick = |m: &BTreeMap<String, Arc<Stored>>| -> Vec<Arc<Stored>> {
            m.values()
                .filter(|o| selector.matches_with(|k| o.label(k)))
                .cloned()
                .collect()
        };
        let found: Vec<Arc<Stored>> = match ns {
            Some(n) => t.objects.get(n).map(pick).unwrap_or_default(),
            None => t.objects.values().flat_map(pick).collect(),
        };
        drop(st);
        Ok(found.iter().map(|o| o.value()).collect())
    }

    /// Replaces an object. 409 Conflict if `metadata.resourceVersion` is set and stale. For
    /// types with a status subresource the stored `.status` is kept. A no-op update returns
    /// the stored object without a new resourceVersion.
    pub fn update(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        obj: Value,
    ) -> Result<Value, ApiError> {
        self.write(rt, ns, obj, WriteMode::Main)
    }

    /// Replaces only `.status` (the `/status` subresource). 409 on a stale resourceVersion.
    pub fn update_status(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        obj: Value,
    ) -> Result<Value, ApiError> {
        self.write(rt, ns, obj, WriteMode::Status)
    }

    /// Atomic read-modify-write for controllers: `f` sees the current object and may change
    /// anything (spec, status, metadata labels...). Errors from `f` abort without writing.
    pub fn modify(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        f: impl FnOnce(&mut Value) -> Result<(), ApiError>,
    ) -> Result<Value, ApiError> {
        self.modify_boxed(rt, ns, name, Box::new(f))
    }

    fn modify_boxed(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        f: Modifier<'_>,
    ) -> Result<Value, ApiError> {
        if is_events_v1(rt) {
            return self
                .modify_boxed(
                    &ResourceType::events(),
                    ns,
                    name,
                    Box::new(|o: &mut Value| {
                        let mut v = events::to_v1(o.clone());
                        f(&mut v)?;
                        *o = events::to_core(v);
                        Ok(())
                    }),
                )
                .map(events::to_v1);
        }
        let mut st = self.lock();
        let t = Self::table(&mut st, rt)?;
        let nsk = if rt.namespaced { ns.unwrap_or("") } else { "" };
        let mut obj = t
            .get(nsk, name)
            .map(|o| o.value())
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        f(&mut obj)?;
        // The closure may not move the object.
        obj["metadata"]["name"] = json!(name);
        if rt.namespaced {
            obj["metadata"]["namespace"] = json!(nsk);
        }
        let out = self.write_locked(&mut st, rt, nsk, obj, WriteMode::Any)?;
        drop(st);
        if rt == &ResourceType::crds() && out.pointer("/metadata/deletionTimestamp").is_none() {
            self.register_crd(&out)?;
        }
        Ok(out)
    }

    fn write(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        obj: Value,
        mode: WriteMode,
    ) -> Result<Value, ApiError> {
        if is_events_v1(rt) {
            return self
                .write(&ResourceType::events(), ns, events::to_core(obj), mode)
                .map(events::to_v1);
        }
        let ns = Self::scope(rt, ns, &obj)?;
        let mut st = self.lock();
        let out = self.write_locked(&mut st, rt, &ns, obj, mode)?;
        drop(st);
        if rt == &ResourceType::crds() {
            self.register_crd(&out)?;
        }
        Ok(out)
    }

    fn write_locked(
        &self,
        st: &mut State,
        rt: &ResourceType,
        ns: &str,
        mut obj: Value,
        mode: WriteMode,
    ) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the object must be a JSON object"));
        }
        let name = name_of(&obj).to_string();
        if name.is_empty() {
            return Err(ApiError::invalid(
                rt,
                "",
                "metadata.name: Required value: name is required",
            ));
        }
        let t = Self::table(st, rt)?;
        let old = t
            .value(ns, &name)
            .ok_or_else(|| ApiError::not_found(rt, &name))?;
        if mode != WriteMode::Any
            && let Some(rv) = rv_of(&obj)
            && Some(rv) != rv_of(&old)
        {
            return Err(ApiError::stale(rt, &name));
        }
        if let Some(uid) = obj.pointer("/metadata/uid").and_then(Value::as_str)
            && !uid.is_empty()
            && Some(uid) != old.pointer("/metadata/uid").and_then(Value::as_str)
        {
            return Err(ApiError::conflict(
                rt,
                &name,
                "Precondition failed: UID in object meta does not match the stored object",
            ));
        }
        let mut new = match mode {
            WriteMode::Status => {
                let mut n = old.clone();
                match obj.get("status") {
                    Some(s) => n["status"] = s.clone(),
                    None => {
                        n.as_object_mut().expect("object").remove("status");
                    }
                }
                n
            }
            WriteMode::Main if rt.status => {
                let o = obj.as_object_mut().expect("object");
                match old.get("status") {
                    Some(s) => o.insert("status".into(), s.clone()),
                    None => o.remove("status"),
                };
                obj
            }
            _ => obj,
        };
        // Server-owned metadata is not the client's to change (deletion goes through
        // `delete` and `mark_deleting`).
        {
            let meta = meta_mut(&mut new)?;
            for k in ["uid", "creationTimestamp", "deletionTimestamp", "namespace"] {
                match old.pointer(&format!("/metadata/{k}")) {
                    Some(v) => meta.insert(k.into(), v.clone()),
                    None => meta.remove(k),
                };
            }
            meta.remove("resourceVersion");
        }
        new["apiVersion"] = json!(rt.api_version());
        new["kind"] = json!(rt.kind);
        let old_gen = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let generation = if spec_part(&new) != spec_part(&old) {
            old_gen + 1
        } else {
            old_gen
        };
        new["metadata"]["generation"] = json!(generation);
        if rt == &ResourceType::crds() {
            crd_accepted(&mut new);
        }
        // A no-op write keeps the resourceVersion (the API server does the same).
        let mut old_cmp = old.clone();
        if let Some(m) = old_cmp.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        if old_cmp == new {
            return Ok(old.clone());
        }
        // Emptying the finalizers of an object being deleted completes the deletion.
        let deleting = new.pointer("/metadata/deletionTimestamp").is_some();
        let finalizers_left = new
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        st.rv += 1;
        let rv = st.rv;
        new["metadata"]["resourceVersion"] = json!(rv.to_string());
        let t = Self::table(st, rt)?;
        if deleting && !finalizers_left {
            t.remove(rv, ns, &name, &new);
            return Ok(new);
        }
        Ok(t.put(rv, new))
    }

    /// Deletes an object now, unless it has finalizers: then it gets a `deletionTimestamp` and
    /// stays until they are removed. Returns the object as last stored. Deleting a namespace
    /// deletes every object in it; deleting a CRD drops its resource.
    pub fn delete(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.delete_if(rt, ns, name, None)
    }

    /// `delete` with a UID precondition (409 Conflict if the object is another incarnation).
    pub fn delete_if(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        uid: Option<&str>,
    ) -> Result<Value, ApiError> {
        if is_events_v1(rt) {
            return self
                .delete_if(&ResourceType::events(), ns, name, uid)
                .map(events::to_v1);
        }
        let now = self.timestamp();
        let nsk = if rt.namespaced { ns.unwrap_or("") } else { "" };
        let mut st = self.lock();
        let t = Self::table(&mut st, rt)?;
        let old = t
            .value(nsk, name)
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        if let Some(uid) = uid
            && old.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid)
        {
            return Err(ApiError::conflict(
                rt,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    old.pointer("/metadata/uid")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                ),
            ));
        }
        let has_finalizers = old
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        st.rv += 1;
        let rv = st.rv;
        let mut last = old.clone();
        last["metadata"]["resourceVersion"] = json!(rv.to_string());
        let t = Self::table(&mut st, rt)?;
        if has_finalizers {
            if old.pointer("/metadata/deletionTimestamp").is_some() {
                st.rv -= 1;
                return Ok(old.clone());
            }
            last["metadata"]["deletionTimestamp"] = json!(now);
            last["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            return Ok(t.put(rv, last));
        }
        t.remove(rv, nsk, name, &last);
        if rt == &ResourceType::namespaces() {
            // The namespace controller's job, done at once.
            let State { rv: cur, types, .. } = &mut *st;
            for t in types.values_mut().filter(|t| t.rt.namespaced) {
                let names: Vec<String> = t
                    .objects
                    .get(name)
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default();
                for n in names {
                    *cur += 1;
                    let rv = *cur;
                    if let Some(o) = t.get(name, &n).cloned() {
                        let mut o = o.value();
                        o["metadata"]["resourceVersion"] = json!(rv.to_string());
                        t.remove(rv, name, &n, &o);
                    }
                }
            }
        }
        drop(st);
        if rt == &ResourceType::crds()
            && let (Some(g), Some(p)) = (
                last.pointer("/spec/group").and_then(Value::as_str),
                last.pointer("/spec/names/plural").and_then(Value::as_str),
            )
        {
            self.unregister(g, p);
        }
        Ok(last)
    }

    /// Marks an object as being deleted (`deletionTimestamp`, `deletionGracePeriodSeconds`)
    /// without removing it: graceful pod deletion, where the kubelet (or the API server's
    /// timer) removes it after the grace period. Idempotent.
    pub fn mark_deleting(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        grace_seconds: i64,
    ) -> Result<Value, ApiError> {
        let ts = self.now() + chrono::Duration::seconds(grace_seconds);
        let ts = ts.to_rfc3339_opts(SecondsFormat::Secs, true);
        let mut st = self.lock();
        let t = Self::table(&mut st, rt)?;
        let nsk = if rt.namespaced { ns.unwrap_or("") } else { "" };
        let old = t
            .value(nsk, name)
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        if old.pointer("/metadata/deletionTimestamp").is_some() {
            return Ok(old.clone());
        }
        let mut new = old.clone();
        new["metadata"]["deletionTimestamp"] = json!(ts);
        new["metadata"]["deletionGracePeriodSeconds"] = json!(grace_seconds);
        st.rv += 1;
        let rv = st.rv;
        new["metadata"]["resourceVersion"] = json!(rv.to_string());
        if *rt == ResourceType::pods() {
            // Due when its grace period ends, counted from now, whenever the world gets to
            // the watch event that tells of the mark.
            let uid = new.pointer("/metadata/uid").and_then(Value::as_str);
            self.inner
                .time
                .schedule(nsk, name, uid.unwrap_or_default(), grace_seconds);
        }
        let t = Self::table(&mut st, rt)?;
        Ok(t.put(rv, new))
    }

    /// The cluster's deletion deadlines and lag.
    pub fn timekeeping(&self) -> &super::timekeeping::Timekeeping {
        &self.inner.time
    }

    /// Watches a type. `resource_version` None, "" or "0": first an ADDED event for every
    /// object that matches now, then changes. Otherwise: every change after that version,
    /// or 410 Gone if it is older than the retained history.
    pub fn watch(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
        resource_version: Option<&str>,
    ) -> Result<UnboundedReceiver<WatchEvent>, ApiError> {
        let (tx, rx) = unbounded_channel();
        self.subscribe(rt, ns, opts, resource_version, Sink::Parsed(tx))?;
        Ok(rx)
    }

    /// `watch`, with objects parsed by the receiver as it takes them: what to use when the
    /// receiver may fall behind (a controller busy with a large batch), since a queued event
    /// then costs its compact form only.
    pub fn watch_lazy(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
        resource_version: Option<&str>,
    ) -> Result<Watch, ApiError> {
        let (tx, rx) = unbounded_channel();
        self.subscribe(rt, ns, opts, resource_version, Sink::Raw(tx))?;
        Ok(Watch {
            rx,
            events_v1: is_events_v1(rt),
        })
    }

    fn subscribe(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
        resource_version: Option<&str>,
        sink: Sink,
    ) -> Result<(), ApiError> {
        let view = is_events_v1(rt);
        let (rt, opts) = if view {
            (&ResourceType::events(), &events_opts(opts))
        } else {
            (rt, opts)
        };
        let filter = opts.parse()?;
        let from =
            match resource_version {
                None | Some("") | Some("0") => None,
                Some(s) => Some(s.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid resource version {s:?}"))
                })?),
            };
        let ns = if rt.namespaced {
            ns.map(str::to_string)
        } else {
            None
        };
        let mut st = self.lock();
        let t = Self::table(&mut st, rt)?;
        let w = Watcher {
            ns,
            events_v1: view,
            filter,
            sink,
        };
        match from {
            None => {
                let nsf = w.ns.clone();
                for (ons, m) in &t.objects {
                    if nsf.as_ref().is_some_and(|n| n != ons) {
                        continue;
                    }
                    for o in m.values().filter(|o| w.filter.matches(o)) {
                        w.sink.send(ChangeKind::Added, o, &mut None, view);
                    }
                }
            }
            Some(rv) => {
                if rv < t.compacted {
                    return Err(ApiError::gone(format!(
                        "too old resource version: {rv} ({})",
                        t.compacted
                    )));
                }
                for c in t.history.iter().filter(|c| c.rv > rv) {
                    if let Some(kind) = translate(&w, c) {
                        w.sink.send(kind, &c.obj, &mut None, view);
                    }
                }
            }
        }
        t.watchers.push(w);
        Ok(())
    }

    /// Sends every open watch of `rt` a bookmark at the current resourceVersion (everything
    /// before it has been delivered, since events are sent under the same lock).
    pub fn bookmark(&self, rt: &ResourceType) {
        if is_events_v1(rt) {
            return self.bookmark(&ResourceType::events());
        }
        let mut st = self.lock();
        let rv = st.rv.to_string();
        if let Ok(t) = Self::table(&mut st, rt) {
            t.watchers.retain(|w| w.sink.bookmark(&rv));
        }
    }

    /// Registers (or re-registers) the resource a CRD defines: its storage version, scope,
    /// names and whether it has a status subresource.
    fn register_crd(&self, crd: &Value) -> Result<(), ApiError> {
        let rt = crd_resource_type(crd)
            .map_err(|m| ApiError::invalid(&ResourceType::crds(), name_of(crd), m))?;
        self.register(rt);
        Ok(())
    }
}

/// A read-modify-write step of `Store::modify`.
type Modifier<'a> = Box<dyn FnOnce(&mut Value) -> Result<(), ApiError> + 'a>;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum WriteMode {
    /// The main resource: keeps `.status` when the type has a status subresource.
    Main,
    /// The `/status` subresource: only `.status` changes.
    Status,
    /// Controllers: anything changes, no resourceVersion check.
    Any,
}

/// The resource type a CRD object defines.
pub fn crd_resource_type(crd: &Value) -> Result<ResourceType, String> {
    let s = |p: &str| crd.pointer(p).and_then(Value::as_str).map(str::to_string);
    let group = s("/spec/group").ok_or("spec.group: Required value")?;
    let plural = s("/spec/names/plural").ok_or("spec.names.plural: Required value")?;
    let kind = s("/spec/names/kind").ok_or("spec.names.kind: Required value")?;
    let namespaced = match s("/spec/scope").as_deref() {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        other => {
            return Err(format!(
                "spec.scope: Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
            ));
        }
    };
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .filter(|v| !v.is_empty())
        .ok_or("spec.versions: Required value")?;
    let storage = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .or_else(|| versions.first())
        .expect("non-empty");
    let version = storage
        .get("name")
        .and_then(Value::as_str)
        .ok_or("spec.versions[].name: Required value")?
        .to_string();
    let status = storage.pointer("/subresources/status").is_some();
    let short_names = crd
        .pointer("/spec/names/shortNames")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    Ok(ResourceType {
        group,
        version,
        plural,
        kind,
        namespaced,
        status,
        short_names,
    })
}

/// What the apiextensions controllers would report for a valid CRD: names accepted,
/// established.
fn crd_accepted(crd: &mut Value) {
    let names = crd
        .pointer("/spec/names")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut accepted = names;
    if accepted.get("singular").is_none()
        && let Some(k) = crd.pointer("/spec/names/kind").and_then(Value::as_str)
    {
        accepted["singular"] = json!(k.to_lowercase());
    }
    if accepted.get("listKind").is_none()
        && let Some(k) = crd.pointer("/spec/names/kind").and_then(Value::as_str)
    {
        accepted["listKind"] = json!(format!("{k}List"));
    }
    let stored: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").cloned())
                .collect()
        })
        .unwrap_or_default();
    let cond = |t: &str, reason: &str, msg: &str| {
        json!({"type": t, "status": "True", "reason": reason, "message": msg,
               "lastTransitionTime": crd.pointer("/metadata/creationTimestamp").cloned().unwrap_or(Value::Null)})
    };
    let conditions = json!([
        cond("NamesAccepted", "NoConflicts", "no conflicts found"),
        cond(
            "Established",
            "InitialNamesAccepted",
            "the initial names have been accepted"
        ),
    ]);
    crd["status"] = json!({
        "acceptedNames": accepted,
        "conditions": conditions,
        "storedVersions": stored,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: &str, app: &str) -> Value {
        json!({"metadata": {"name": name, "labels": {"app": app}},
               "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}})
    }

    fn node(name: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {}})
    }

    #[test]
    fn create_sets_server_fields_and_rejects_duplicates() {
        let s = Store::new();
        let p = s
            .create(
                &ResourceType::pods(),
                Some("default"),
                pod("a", "n1", "web"),
            )
            .unwrap();
        assert_eq!(p["kind"], "Pod");
        assert_eq!(p["apiVersion"], "v1");
        assert_eq!(p["metadata"]["namespace"], "default");
        assert_eq!(p["metadata"]["generation"], 1);
        assert!(p["metadata"]["uid"].as_str().unwrap().len() == 36);
        assert!(p["metadata"]["creationTimestamp"].is_string());
        let e = s
            .create(
                &ResourceType::pods(),
                Some("default"),
                pod("a", "n1", "web"),
            )
            .unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
        assert_eq!(e.message, "pods \"a\" already exists");
        let e = s
            .create(&ResourceType::pods(), Some("nope"), pod("b", "n1", "web"))
            .unwrap_err();
        assert_eq!(e.code, 404);
        assert_eq!(e.message, "namespaces \"nope\" not found");
        let e = s
            .create(&ResourceType::nodes(), None, node("Bad_Name"))
            .unwrap_err();
        assert_eq!(e.code, 422);
        let g = s
            .create(
                &ResourceType::pods(),
                Some("default"),
                json!({"metadata": {"generateName": "web-"}}),
            )
            .unwrap();
        assert!(g["metadata"]["name"].as_str().unwrap().starts_with("web-"));
    }

    #[test]
    fn update_conflicts_on_stale_version_and_keeps_status() {
        let s = Store::new();
        let rt = ResourceType::nodes();
        let mut n = node("n1");
        n["status"] = json!({"phase": "x"});
        let v1 = s.create(&rt, None, n).unwrap();
        let mut edit = v1.clone();
        edit["spec"]["unschedulable"] = json!(true);
        edit["status"] = json!({"phase": "ignored"});
        let v2 = s.update(&rt, None, edit).unwrap();
        assert_eq!(v2["spec"]["unschedulable"], true);
        assert_eq!(v2["status"]["phase"], "x", "status subresource owns status");
        assert_eq!(v2["metadata"]["generation"], 2);
        assert_ne!(
            v2["metadata"]["resourceVersion"],
            v1["metadata"]["resourceVersion"]
        );
        // v1 is now stale.
        let e = s.update(&rt, None, v1.clone()).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
        assert!(e.message.contains("the object has been modified"));
        // No-op write: no new resourceVersion.
        let v3 = s.update(&rt, None, v2.clone()).unwrap();
        assert_eq!(
            v3["metadata"]["resourceVersion"],
            v2["metadata"]["resourceVersion"]
        );
        // Status update touches only status and does not bump generation.
        let mut st = v3.clone();
        st["status"] = json!({"phase": "y"});
        st["spec"]["unschedulable"] = json!(false);
        let v4 = s.update_status(&rt, None, st).unwrap();
        assert_eq!(v4["status"]["phase"], "y");
        assert_eq!(v4["spec"]["unschedulable"], true);
        assert_eq!(v4["metadata"]["generation"], 2);
    }

    #[test]
    fn modify_is_read_modify_write() {
        let s = Store::new();
        let rt = ResourceType::nodes();
        s.create(&rt, None, node("n1")).unwrap();
        let v = s
            .modify(&rt, None, "n1", |n| {
                n["metadata"]["labels"] = json!({"a": "b"});
                n["status"] = json!({"ready": true});
                Ok(())
            })
            .unwrap();
        assert_eq!(v["metadata"]["labels"]["a"], "b");
        assert_eq!(v["status"]["ready"], true);
        let e = s
            .modify(&rt, None, "n1", |_| Err(ApiError::internal("no")))
            .unwrap_err();
        assert_eq!(e.code, 500);
        assert_eq!(s.get(&rt, None, "n1").unwrap(), v);
    }

    #[test]
    fn list_filters_and_node_index() {
        let s = Store::new();
        let rt = ResourceType::pods();
        s.create(
            &ResourceType::namespaces(),
            None,
            json!({"metadata": {"name": "other"}}),
        )
        .unwrap();
        s.create(&rt, Some("default"), pod("a", "n1", "web"))
            .unwrap();
        s.create(&rt, Some("default"), pod("b", "n2", "web"))
            .unwrap();
        s.create(&rt, Some("other"), pod("c", "n1", "db")).unwrap();
        let names = |ns: Option<&str>, o: ListOptions| -> Vec<String> {
            s.list(&rt, ns, &o)
                .unwrap()
                .0
                .iter()
                .map(|p| name_of(p).to_string())
                .collect()
        };
        assert_eq!(names(None, ListOptions::default()), ["a", "b", "c"]);
        assert_eq!(names(Some("default"), ListOptions::default()), ["a", "b"]);
        assert_eq!(
            names(None, ListOptions::fields("spec.nodeName=n1")),
            ["a", "c"]
        );
        assert_eq!(
            names(Some("other"), ListOptions::fields("spec.nodeName=n1")),
            ["c"]
        );
        assert_eq!(names(None, ListOptions::labels("app=web")), ["a", "b"]);
        // Moving a pod keeps the index right.
        s.modify(&rt, Some("default"), "b", |p| {
            p["spec"]["nodeName"] = json!("n1");
            Ok(())
        })
        .unwrap();
        assert_eq!(
            names(None, ListOptions::fields("spec.nodeName=n1")),
            ["a", "b", "c"]
        );
        s.delete(&rt, Some("default"), "a").unwrap();
        assert_eq!(
            names(None, ListOptions::fields("spec.nodeName=n1")),
            ["b", "c"]
        );
        assert_eq!(
            names(None, ListOptions::fields("spec.nodeName=n2")),
            Vec::<String>::new()
        );
        assert!(s.list(&rt, None, &ListOptions::labels("a in b")).is_err());
    }

    #[tokio::test]
    async fn watch_replays_translates_selectors_and_expires() {
        let s = Store::new();
        let rt = ResourceType::pods();
        let (_, rv0) = s.list(&rt, None, &ListOptions::default()).unwrap();
        s.create(&rt, Some("default"), pod("a", "n1", "web"))
            .unwrap();
        let mut all = s
            .watch(&rt, None, &ListOptions::default(), Some(&rv0))
            .unwrap();
        let mut web = s
            .watch(&rt, None, &ListOptions::labels("app=web"), Some(&rv0))
            .unwrap();
        assert!(matches!(all.recv().await, Some(WatchEvent::Added(p)) if name_of(&p) == "a"));
        assert!(matches!(web.recv().await, Some(WatchEvent::Added(_))));
        // Relabel: the web watcher sees it leave.
        s.modify(&rt, Some("default"), "a", |p| {
            p["metadata"]["labels"]["app"] = json!("db");
            Ok(())
        })
        .unwrap();
        assert!(matches!(all.recv().await, Some(WatchEvent::Modified(_))));
        assert!(matches!(web.recv().await, Some(WatchEvent::Deleted(_))));
        let d = s.delete(&rt, Some("default"), "a").unwrap();
        match all.recv().await {
            Some(WatchEvent::Deleted(p)) => {
                assert_eq!(
                    p["metadata"]["resourceVersion"],
                    d["metadata"]["resourceVersion"]
                )
            }
            other => panic!("{other:?}"),
        }
        s.bookmark(&rt);
        assert_eq!(
            all.recv().await,
            Some(WatchEvent::Bookmark(s.resource_version()))
        );
        // A lazy watch sees the same events, parsed as it takes them.
        let mut lazy = s
            .watch_lazy(&rt, None, &ListOptions::labels("app=db"), Some(&rv0))
            .unwrap();
        assert!(
            matches!(lazy.try_recv(), Ok(WatchEvent::Added(p)) if p["metadata"]["labels"]["app"] == "db")
        );
        assert!(matches!(lazy.recv().await, Some(WatchEvent::Deleted(p)) if name_of(&p) == "a"));
        assert!(lazy.try_recv().is_err());
        // A fresh watch without a version starts with the current state.
        s.create(&rt, Some("default"), pod("b", "n1", "web"))
            .unwrap();
        let mut fresh = s.watch(&rt, None, &ListOptions::default(), None).unwrap();
        assert!(matches!(fresh.recv().await, Some(WatchEvent::Added(p)) if name_of(&p) == "b"));
        // Push the history past its window: starting at rv0 is now too old.
        for i in 0..HISTORY_PER_TYPE + 1 {
            s.modify(&rt, Some("default"), "b", |p| {
                p["metadata"]["labels"]["i"] = json!(i.to_string());
                Ok(())
            })
            .unwrap();
        }
        let e = s
            .watch(&rt, None, &ListOptions::default(), Some(&rv0))
            .unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
        assert!(e.message.starts_with("too old resource version"));
    }

    #[test]
    fn finalizers_hold_deletion_and_namespaces_cascade() {
        let s = Store::new();
        let rt = ResourceType::pods();
        s.create(
            &ResourceType::namespaces(),
            None,
            json!({"metadata": {"name": "x"}}),
        )
        .unwrap();
        let mut p = pod("a", "n1", "web");
        p["metadata"]["finalizers"] = json!(["keep"]);
        s.create(&rt, Some("x"), p).unwrap();
        let d = s.delete(&rt, Some("x"), "a").unwrap();
        assert!(d["metadata"]["deletionTimestamp"].is_string());
        assert!(s.get(&rt, Some("x"), "a").is_ok());
        s.modify(&rt, Some("x"), "a", |p| {
            p["metadata"]["finalizers"] = json!([]);
            Ok(())
        })
        .unwrap();
        assert_eq!(s.get(&rt, Some("x"), "a").unwrap_err().code, 404);
        s.create(&rt, Some("x"), pod("b", "n1", "web")).unwrap();
        s.delete(&ResourceType::namespaces(), None, "x").unwrap();
        assert_eq!(s.count(&rt), 0);
        let e = s
            .delete_if(&ResourceType::nodes(), None, "zz", None)
            .unwrap_err();
        assert_eq!(e.code, 404);
    }

    #[test]
    fn pages_cover_the_list_once() {
        let s = Store::new();
        let rt = ResourceType::pods();
        s.create(
            &ResourceType::namespaces(),
            None,
            json!({"metadata": {"name": "b"}}),
        )
        .unwrap();
        for (ns, n, node) in [
            ("default", "p1", "n1"),
            ("default", "p2", "n2"),
            ("b", "p3", "n1"),
            ("b", "p4", "n1"),
        ] {
            s.create(&rt, Some(ns), pod(n, node, "web")).unwrap();
        }
        for opts in [
            ListOptions::default(),
            ListOptions::fields("spec.nodeName=n1"),
        ] {
            let (all, _) = s.list(&rt, None, &opts).unwrap();
            let mut paged = Vec::new();
            let mut after: Option<(String, String)> = None;
            loop {
                let Page { items, next, .. } = s
                    .list_page(
                        &rt,
                        None,
                        &opts,
                        1,
                        after.as_ref().map(|(a, b)| (a.as_str(), b.as_str())),
                    )
                    .unwrap();
                assert!(items.len() <= 1);
                paged.extend(items);
                match next {
                    Some(k) => after = Some(k),
                    None => break,
                }
            }
            assert_eq!(paged, all);
        }
        let Page { items, next, .. } = s
            .list_page(&rt, Some("b"), &ListOptions::default(), 5, None)
            .unwrap();
        assert_eq!(items.len(), 2);
        assert!(next.is_none());
    }

    #[tokio::test]
    async fn events_are_one_store_in_two_forms() {
        let s = Store::new();
        let mut w = s
            .watch(&ResourceType::events(), None, &ListOptions::default(), None)
            .unwrap();
        let e = s
            .create(
                &ResourceType::events_v1(),
                Some("default"),
                json!({"metadata": {"name": "n1.1"}, "regarding": {"kind": "Node", "name": "n1"},
                       "note": "cordoned", "reason": "Cordon", "type": "Normal"}),
            )
            .unwrap();
        assert_eq!(e["apiVersion"], "events.k8s.io/v1");
        assert_eq!(e["note"], "cordoned");
        let core = s
            .get(&ResourceType::events(), Some("default"), "n1.1")
            .unwrap();
        assert_eq!(core["message"], "cordoned");
        assert_eq!(core["involvedObject"]["name"], "n1");
        assert!(matches!(w.recv().await, Some(WatchEvent::Added(o)) if o["message"] == "cordoned"));
        let (l, _) = s
            .list(
                &ResourceType::events_v1(),
                None,
                &ListOptions::fields("regarding.name=n1"),
            )
            .unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0]["regarding"]["kind"], "Node");
    }

    #[test]
    fn crds_register_their_resource() {
        let s = Store::new();
        let crd = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "subresources": {"status": {}}}]}
        });
        let c = s.create(&ResourceType::crds(), None, crd).unwrap();
        assert_eq!(c["status"]["acceptedNames"]["singular"], "widget");
        let rt = s.resource_type("example.com", "widgets").unwrap();
        assert!(rt.status && rt.namespaced);
        assert_eq!(rt.short_names, ["wd"]);
        s.create(
            &rt,
            Some("default"),
            json!({"metadata": {"name": "w1"}, "spec": {"a": 1}}),
        )
        .unwrap();
        assert_eq!(s.count(&rt), 1);
        // Patching the CRD (a new short name) re-registers the resource.
        s.modify(&ResourceType::crds(), None, "widgets.example.com", |c| {
            c["spec"]["names"]["shortNames"] = json!(["wd", "wdg"]);
            Ok(())
        })
        .unwrap();
        let rt = s.resource_type("example.com", "widgets").unwrap();
        assert_eq!(rt.short_names, ["wd", "wdg"]);
        s.delete(&ResourceType::crds(), None, "widgets.example.com")
            .unwrap();
        assert!(s.resource_type("example.com", "widgets").is_none());
    }
}
