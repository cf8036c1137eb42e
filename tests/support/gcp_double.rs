//! A test double of the Compute Engine REST API (v1), on loopback HTTP, for the GCP provider.
//!
//! It serves the calls rota makes, with the request and response bodies of the published
//! Compute API reference: `instanceGroupManagers` and `regionInstanceGroupManagers` (get,
//! listManagedInstances, resize, deleteInstances, setInstanceTemplate), `instanceTemplates`
//! and `regionInstanceTemplates` (get, insert), `autoscalers` and `regionAutoscalers` (get,
//! patch), and zonal, regional and global `operations.get`. Mutations answer with an
//! `Operation` that goes `PENDING` → `RUNNING` → `DONE` over successive polls; errors use
//! Google's body `{"error": {"code", "message", "status", "errors": [{"reason", ...}],
//! "details": [...]}}` (the legacy `errors[]` always; `details` with a `google.rpc.ErrorInfo`
//! where Google sends one: rate limits, permissions); resource links are full
//! `https://www.googleapis.com/compute/v1/...` URLs as Compute returns them.
//!
//! As the API reference describes: `resize` is DONE once the creations are scheduled, and a
//! creation that then fails (a zone stock-out, a quota) shows per instance in
//! `listManagedInstances`' `lastAttempt.errors` while the instance stays `CREATING` and the
//! group keeps trying ([`GcpDouble::stock_out`]); a group whose `updatePolicy.type` is
//! `PROACTIVE` replaces its instances itself when its template changes; a regional group with
//! an autoscaler that is not `OFF` refuses a manual resize (412 `conditionNotMet`).
//! [`GcpDouble::fail_next_operation`] still makes an operation end in an error, a fault
//! injection for the operation path rather than how Compute reports stock-outs.
//!
//! Every response it sends is recorded and, when the double is dropped, checked against the
//! Compute v1 discovery document (see `tests/support/api_schemas.rs`).
//!
//! State is controllable: groups and templates are created directly, instances boot and
//! shut down on a logical clock moved by [`GcpDouble::advance`], and faults (an HTTP error for
//! the next N matching requests, an operation that ends in an error) are injected.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{Value, json};

use super::loopback::Loopback;

const LINK: &str = "https://www.googleapis.com/compute/v1/";
/// Logical time from creation to RUNNING, and from DELETING to gone.
const BOOT: Duration = Duration::from_secs(60);
const SHUTDOWN: Duration = Duration::from_secs(30);

/// An HTTP error returned for the next `times` requests whose method and path match.
#[derive(Clone, Debug)]
pub struct Fault {
    pub method: Option<&'static str>,
    /// A substring of the request path (after `/compute/v1/`), e.g. `/resize`.
    pub path_contains: String,
    pub status: u16,
    pub reason: String,
    pub message: String,
    pub times: u32,
    /// `error.details` to send (`google.rpc` messages with their `@type`); empty: none.
    pub details: Vec<Value>,
    /// `error.status`, the `google.rpc.Code` name; `None`: the one HTTP maps to.
    pub rpc_status: Option<&'static str>,
}

impl Fault {
    pub fn new(path_contains: &str, status: u16, reason: &str, times: u32) -> Fault {
        Fault {
            method: None,
            path_contains: path_contains.to_string(),
            status,
            reason: reason.to_string(),
            message: format!("injected {status} {reason}"),
            times,
            details: Vec::new(),
            rpc_status: None,
        }
    }

    /// Compute's API rate limit in the form Google's client reads first: a
    /// `google.rpc.ErrorInfo` with reason `RATE_LIMIT_EXCEEDED` and a `Help` link in
    /// `error.details`, the legacy `errors[]` beside it.
    pub fn rate_limited(path_contains: &str, status: u16, times: u32) -> Fault {
        Fault {
            message: "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service 'compute.googleapis.com' for consumer 'project_number:123456789012'.".into(),
            details: vec![
                json!({"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                       "reason": "RATE_LIMIT_EXCEEDED", "domain": "googleapis.com",
                       "metadata": {"service": "compute.googleapis.com", "consumer": "projects/123456789012",
                                    "quota_metric": "compute.googleapis.com/default", "quota_limit": "defaultPerMinutePerProject",
                                    "quota_limit_value": "1500", "quota_location": "global"}}),
                json!({"@type": "type.googleapis.com/google.rpc.Help",
                       "links": [{"description": "Request a higher quota limit.",
                                  "url": "https://cloud.google.com/docs/quotas/help/request_increase"}]}),
            ],
            ..Fault::new(path_contains, status, "rateLimitExceeded", times)
        }
    }
}

/// A capacity shortage: instance creations in `zone` (every zone when empty) fail with
/// `code` until it is cleared; the instances stay `CREATING` and report the error in
/// `lastAttempt`.
#[derive(Clone, Debug)]
struct StockOut {
    zone: String,
    code: String,
    message: String,
}

#[derive(Clone, Debug)]
struct Inst {
    name: String,
    zone: String,
    /// Partial path of the template it was created from.
    template: String,
    created: Duration,
    deleting: Option<Duration>,
    /// Its creation keeps failing with this (code, message): it stays CREATING.
    failing: Option<(String, String)>,
}

#[derive(Clone, Debug)]
struct Mig {
    project: String,
    name: String,
    /// `zones/Z` or `regions/R`.
    scope: String,
    template: String,
    target_size: u32,
    autoscaler: Option<String>,
    instances: Vec<Inst>,
    /// `updatePolicy.type`.
    update_policy: String,
}

#[derive(Clone, Debug)]
struct Op {
    body: Value,
    polls: u32,
    error: Option<(String, String, u16)>,
}

#[derive(Default)]
struct State {
    clock: Duration,
    seq: u64,
    /// Polls after which an operation reports DONE.
    polls_to_done: u32,
    /// Largest page listManagedInstances returns (so that paging is exercised).
    page_size: usize,
    templates: BTreeMap<String, Value>,
    migs: BTreeMap<String, Mig>,
    autoscalers: BTreeMap<String, Value>,
    operations: BTreeMap<String, Op>,
    request_ids: HashMap<String, String>,
    faults: Vec<Fault>,
    /// (path substring, code, message, HTTP status): the next matching mutation is accepted
    /// but its operation ends DONE with this error and no effect.
    op_failures: Vec<(String, String, String, u16)>,
    requests: Vec<String>,
    stock_outs: Vec<StockOut>,
    /// Every answer: (method, path after `/compute/v1/`, status, body), for the schema check.
    answers: Vec<super::api_schemas::Exchange>,
    /// Published images by partial path (`projects/P/global/images/N`).
    images: BTreeMap<String, Value>,
}

/// A running double; dropping it stops serving.
pub struct GcpDouble {
    pub url: String,
    state: Arc<Mutex<State>>,
    server: Loopback,
}

impl Drop for GcpDouble {
    fn drop(&mut self) {
        self.server.stop();
        // Every answer the double gave, held to Compute's published description.
        let answers = std::mem::take(&mut self.state.lock().unwrap().answers);
        super::api_schemas::check_on_drop(super::api_schemas::Api::Compute, answers);
    }
}

fn link(path: &str) -> String {
    format!("{LINK}{path}")
}

fn partial(s: &str) -> String {
    match s.find("projects/") {
        Some(at) => s[at..].to_string(),
        None => s.to_string(),
    }
}

/// The `google.rpc.Code` Google's HTTP mapping gives a status.
fn rpc_status(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ALREADY_EXISTS",
        412 => "FAILED_PRECONDITION",
        429 => "RESOURCE_EXHAUSTED",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

fn error_body(status: u16, reason: &str, message: &str) -> Value {
    json!({"error": {"code": status, "message": message, "status": rpc_status(status),
        "errors": [{"message": message, "domain": "global", "reason": reason}]}})
}

fn reply(status: u16, body: Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json; charset=UTF-8")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

fn not_found(path: &str) -> (u16, Value) {
    (
        404,
        error_body(
            404,
            "notFound",
            &format!("The resource '{path}' was not found"),
        ),
    )
}

fn query(uri: &hyper::Uri) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for pair in uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.insert(decode(k), decode(v));
    }
    out
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl State {
    /// Whether an autoscaler that is not `OFF` targets the group.
    fn autoscaling(&self, mig: &str) -> bool {
        self.migs[mig]
            .autoscaler
            .as_ref()
            .and_then(|a| self.autoscalers.get(a))
            .is_some_and(|a| a["autoscalingPolicy"]["mode"].as_str().unwrap_or("ON") != "OFF")
    }

    fn next(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn zones_of(scope: &str) -> Vec<String> {
        match scope.strip_prefix("regions/") {
            Some(r) => ["a", "b", "c"].iter().map(|z| format!("{r}-{z}")).collect(),
            None => vec![scope.trim_start_matches("zones/").to_string()],
        }
    }

    /// The group's manager at work: drop instances whose shutdown finished, create or
    /// delete instances until the live ones match the target size.
    fn reconcile(&mut self) {
        let clock = self.clock;
        let keys: Vec<String> = self.migs.keys().cloned().collect();
        for k in keys {
            let mut mig = self.migs.remove(&k).unwrap();
            mig.instances
                .retain(|i| i.deleting.is_none_or(|d| clock < d + SHUTDOWN));
            let live = mig
                .instances
                .iter()
                .filter(|i| i.deleting.is_none())
                .count() as u32;
            if live < mig.target_size {
                let zones = Self::zones_of(&mig.scope);
                for n in 0..(mig.target_size - live) {
                    let seq = self.next();
                    let zone = zones[(seq as usize + n as usize) % zones.len()].clone();
                    let failing = self
                        .stock_outs
                        .iter()
                        .find(|o| o.zone.is_empty() || o.zone == zone)
                        .map(|o| (o.code.clone(), o.message.clone()));
                    mig.instances.push(Inst {
                        name: format!("{}-{:04x}", mig.name, (seq * 7919) % 65536),
                        zone,
                        template: mig.template.clone(),
                        created: clock,
                        deleting: None,
                        failing,
                    });
                }
            } else if live > mig.target_size {
                // Scale-in removes the youngest instances first.
                let mut extra = live - mig.target_size;
                for i in mig.instances.iter_mut().rev() {
                    if extra == 0 {
                        break;
                    }
                    if i.deleting.is_none() {
                        i.deleting = Some(clock);
                        extra -= 1;
                    }
                }
            }
            self.migs.insert(k, mig);
        }
    }

    /// Whether `i` is still being created (booting, or failing to be created).
    fn creating(&self, i: &Inst) -> bool {
        i.deleting.is_none() && (i.failing.is_some() || self.clock < i.created + BOOT)
    }

    fn mig_json(&self, key: &str, m: &Mig) -> Value {
        let mut status = json!({"isStable": m.instances.iter().all(|i| i.deleting.is_none() && !self.creating(i))});
        if let Some(a) = &m.autoscaler {
            status["autoscaler"] = json!(link(a));
        }
        let loc_key = if m.scope.starts_with("zones/") {
            "zone"
        } else {
            "region"
        };
        let creating = m.instances.iter().filter(|i| self.creating(i)).count();
        let deleting = m.instances.iter().filter(|i| i.deleting.is_some()).count();
        let mut v = json!({
            "kind": "compute#instanceGroupManager",
            "id": (key.len() as u64 * 1_000_003).to_string(),
            "creationTimestamp": "2026-11-01T00:00:00.000-07:00",
            "name": m.name,
            "instanceTemplate": link(&m.template),
            "versions": [{"instanceTemplate": link(&m.template), "targetSize": {"calculated": m.target_size}}],
            "instanceGroup": link(&format!("projects/{}/{}/instanceGroups/{}", m.project, m.scope, m.name)),
            "baseInstanceName": m.name,
            "fingerprint": "qE0nfZ0PkRU=",
            "currentActions": {"none": m.instances.len() - creating - deleting, "creating": creating, "deleting": deleting,
                "abandoning": 0, "recreating": 0, "refreshing": 0, "restarting": 0, "verifying": 0,
                "creatingWithoutRetries": 0, "resuming": 0, "starting": 0, "stopping": 0, "suspending": 0},
            "status": status,
            "targetSize": m.target_size,
            "selfLink": link(key),
            "updatePolicy": {"type": m.update_policy, "minimalAction": "REPLACE", "maxSurge": {"fixed": 1, "calculated": 1}, "maxUnavailable": {"fixed": 1, "calculated": 1}, "replacementMethod": "SUBSTITUTE"},
        });
        v[loc_key] = json!(link(&format!("projects/{}/{}", m.project, m.scope)));
        v
    }

    fn managed_json(&self, m: &Mig, i: &Inst, n: usize) -> Value {
        let booted = !self.creating(i);
        let (action, status) = match (i.deleting, booted) {
            (Some(_), _) => ("DELETING", Some("STOPPING")),
            (None, true) => ("NONE", Some("RUNNING")),
            (None, false) => ("CREATING", None),
        };
        let mut v = json!({
            "instance": link(&format!("projects/{}/zones/{}/instances/{}", m.project, i.zone, i.name)),
            "id": (4_000_000_000_000_000u64 + n as u64).to_string(),
            "name": i.name,
            "currentAction": action,
            "version": {"instanceTemplate": link(&i.template)},
        });
        if let Some(s) = status {
            v["instanceStatus"] = json!(s);
        }
        if let (Some((code, message)), None) = (&i.failing, i.deleting) {
            // The instance does not exist: no id, no status; the group says why.
            v.as_object_mut().unwrap().remove("id");
            v["lastAttempt"] = json!({"errors": {"errors": [{"code": code, "message": message}]}});
        }
        v
    }

    /// Accept a mutation: an operation in `scope` (`projects/p/zones/z`, `.../regions/r`,
    /// `.../global`) reported PENDING; `None` when an injected failure says it must fail
    /// (the effect is then not applied).
    fn start_op(
        &mut self,
        scope: &str,
        op_type: &str,
        target: &str,
        path: &str,
        request_id: Option<&String>,
    ) -> (Value, bool) {
        if let Some(existing) = request_id.and_then(|r| self.request_ids.get(r)).cloned() {
            // Compute's requestId: a retried request gets the first one's operation back.
            let op = &self.operations[&existing];
            return (op.body.clone(), false);
        }
        let failure = self
            .op_failures
            .iter()
            .position(|f| path.contains(&f.0))
            .map(|at| self.op_failures.remove(at));
        let seq = self.next();
        let name = format!("operation-{}-{seq:06}", 1_763_000_000_000u64 + seq);
        let key = format!("{scope}/operations/{name}");
        let mut body = json!({
            "kind": "compute#operation",
            "id": (7_000_000_000u64 + seq).to_string(),
            "name": name,
            "operationType": op_type,
            "targetLink": link(target),
            "targetId": (9_000_000u64 + seq).to_string(),
            "status": "PENDING",
            "user": "rota@acme.iam.gserviceaccount.com",
            "progress": 0,
            "insertTime": "2026-11-22T06:00:00.000-08:00",
            "selfLink": link(&key),
        });
        let parts: Vec<&str> = scope.split('/').collect();
        if parts.len() == 4 {
            let k = if parts[2] == "zones" {
                "zone"
            } else {
                "region"
            };
            body[k] = json!(link(scope));
        }
        let failed = failure.is_some();
        self.operations.insert(
            key.clone(),
            Op {
                body: body.clone(),
                polls: 0,
                error: failure.map(|f| (f.1, f.2, f.3)),
            },
        );
        if let Some(r) = request_id {
            self.request_ids.insert(r.clone(), key);
        }
        (body, !failed)
    }

    fn poll_op(&mut self, key: &str) -> Option<Value> {
        let polls_to_done = self.polls_to_done;
        let op = self.operations.get_mut(key)?;
        op.polls += 1;
        if op.polls >= polls_to_done {
            op.body["status"] = json!("DONE");
            op.body["progress"] = json!(100);
            op.body["endTime"] = json!("2026-11-22T06:00:05.000-08:00");
            if let Some((code, message, http)) = &op.error {
                op.body["error"] = json!({"errors": [{"code": code, "message": message}]});
                op.body["httpErrorStatusCode"] = json!(http);
                op.body["httpErrorMessage"] = json!(if *http == 403 {
                    "FORBIDDEN"
                } else {
                    "SERVICE UNAVAILABLE"
                });
            }
        } else {
            op.body["status"] = json!("RUNNING");
            op.body["startTime"] = json!("2026-11-22T06:00:01.000-08:00");
            op.body["progress"] = json!(50);
        }
        Some(op.body.clone())
    }

    fn handle(
        &mut self,
        method: &str,
        path: &str,
        q: &HashMap<String, String>,
        body: &Value,
    ) -> (u16, Value) {
        self.requests.push(format!("{method} {path}"));
        if let Some(f) = self.faults.iter_mut().find(|f| {
            f.times > 0 && f.method.is_none_or(|m| m == method) && path.contains(&f.path_contains)
        }) {
            f.times -= 1;
            let (s, r, m) = (f.status, f.reason.clone(), f.message.clone());
            let mut body = error_body(s, &r, &m);
            if !f.details.is_empty() {
                body["error"]["details"] = json!(f.details);
            }
            if let Some(st) = f.rpc_status {
                body["error"]["status"] = json!(st);
            }
            return (s, body);
        }
        self.reconcile();
        let seg: Vec<&str> = path.split('/').collect();
        let rid = q.get("requestId");
        match (method, seg.as_slice()) {
            // --- operations -------------------------------------------------------------
            ("GET", ["projects", _, "global", "operations", _])
            | ("GET", ["projects", _, "zones" | "regions", _, "operations", _]) => {
                match self.poll_op(path) {
                    Some(v) => (200, v),
                    None => not_found(path),
                }
            }
            // --- images ------------------------------------------------------------------
            // images.getFromFamily: the family's newest image that is not deprecated.
            ("GET", ["projects", p, "global", "images", "family", f]) => {
                let prefix = format!("projects/{p}/global/images/");
                let newest = self
                    .images
                    .iter()
                    .filter(|(k, i)| {
                        k.starts_with(&prefix)
                            && i["family"].as_str() == Some(*f)
                            && i.get("deprecated").is_none()
                    })
                    .map(|(_, i)| i)
                    .max_by_key(|i| {
                        chrono::DateTime::parse_from_rfc3339(
                            i["creationTimestamp"].as_str().unwrap_or(""),
                        )
                        .ok()
                    });
                match newest {
                    Some(i) => (200, i.clone()),
                    None => not_found(path),
                }
            }
            ("GET", ["projects", _, "global", "images", _]) => match self.images.get(path) {
                Some(i) => (200, i.clone()),
                None => not_found(path),
            },
            // --- groups of every zone and region ----------------------------------------
            ("GET", ["projects", p, "aggregated", "instanceGroupManagers"]) => {
                let mut items = serde_json::Map::new();
                for (k, m) in self.migs.iter().filter(|(_, m)| m.project == *p) {
                    let scope = items
                        .entry(m.scope.clone())
                        .or_insert_with(|| json!({"instanceGroupManagers": []}));
                    scope["instanceGroupManagers"]
                        .as_array_mut()
                        .unwrap()
                        .push(self.mig_json(k, m));
                }
                (
                    200,
                    json!({
                        "kind": "compute#instanceGroupManagerAggregatedList",
                        "id": format!("projects/{p}/aggregated/instanceGroupManagers"),
                        "items": items,
                        "selfLink": link(path),
                    }),
                )
            }
            // --- templates -------------------------------------------------------------
            ("GET", ["projects", _, "global", "instanceTemplates", _])
            | ("GET", ["projects", _, "regions", _, "instanceTemplates", _]) => {
                match self.templates.get(path) {
                    Some(t) => (200, t.clone()),
                    None => not_found(path),
                }
            }
            ("POST", ["projects", p, "global", "instanceTemplates"])
            | ("POST", ["projects", p, "regions", _, "instanceTemplates"]) => {
                let Some(name) = body["name"].as_str() else {
                    return (
                        400,
                        error_body(
                            400,
                            "required",
                            "Required field 'resource.name' not specified",
                        ),
                    );
                };
                let key = format!("{path}/{name}");
                if self.templates.contains_key(&key)
                    && rid.is_none_or(|r| !self.request_ids.contains_key(r))
                {
                    return (
                        409,
                        error_body(
                            409,
                            "alreadyExists",
                            &format!("The resource '{key}' already exists"),
                        ),
                    );
                }
                let scope = path.trim_end_matches("/instanceTemplates").to_string();
                let (op, apply) = self.start_op(&scope, "insert", &key, path, rid);
                if apply {
                    let mut t = body.clone();
                    t["kind"] = json!("compute#instanceTemplate");
                    t["id"] = json!((5_000_000u64 + self.next()).to_string());
                    t["selfLink"] = json!(link(&key));
                    t["creationTimestamp"] = json!("2026-11-22T06:00:00.000-08:00");
                    if seg[2] == "regions" {
                        t["region"] = json!(link(&format!("projects/{p}/regions/{}", seg[3])));
                    }
                    self.templates.insert(key, t);
                }
                (200, op)
            }
            // --- autoscalers -------------------------------------------------------------
            ("GET", ["projects", _, "zones" | "regions", _, "autoscalers", _]) => {
                match self.autoscalers.get(path) {
                    Some(a) => (200, a.clone()),
                    None => not_found(path),
                }
            }
            ("PATCH", ["projects", _, "zones" | "regions", _, "autoscalers"]) => {
                let name = q
                    .get("autoscaler")
                    .cloned()
                    .or_else(|| body["name"].as_str().map(String::from))
                    .unwrap_or_default();
                let key = format!("{path}/{name}");
                if !self.autoscalers.contains_key(&key) {
                    return not_found(&key);
                }
                let scope = path.trim_end_matches("/autoscalers").to_string();
                let (op, apply) =
                    self.start_op(&scope, "compute.autoscalers.patch", &key, path, rid);
                if apply {
                    let a = self.autoscalers.get_mut(&key).unwrap();
                    if let Some(p) = body["autoscalingPolicy"].as_object() {
                        for (k, v) in p {
                            a["autoscalingPolicy"][k] = v.clone();
                        }
                    }
                }
                (200, op)
            }
            // --- managed instance groups ---------------------------------------------------
            (
                _,
                [
                    "projects",
                    _,
                    "zones" | "regions",
                    _,
                    "instanceGroupManagers",
                    _,
                    ..,
                ],
            ) => {
                let key = seg[..6].join("/");
                if !self.migs.contains_key(&key) {
                    return not_found(&key);
                }
                self.mig_call(method, &key, seg.get(6).copied(), q, body, rid, path)
            }
            _ => (
                400,
                error_body(
                    400,
                    "invalid",
                    &format!("the double does not serve {method} {path}"),
                ),
            ),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn mig_call(
        &mut self,
        method: &str,
        key: &str,
        verb: Option<&str>,
        q: &HashMap<String, String>,
        body: &Value,
        rid: Option<&String>,
        path: &str,
    ) -> (u16, Value) {
        let scope = key.rsplitn(3, '/').nth(2).unwrap().to_string();
        let zonal = scope.contains("/zones/");
        match (method, verb) {
            ("GET", None) => {
                let m = self.migs[key].clone();
                (200, self.mig_json(key, &m))
            }
            ("POST", Some("listManagedInstances")) => {
                let m = self.migs[key].clone();
                let start: usize = q.get("pageToken").and_then(|t| t.parse().ok()).unwrap_or(0);
                let max: usize = q
                    .get("maxResults")
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(500)
                    .min(self.page_size.max(1));
                let items: Vec<Value> = m
                    .instances
                    .iter()
                    .enumerate()
                    .skip(start)
                    .take(max)
                    .map(|(n, i)| self.managed_json(&m, i, n))
                    .collect();
                let mut v = json!({"managedInstances": items});
                if start + max < m.instances.len() {
                    v["nextPageToken"] = json!((start + max).to_string());
                }
                (200, v)
            }
            ("POST", Some("resize")) => {
                let Some(size) = q.get("size").and_then(|s| s.parse::<u32>().ok()) else {
                    return (
                        400,
                        error_body(400, "required", "Required field 'size' not specified"),
                    );
                };
                if !zonal && self.autoscaling(key) {
                    return (
                        412,
                        error_body(
                            412,
                            "conditionNotMet",
                            "Resizing of autoscaled regional managed instance groups is not allowed. If you want to manually adjust target size remove the autoscaler or set autoscaling policy mode to OFF.",
                        ),
                    );
                }
                let (op, apply) = self.start_op(
                    &scope,
                    "compute.instanceGroupManagers.resize",
                    key,
                    path,
                    rid,
                );
                if apply {
                    self.migs.get_mut(key).unwrap().target_size = size;
                    self.reconcile();
                }
                (200, op)
            }
            ("POST", Some("setInstanceTemplate")) => {
                let t = partial(body["instanceTemplate"].as_str().unwrap_or(""));
                if !self.templates.contains_key(&t) {
                    return (
                        400,
                        error_body(
                            400,
                            "invalid",
                            &format!(
                                "Invalid value for field 'resource.instanceTemplate': '{t}'. The referenced instance template does not exist."
                            ),
                        ),
                    );
                }
                let (op, apply) = self.start_op(
                    &scope,
                    "compute.instanceGroupManagers.setInstanceTemplate",
                    key,
                    path,
                    rid,
                );
                if apply {
                    let clock = self.clock;
                    let m = self.migs.get_mut(key).unwrap();
                    m.template = t.clone();
                    if m.update_policy == "PROACTIVE" {
                        // Compute brings every instance to the new template itself: the old
                        // ones go (no drain), replacements come from the new template.
                        for i in m.instances.iter_mut().filter(|i| i.template != t) {
                            i.deleting.get_or_insert(clock);
                        }
                        self.reconcile();
                    }
                }
                (200, op)
            }
            ("POST", Some("deleteInstances")) => {
                let skip = body["skipInstancesOnValidationError"]
                    .as_bool()
                    .unwrap_or(false);
                let wanted: Vec<String> = body["instances"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|v| v.as_str().map(partial))
                    .collect();
                let m = &self.migs[key];
                let mut names = Vec::new();
                for w in &wanted {
                    let name = w.rsplit('/').next().unwrap_or("");
                    match m.instances.iter().find(|i| i.name == name) {
                        Some(i) if i.deleting.is_none() => names.push(name.to_string()),
                        _ if skip => {}
                        _ => {
                            return (
                                400,
                                error_body(
                                    400,
                                    "invalid",
                                    &format!(
                                        "Instance '{w}' is not a member of the group or is already being deleted"
                                    ),
                                ),
                            );
                        }
                    }
                }
                let (op, apply) = self.start_op(
                    &scope,
                    "compute.instanceGroupManagers.deleteInstances",
                    key,
                    path,
                    rid,
                );
                if apply {
                    let clock = self.clock;
                    let m = self.migs.get_mut(key).unwrap();
                    for i in m.instances.iter_mut().filter(|i| names.contains(&i.name)) {
                        i.deleting = Some(clock);
                    }
                    m.target_size -= names.len() as u32;
                }
                (200, op)
            }
            _ => (
                400,
                error_body(
                    400,
                    "invalid",
                    &format!("the double does not serve {method} {path}"),
                ),
            ),
        }
    }
}

/// What a new group looks like.
#[derive(Clone, Debug)]
pub struct MigSpec {
    pub project: String,
    pub name: String,
    pub zone: Option<String>,
    pub region: Option<String>,
    pub target_size: u32,
    pub image: String,
    /// `(min, max)` of an autoscaler in mode OFF targeting the group.
    pub autoscaler: Option<(u32, u32)>,
    /// Put the template in the group's region instead of global (regional groups only).
    pub regional_template: bool,
    /// `updatePolicy.type`: `OPPORTUNISTIC` (GKE's) or `PROACTIVE`.
    pub update_policy: &'static str,
    /// The autoscaler's `autoscalingPolicy.mode` (`OFF` for rota's use).
    pub autoscaler_mode: &'static str,
}

impl GcpDouble {
    pub async fn start() -> GcpDouble {
        let state = Arc::new(Mutex::new(State {
            clock: Duration::from_secs(3600),
            polls_to_done: 2,
            page_size: 2,
            ..State::default()
        }));
        let s = state.clone();
        let server = Loopback::serve(move |req| {
            let s = s.clone();
            async move { serve(&s, req).await }
        })
        .await;
        GcpDouble {
            url: server.url.clone(),
            state,
            server,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }

    /// Publish an image as `images.get` answers it: `status` READY, PENDING or FAILED,
    /// `deprecated` a deprecation state (DEPRECATED, OBSOLETE, DELETED) or none, `arch`
    /// X86_64 or ARM64. Returns its partial path (what a fleet repo writes).
    pub fn add_image(
        &self,
        project: &str,
        name: &str,
        status: &str,
        deprecated: Option<&str>,
        arch: &str,
    ) -> String {
        self.add_family_image(
            project,
            name,
            ("acme-general", "2026-11-20T08:00:00.000-08:00"),
            status,
            deprecated,
            arch,
        )
    }

    /// [`Self::add_image`] in `family`, created at `created` (RFC 3339, as Compute writes it).
    pub fn add_family_image(
        &self,
        project: &str,
        name: &str,
        (family, created): (&str, &str),
        status: &str,
        deprecated: Option<&str>,
        arch: &str,
    ) -> String {
        let key = format!("projects/{project}/global/images/{name}");
        let mut i = json!({
            "kind": "compute#image",
            "id": "4242424242424242",
            "creationTimestamp": created,
            "name": name,
            "family": family,
            "selfLink": link(&key),
            "sourceType": "RAW",
            "status": status,
            "architecture": arch,
            "diskSizeGb": "20",
            "archiveSizeBytes": "1234567890",
            "storageLocations": ["us"],
        });
        if let Some(d) = deprecated {
            i["deprecated"] = json!({"state": d, "replacement": link(&format!("projects/{project}/global/images/{name}-next"))});
        }
        self.with(|s| s.images.insert(key.clone(), i));
        key
    }

    /// Create a template booting `image`; returns its partial path.
    pub fn add_template(
        &self,
        project: &str,
        region: Option<&str>,
        name: &str,
        image: &str,
    ) -> String {
        self.link().add_template(project, region, name, image)
    }

    /// Create a group (with its template, and its autoscaler if asked) whose instances have
    /// already booted. Returns the group's partial path.
    pub fn add_mig(&self, spec: &MigSpec) -> String {
        self.link().add_mig(spec)
    }

    /// Replace the labels of group `mig`'s instance template (`properties.labels`).
    pub fn label_template(&self, mig: &str, labels: &[(&str, &str)]) {
        self.with(|s| {
            let t = s.migs[mig].template.clone();
            s.templates.get_mut(&t).unwrap()["properties"]["labels"] = labels
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect::<serde_json::Map<_, _>>()
                .into();
        });
    }

    /// Let the cloud act for `d`: instances boot, deleted ones go away.
    pub fn advance(&self, d: Duration) {
        self.with(|s| {
            s.clock += d;
            s.reconcile();
        });
    }

    pub fn inject(&self, fault: Fault) {
        self.with(|s| s.faults.push(fault));
    }

    /// The next mutation whose path contains `path_contains` is accepted, and its operation
    /// ends DONE with error `code` (and no effect).
    pub fn fail_next_operation(
        &self,
        path_contains: &str,
        code: &str,
        message: &str,
        http_status: u16,
    ) {
        self.with(|s| {
            s.op_failures.push((
                path_contains.into(),
                code.into(),
                message.into(),
                http_status,
            ))
        });
    }

    /// From now on, creations in `zone` (every zone: `""`) fail with `code` and `message`, as
    /// Compute reports a stock-out or a quota shortage: per instance, in `lastAttempt`, the
    /// instance staying `CREATING`. Instances already failing keep failing until
    /// [`GcpDouble::end_stock_out`].
    pub fn stock_out(&self, zone: &str, code: &str, message: &str) {
        self.with(|s| {
            s.stock_outs.push(StockOut {
                zone: zone.into(),
                code: code.into(),
                message: message.into(),
            })
        });
    }

    /// Capacity is back: the group's retries succeed and the instances boot from now on.
    pub fn end_stock_out(&self) {
        self.with(|s| {
            s.stock_outs.clear();
            let clock = s.clock;
            for m in s.migs.values_mut() {
                for i in &mut m.instances {
                    if i.failing.take().is_some() {
                        i.created = clock;
                    }
                }
            }
        });
    }

    /// A handle on the double's groups for another double that drives them (the GKE
    /// double makes and sizes a node pool's groups here, as GKE does in Compute).
    pub fn link(&self) -> ComputeLink {
        ComputeLink(self.state.clone())
    }

    /// Instance names of a group, with whether each is being deleted.
    pub fn instances(&self, mig: &str) -> Vec<(String, bool)> {
        self.with(|s| {
            s.migs[mig]
                .instances
                .iter()
                .map(|i| (i.name.clone(), i.deleting.is_some()))
                .collect()
        })
    }

    /// Serve one request as if it came over HTTP (`path` after `/compute/v1/`, with its query):
    /// for tests of the double's own behaviour, where rota would not send the request.
    pub fn serve_direct(&self, method: &str, path: &str, body: Value) -> (u16, Value) {
        let uri: hyper::Uri = format!("/compute/v1/{path}").parse().unwrap();
        let q = query(&uri);
        let path = uri.path().strip_prefix("/compute/v1/").unwrap().to_string();
        self.with(|s| s.handle(method, &path, &q, &body))
    }

    /// Polls an operation takes to report DONE.
    pub fn set_polls_to_done(&self, n: u32) {
        self.with(|s| s.polls_to_done = n);
    }

    /// Requests served so far, as `METHOD path`.
    pub fn requests(&self) -> Vec<String> {
        self.with(|s| s.requests.clone())
    }

    pub fn template_names(&self) -> Vec<String> {
        self.with(|s| s.templates.keys().cloned().collect())
    }

    pub fn target_size(&self, mig: &str) -> u32 {
        self.with(|s| s.migs[mig].target_size)
    }
}

async fn serve(state: &Mutex<State>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let method = req.method().as_str().to_string();
    let uri = req.uri().clone();
    let q = query(&uri);
    let bytes = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let path = uri.path().strip_prefix("/compute/v1/");
    let parsed: Result<Value, String> = if bytes.is_empty() {
        Ok(Value::Null)
    } else {
        serde_json::from_slice(&bytes).map_err(|e| e.to_string())
    };
    let mut s = state.lock().unwrap();
    let (status, v) = match (&parsed, path) {
        (Err(e), _) => (
            400,
            error_body(
                400,
                "parseError",
                &format!("This API does not support parsing form-encoded input: {e}"),
            ),
        ),
        (Ok(_), None) => (
            404,
            error_body(404, "notFound", &format!("no such path {}", uri.path())),
        ),
        (Ok(body), Some(path)) => s.handle(&method, path, &q, body),
    };
    // Every answer, malformed requests' included, goes to the schema check.
    s.answers.push(super::api_schemas::Exchange {
        method: method.clone(),
        path: path.unwrap_or(uri.path()).to_string(),
        status,
        request: parsed.unwrap_or(Value::Null),
        response: v.clone(),
        headers: Vec::new(),
    });
    reply(status, v)
}

/// The Compute double's groups as another double reaches them ([`GcpDouble::link`]): what
/// it does here is the service's own doing, not a request rota sent, so it is not recorded
/// as one.
#[derive(Clone)]
pub struct ComputeLink(Arc<Mutex<State>>);

impl ComputeLink {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.0.lock().unwrap())
    }

    /// Create a template booting `image`; returns its partial path.
    pub fn add_template(
        &self,
        project: &str,
        region: Option<&str>,
        name: &str,
        image: &str,
    ) -> String {
        let key = match region {
            Some(r) => format!("projects/{project}/regions/{r}/instanceTemplates/{name}"),
            None => format!("projects/{project}/global/instanceTemplates/{name}"),
        };
        let mut t = json!({
            "kind": "compute#instanceTemplate",
            "id": "1234567890123",
            "creationTimestamp": "2026-11-01T00:00:00.000-07:00",
            "name": name,
            "description": "",
            "selfLink": link(&key),
            "properties": {
                "machineType": "e2-standard-4",
                "canIpForward": false,
                "tags": {"items": ["gke-node"]},
                "labels": {"goog-gke-node": ""},
                "disks": [{
                    "kind": "compute#attachedDisk", "type": "PERSISTENT", "mode": "READ_WRITE",
                    "deviceName": "persistent-disk-0", "boot": true, "autoDelete": true,
                    "initializeParams": {"sourceImage": image, "diskSizeGb": "100", "diskType": "pd-balanced"}
                }],
                "networkInterfaces": [{"kind": "compute#networkInterface", "network": link(&format!("projects/{project}/global/networks/default")),
                    "accessConfigs": [{"kind": "compute#accessConfig", "type": "ONE_TO_ONE_NAT", "name": "external-nat", "networkTier": "PREMIUM"}]}],
                "metadata": {"kind": "compute#metadata", "fingerprint": "9mR5tY3rE0w=", "items": [{"key": "cluster-name", "value": "dev"}]},
                "serviceAccounts": [{"email": "nodes@acme.iam.gserviceaccount.com", "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}],
                "scheduling": {"onHostMaintenance": "MIGRATE", "automaticRestart": true, "preemptible": false, "provisioningModel": "STANDARD"},
            }
        });
        if let Some(r) = region {
            t["region"] = json!(link(&format!("projects/{project}/regions/{r}")));
        }
        self.with(|s| s.templates.insert(key.clone(), t));
        key
    }

    /// Create a group (with its template, and its autoscaler if asked) whose instances have
    /// already booted. Returns the group's partial path.
    pub fn add_mig(&self, spec: &MigSpec) -> String {
        let scope = match (&spec.zone, &spec.region) {
            (Some(z), _) => format!("zones/{z}"),
            (None, Some(r)) => format!("regions/{r}"),
            _ => panic!("a MIG needs a zone or a region"),
        };
        let template_region = spec
            .regional_template
            .then_some(spec.region.as_deref())
            .flatten();
        let template = self.add_template(
            &spec.project,
            template_region,
            &format!("{}-tpl", spec.name),
            &spec.image,
        );
        let key = format!(
            "projects/{}/{scope}/instanceGroupManagers/{}",
            spec.project, spec.name
        );
        self.with(|s| {
            let autoscaler = spec.autoscaler.map(|(min, max)| {
                let akey = format!("projects/{}/{scope}/autoscalers/{}-as", spec.project, spec.name);
                let loc_key = if spec.zone.is_some() { "zone" } else { "region" };
                let mut a = json!({
                    "kind": "compute#autoscaler",
                    "id": "3141592653",
                    "name": format!("{}-as", spec.name),
                    "target": link(&key),
                    "autoscalingPolicy": {"minNumReplicas": min, "maxNumReplicas": max, "coolDownPeriodSec": 60,
                        "cpuUtilization": {"utilizationTarget": 0.6, "predictiveMethod": "NONE"}, "mode": spec.autoscaler_mode},
                    "status": "ACTIVE",
                    "selfLink": link(&akey),
                });
                a[loc_key] = json!(link(&format!("projects/{}/{scope}", spec.project)));
                s.autoscalers.insert(akey.clone(), a);
                akey
            });
            s.migs.insert(
                key.clone(),
                Mig {
                    project: spec.project.clone(),
                    name: spec.name.clone(),
                    scope: scope.clone(),
                    template,
                    target_size: spec.target_size,
                    autoscaler,
                    instances: Vec::new(),
                    update_policy: spec.update_policy.to_string(),
                },
            );
            // Born booted: created one boot time ago (the clock starts an hour in).
            s.reconcile();
            let born = s.clock - BOOT;
            for i in &mut s.migs.get_mut(&key).unwrap().instances {
                i.created = born;
            }
        });
        key
    }

    /// A booted group of `size` instances in `zone` (its template on `image`); its partial
    /// path.
    pub fn add_group(
        &self,
        project: &str,
        zone: &str,
        name: &str,
        size: u32,
        image: &str,
    ) -> String {
        self.add_mig(&MigSpec {
            project: project.into(),
            name: name.into(),
            zone: Some(zone.into()),
            region: None,
            target_size: size,
            image: image.into(),
            autoscaler: None,
            regional_template: false,
            update_policy: "OPPORTUNISTIC",
            autoscaler_mode: "OFF",
        })
    }

    /// `resize` of the group at `mig` (its partial path) to `size`, as the service asks it.
    pub fn resize(&self, mig: &str, size: u32) {
        let (status, v) = self.0.lock().unwrap().handle(
            "POST",
            &format!("{mig}/resize"),
            &HashMap::from([("size".to_string(), size.to_string())]),
            &Value::Null,
        );
        assert_eq!(status, 200, "{v}");
    }

    pub fn target_size(&self, mig: &str) -> u32 {
        self.0.lock().unwrap().migs[mig].target_size
    }
}
