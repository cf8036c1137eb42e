//! The API server itself: `ApiServer`, one per cluster over a `Store`, as a tower `Service`
//! (routing, the verbs, watches, faults and admission on each request). Its parts are the
//! sibling files; `http` serves it over loopback.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::Frame;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use super::{admission, discovery, faults, patch, table};
use crate::eviction::{self, DeleteOptions};
use crate::store::{ApiError, ListOptions, ResourceType, Store, WatchEvent};

/// The response body of the simulated API server (streamed for watches).
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// The API server of one simulated cluster. Cheap to clone.
#[derive(Clone)]
pub struct ApiServer {
    store: Store,
    speed: f64,
    bookmark_every: Duration,
    /// Injected faults (`None`: a healthy control plane).
    faults: Option<faults::ApiFaults>,
    /// Bearer tokens and their users ([`admission`]).
    users: admission::Users,
}

type Query = HashMap<String, String>;

fn parse_query(q: &str) -> Query {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn json_response(code: u16, v: &Value) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(v.to_string())).boxed_unsync())
        .expect("valid response")
}

/// Requests injected faults may hit: resource requests, not discovery, not watches.
fn faultable(req: &Request<Bytes>) -> bool {
    let path = req.uri().path();
    let resource = path.split('/').filter(|s| !s.is_empty()).count()
        > if path.starts_with("/apis/") { 3 } else { 2 };
    let watch = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    (path.starts_with("/api/") || path.starts_with("/apis/")) && resource && !watch
}

fn not_found_path() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

fn method_not_allowed() -> ApiError {
    ApiError::new(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
}

/// Request bodies are JSON; apply bodies may be YAML.
fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body).or_else(|je| {
        serde_yaml::from_slice::<Value>(body).map_err(|_| {
            ApiError::bad_request(format!(
                "the body of the request could not be decoded: {je}"
            ))
        })
    })
}

/// Which object a request addresses.
struct Target<'a> {
    rt: ResourceType,
    ns: Option<&'a str>,
    name: Option<&'a str>,
    sub: Option<&'a str>,
}

impl ApiServer {
    pub fn new(store: Store) -> Self {
        ApiServer {
            store,
            speed: 1.0,
            bookmark_every: Duration::from_secs(60),
            faults: None,
            users: admission::Users::default(),
        }
    }

    /// Authenticate these bearer tokens as their users (see [`admission`]).
    pub fn with_users(mut self, users: admission::Users) -> Self {
        self.users = users;
        self
    }

    /// Answer requests with the faults `f` draws (throttling, 5xx, lost responses).
    pub fn with_faults(mut self, f: faults::ApiFaults) -> Self {
        self.faults = Some(f);
        self
    }

    /// Grace periods (and other server-side delays) are divided by `speed`.
    pub fn with_speed(mut self, speed: f64) -> Self {
        self.speed = speed;
        self
    }

    /// How often open watches that asked for bookmarks get one (default 60 s, as a real API
    /// server roughly does).
    pub fn with_bookmark_interval(mut self, every: Duration) -> Self {
        self.bookmark_every = every;
        self
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Answers one request.
    pub async fn handle(&self, req: Request<Bytes>) -> Response<Body> {
        let mut lose = false;
        if let Some(f) = &self.faults
            && faultable(&req)
            && let Some(e) = f.cut_off()
        {
            return json_response(e.code, &e.to_status());
        }
        if let Some(f) = &self.faults
            && faultable(&req)
            && f.applies_to(req.uri().path())
        {
            if let Some(e) = f.before() {
                return json_response(e.code, &e.to_status());
            }
            lose = req.method() != Method::GET && f.lose_response();
        }
        let user = match self.users.user_of(req.headers()) {
            Ok(u) => u,
            Err(e) => return json_response(e.code, &e.to_status()),
        };
        let answer = match self.route(req, &user).await {
            Ok(r) => r,
            Err(e) => json_response(e.code, &e.to_status()),
        };
        if lose {
            // Handled (the write took effect), but the client never hears so.
            let e = faults::lost_response();
            return json_response(e.code, &e.to_status());
        }
        answer
    }

    async fn route(
        &self,
        req: Request<Bytes>,
        user: &admission::UserInfo,
    ) -> Result<Response<Body>, ApiError> {
        let path = req.uri().path().to_string();
        let q = parse_query(req.uri().query().unwrap_or(""));
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let get = req.method() == Method::GET;
        let ok = |v: Value| Ok(json_response(200, &v));
        match segs.as_slice() {
            [] if get => ok(discovery::root_paths(&self.store)),
            ["version"] if get => ok(discovery::version(&self.store)),
            ["healthz" | "livez" | "readyz"] if get => Ok(Response::builder()
                .header("content-type", "text/plain")
                .body(Full::new(Bytes::from_static(b"ok")).boxed_unsync())
                .expect("valid")),
            ["metrics"] if get => Ok(Response::builder()
                .header("content-type", "text/plain; version=0.0.4")
                .body(
                    Full::new(Bytes::from(self.store.timekeeping().metrics_text())).boxed_unsync(),
                )
                .expect("valid")),
            ["api"] if get => ok(discovery::core_versions()),
            ["apis"] if get => ok(discovery::group_list(&self.store)),
            ["apis", g] if get => discovery::group(&self.store, g)
                .map(|v| json_response(200, &v))
                .ok_or_else(not_found_path),
            ["api", v] if get => discovery::resource_list(&self.store, "", v)
                .map(|v| json_response(200, &v))
                .ok_or_else(not_found_path),
            ["apis", g, v] if get => discovery::resource_list(&self.store, g, v)
                .map(|v| json_response(200, &v))
                .ok_or_else(not_found_path),
            ["apis", "authentication.k8s.io", "v1", "selfsubjectreviews"]
                if req.method() == Method::POST =>
            {
                Ok(json_response(201, &admission::self_subject_review(user)))
            }
            ["openapi", "v3"] if get => ok(discovery::openapi_v3_root(&self.store)),
            ["openapi", "v3", gv @ ..] if get => {
                discovery::openapi_v3_gv(&self.store, &gv.join("/"))
                    .map(|v| json_response(200, &v))
                    .ok_or_else(not_found_path)
            }
            ["api", v, rest @ ..] => {
                let t = self.target("", v, rest)?;
                self.resource(t, &q, req, user).await
            }
            ["apis", g, v, rest @ ..] => {
                let t = self.target(g, v, rest)?;
                self.resource(t, &q, req, user).await
            }
            _ => Err(not_found_path()),
        }
    }

    fn target<'a>(
        &self,
        group: &str,
        version: &str,
        rest: &[&'a str],
    ) -> Result<Target<'a>, ApiError> {
        let (ns, plural, tail): (Option<&str>, &str, &[&str]) = match rest {
            ["namespaces", ns, plural, tail @ ..]
                if !(tail.is_empty() && matches!(*plural, "status" | "finalize")) =>
            {
                (Some(ns), plural, tail)
            }
            [plural, tail @ ..] => (None, plural, tail),
            [] => return Err(not_found_path()),
        };
        if tail.len() > 2 {
            return Err(not_found_path());
        }
        let rt = self
            .store
            .resource_type(group, plural)
            .filter(|rt| rt.version == version)
            .ok_or_else(not_found_path)?;
        let name = tail.first().copied();
        if (rt.namespaced && ns.is_none() && name.is_some()) || (!rt.namespaced && ns.is_some()) {
            return Err(not_found_path());
        }
        Ok(Target {
            rt,
            ns,
            name,
            sub: tail.get(1).copied(),
        })
    }

    async fn resource(
        &self,
        t: Target<'_>,
        q: &Query,
        req: Request<Bytes>,
        user: &admission::UserInfo,
    ) -> Result<Response<Body>, ApiError> {
        let (parts, body) = req.into_parts();
        let store = &self.store;
        let rt = &t.rt;
        let ok = |v: Value| Ok(json_response(200, &v));
        let opts = ListOptions {
            label_selector: q.get("labelSelector").filter(|s| !s.is_empty()).cloned(),
            field_selector: q.get("fieldSelector").filter(|s| !s.is_empty()).cloned(),
        };
        let accept = parts
            .headers
            .get("accept")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        match (&parts.method, t.name, t.sub) {
            (&Method::GET, None, None) => self.list_or_watch(rt, t.ns, &opts, q, &accept),
            (&Method::POST, None, None) => self.create(rt, t.ns, &body, q, user),
            (&Method::DELETE, None, None) => self.delete_collection(rt, t.ns, &opts),
            (&Method::GET, Some(name), None | Some("status")) => {
                if t.sub == Some("status") && !rt.status {
                    return Err(not_found_path());
                }
                let o = store.get(rt, t.ns, name)?;
                if accept.contains("as=Table") {
                    return ok(self.table(rt, &[o], &store.resource_version()));
                }
                ok(o)
            }
            (&Method::PUT, Some(name), sub @ (None | Some("status"))) => {
                self.update(rt, t.ns, name, sub == Some("status"), &body, q, user)
            }
            (&Method::PATCH, Some(name), sub @ (None | Some("status"))) => {
                if sub == Some("status") && !rt.status {
                    return Err(not_found_path());
                }
                let ct = parts
                    .headers
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_string();
                let (code, v) =
                    self.patch(rt, t.ns, name, &ct, &body, q, sub == Some("status"), user)?;
                Ok(json_response(code, &v))
            }
            (&Method::DELETE, Some(name), None) => {
                let mut opts =
                    DeleteOptions::from_json(Some(&parse_body(&body)?).filter(|v| !v.is_null()));
                if let Some(g) = q.get("gracePeriodSeconds").and_then(|g| g.parse().ok()) {
                    opts.grace_period_seconds = Some(g);
                }
                // kube-rs sends dryRun in the DeleteOptions body, kubectl in the query.
                if dry_run(q) || opts.dry_run {
                    return ok(store.get(rt, t.ns, name)?);
                }
                ok(self.delete_one(rt, t.ns, name, &opts)?)
            }
            (&Method::POST, Some(name), Some("eviction")) if rt == &ResourceType::pods() => {
                let ev = parse_body(&body)?;
                let st = eviction::evict(store, t.ns.unwrap_or(""), name, &ev, self.speed)?;
                Ok(json_response(201, &st))
            }
            (method, Some(name), Some("scale")) if scalable(rt) => {
                let method = method.clone();
                let body = parse_body(&body)?;
                let ct = parts
                    .headers
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                self.scale(rt, t.ns, name, &method, &ct, body)
            }
            (_, _, Some(s)) if !matches!(s, "status" | "eviction") => Err(not_found_path()),
            _ => Err(method_not_allowed()),
        }
    }

    /// `GET` of a collection: a watch when asked, else one page of the list (as a Table when
    /// the client asks for one, as kubectl does).
    fn list_or_watch(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
        q: &Query,
        accept: &str,
    ) -> Result<Response<Body>, ApiError> {
        let ok = |v: Value| Ok(json_response(200, &v));
        if matches!(q.get("watch").map(String::as_str), Some("true" | "1")) {
            return self.watch(rt, ns, opts, q);
        }
        let (items, rv, next) = self.list_paged(rt, ns, opts, q)?;
        if accept.contains("as=Table") {
            let mut tbl = self.table(rt, &items, &rv);
            if let Some(n) = &next {
                tbl["metadata"]["continue"] = json!(n);
            }
            return ok(tbl);
        }
        let mut meta = json!({"resourceVersion": rv});
        if let Some(n) = next {
            meta["continue"] = json!(n);
        }
        ok(
            json!({"kind": format!("{}List", rt.kind), "apiVersion": rt.api_version(),
                  "metadata": meta, "items": items}),
        )
    }

    /// `POST` to a collection: an object created (admitted first), or what would be with
    /// `dryRun`. Namespaced kinds are created under /namespaces/<ns>/ only.
    fn create(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        body: &Bytes,
        q: &Query,
        user: &admission::UserInfo,
    ) -> Result<Response<Body>, ApiError> {
        let store = &self.store;
        if rt.namespaced && ns.is_none() {
            return Err(method_not_allowed());
        }
        let mut obj = prepare_create(rt, parse_body(body)?)?;
        admission::admit(rt, None, &obj, user)?;
        if dry_run(q) {
            let name = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !name.is_empty() && store.get(rt, ns, name).is_ok() {
                return Err(ApiError::already_exists(rt, name));
            }
            if let Some(ns) = ns {
                store.get(&ResourceType::namespaces(), None, ns)?;
                obj["metadata"]["namespace"] = json!(ns);
            }
            return Ok(json_response(201, &obj));
        }
        let created = store.create(rt, ns, obj)?;
        Ok(json_response(201, &created))
    }

    /// `DELETE` of a collection: each selected object deleted as one `DELETE` would; the
    /// list of those deleted.
    fn delete_collection(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<Response<Body>, ApiError> {
        let ok = |v: Value| Ok(json_response(200, &v));
        let (items, rv) = self.store.list(rt, ns, opts)?;
        let mut gone = Vec::new();
        for o in items {
            let o_ns = o.pointer("/metadata/namespace").and_then(Value::as_str);
            let name = o
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            if let Ok(d) = self.delete_one(rt, o_ns, name, &DeleteOptions::default()) {
                gone.push(d);
            }
        }
        ok(
            json!({"kind": format!("{}List", rt.kind), "apiVersion": rt.api_version(),
                  "metadata": {"resourceVersion": rv}, "items": gone}),
        )
    }

    /// `PUT` of an object or its status: the name and (for custom resources) the
    /// resourceVersion checked, the object admitted, then stored or, with `dryRun`, computed.
    #[allow(clippy::too_many_arguments)]
    fn update(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        status: bool,
        body: &Bytes,
        q: &Query,
        user: &admission::UserInfo,
    ) -> Result<Response<Body>, ApiError> {
        let store = &self.store;
        let ok = |v: Value| Ok(json_response(200, &v));
        let obj = parse_body(body)?;
        let body_name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let custom = !ResourceType::builtins().contains(rt);
        if custom
            && obj
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            return Err(ApiError::invalid(
                rt,
                name,
                "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
            ));
        }
        if status && !rt.status {
            return Err(not_found_path());
        }
        if dry_run(q) {
            // What the update would store, computed in a write that is then abandoned.
            return dry(store.modify(rt, ns, name, |cur| {
                if let Some(rv) = obj
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    && !rv.is_empty()
                    && Some(rv)
                        != cur
                            .pointer("/metadata/resourceVersion")
                            .and_then(Value::as_str)
                {
                    return Err(ApiError::stale(rt, name));
                }
                let mut next = if status { cur.clone() } else { obj.clone() };
                if status {
                    next["status"] = obj.get("status").cloned().unwrap_or(Value::Null);
                } else if rt.status {
                    next["status"] = cur.get("status").cloned().unwrap_or(Value::Null);
                }
                next["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"].clone();
                Err(abandon(next))
            }));
        }
        if status {
            ok(store.update_status(rt, ns, obj)?)
        } else {
            let old = store.get(rt, ns, name).ok();
            admission::admit(rt, old.as_ref(), &obj, user)?;
            ok(store.update(rt, ns, obj)?)
        }
    }

    /// Server-side printing: the CRD's printer columns for custom resources that declare
    /// them, the built-in columns otherwise.
    fn table(&self, rt: &ResourceType, items: &[Value], rv: &str) -> Value {
        let crd = format!("{}.{}", rt.plural, rt.group);
        let printer = self
            .store
            .get(&ResourceType::crds(), None, &crd)
            .ok()
            .and_then(|c| {
                c.pointer("/spec/versions")?
                    .as_array()?
                    .iter()
                    .find(|v| v.get("name").and_then(Value::as_str) == Some(rt.version.as_str()))?
                    .get("additionalPrinterColumns")?
                    .as_array()
                    .cloned()
            })
            .filter(|cols| !cols.is_empty());
        match printer {
            Some(cols) => table::custom_table(items, rv, self.store.now(), &cols),
            None => table::table(rt, items, rv, self.store.now()),
        }
    }

    /// A list, paged when the client asks (`limit`, `continue`). Continue tokens are
    /// "<first page rv>:<namespace>:<name>" (names never hold ':'); every page reports the
    /// first page's resourceVersion, so a watch from it replays what changed while paging.
    fn list_paged(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
        q: &Query,
    ) -> Result<(Vec<Value>, String, Option<String>), ApiError> {
        let limit = q
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0);
        let token = q.get("continue").filter(|c| !c.is_empty());
        if limit.is_none() && token.is_none() {
            let (items, rv) = self.store.list(rt, ns, opts)?;
            return Ok((items, rv, None));
        }
        let parsed = match token {
            Some(tok) => {
                let mut parts = tok.splitn(3, ':');
                match (parts.next(), parts.next(), parts.next()) {
                    (Some(rv), Some(a), Some(b)) if rv.parse::<u64>().is_ok() => {
                        Some((rv.to_string(), a.to_string(), b.to_string()))
                    }
                    _ => {
                        return Err(ApiError::bad_request(format!(
                            "invalid continue token {tok:?}"
                        )));
                    }
                }
            }
            None => None,
        };
        let after = parsed.as_ref().map(|(_, a, b)| (a.as_str(), b.as_str()));
        let page = self
            .store
            .list_page(rt, ns, opts, limit.unwrap_or(usize::MAX), after)?;
        let (items, now_rv, next) = (page.items, page.resource_version, page.next);
        let rv = parsed.map(|(rv, _, _)| rv).unwrap_or(now_rv);
        let next = next.map(|(a, b)| format!("{rv}:{a}:{b}"));
        Ok((items, rv, next))
    }

    /// The `scale` subresource (autoscaling/v1 Scale) of Deployments, ReplicaSets and
    /// StatefulSets: what `kubectl scale` reads and writes.
    fn scale(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        method: &Method,
        content_type: &str,
        body: Value,
    ) -> Result<Response<Body>, ApiError> {
        let want: Option<(i64, Option<String>)> = match *method {
            Method::GET => None,
            Method::PUT => Some((
                body.pointer("/spec/replicas")
                    .and_then(Value::as_i64)
                    .ok_or_else(|| ApiError::invalid(rt, name, "spec.replicas: Required value"))?,
                body.pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            )),
            Method::PATCH => {
                let mut cur = to_scale(&self.store.get(rt, ns, name)?);
                match content_type.split(';').next().unwrap_or("").trim() {
                    "application/json-patch+json" => patch::json_patch(&mut cur, &body)?,
                    _ => patch::merge(&mut cur, &body),
                }
                let n = cur
                    .pointer("/spec/replicas")
                    .and_then(Value::as_i64)
                    .ok_or_else(|| ApiError::invalid(rt, name, "spec.replicas: Required value"))?;
                Some((n, None))
            }
            _ => return Err(method_not_allowed()),
        };
        let obj = match want {
            None => self.store.get(rt, ns, name)?,
            Some((n, _)) if n < 0 => {
                return Err(ApiError::invalid(
                    rt,
                    name,
                    format!(
                        "spec.replicas: Invalid value: {n}: must be greater than or equal to 0"
                    ),
                ));
            }
            Some((n, rv)) => self.store.modify(rt, ns, name, |o| {
                if let Some(rv) = &rv
                    && o.pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                        != Some(rv)
                {
                    return Err(ApiError::stale(rt, name));
                }
                o["spec"]["replicas"] = json!(n);
                Ok(())
            })?,
        };
        Ok(json_response(200, &to_scale(&obj)))
    }

    fn delete_one(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        if rt == &ResourceType::pods() {
            return eviction::delete_pod(&self.store, ns.unwrap_or(""), name, opts, self.speed);
        }
        if let Some(rv) = &opts.precondition_resource_version {
            let cur = self.store.get(rt, ns, name)?;
            if cur
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                != Some(rv)
            {
                return Err(ApiError::conflict(
                    rt,
                    name,
                    "Precondition failed: ResourceVersion in precondition does not match the object",
                ));
            }
        }
        self.store
            .delete_if(rt, ns, name, opts.precondition_uid.as_deref())
    }

    /// Server-side apply of an object that does not exist yet: created (admitted first), or
    /// what would be with `dryRun`.
    #[allow(clippy::too_many_arguments)]
    fn apply_create(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        p: &Value,
        by: &patch::Applier,
        dry: bool,
        user: &admission::UserInfo,
    ) -> Result<(u16, Value), ApiError> {
        let obj = patch::server_side_apply(rt, name, None, p, by)?;
        let obj = prepare_create(rt, obj)?;
        admission::admit(rt, None, &obj, user)?;
        if dry {
            return Ok((201, obj));
        }
        Ok((201, self.store.create(rt, ns, obj)?))
    }

    #[allow(clippy::too_many_arguments)]
    fn patch(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        content_type: &str,
        body: &Bytes,
        q: &Query,
        status: bool,
        user: &admission::UserInfo,
    ) -> Result<(u16, Value), ApiError> {
        let p = parse_body(body)?;
        let store = &self.store;
        let now = store.timestamp();
        let manager = q.get("fieldManager").cloned();
        let dry = dry_run(q);
        let force = q.get("force").is_some_and(|f| f == "true");
        if content_type == "application/apply-patch+yaml" {
            let Some(manager) = manager.clone().filter(|m| !m.is_empty()) else {
                return Err(ApiError::bad_request(
                    "PATCH, fieldManager is required for apply requests",
                ));
            };
            match store.get(rt, ns, name) {
                Err(e) if e.code == 404 && !status => {
                    let by = patch::Applier {
                        manager: &manager,
                        force,
                        subresource: "",
                        now: &now,
                    };
                    return self.apply_create(rt, ns, name, &p, &by, dry, user);
                }
                Err(e) => return Err(e),
                Ok(_) => {}
            }
        }
        let sub = if status { "status" } else { "" };
        let out = store.modify(rt, ns, name, |cur| {
            let by = patch::Applier {
                manager: manager.as_deref().unwrap_or(""),
                force,
                subresource: sub,
                now: &now,
            };
            let mut next = patched(rt, name, content_type, cur, &p, &by)?;
            // A resourceVersion in the patch is a precondition.
            if let Some(rv) = next
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                && Some(rv)
                    != cur
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
            {
                return Err(ApiError::stale(rt, name));
            }
            if next.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
                return Err(ApiError::bad_request(
                    "the patch may not change metadata.name",
                ));
            }
            if status {
                // The status subresource changes status (and apply bookkeeping) only.
                let mf = next.pointer("/metadata/managedFields").cloned();
                let mut keep = cur.clone();
                match next.get("status") {
                    Some(s) => keep["status"] = s.clone(),
                    None => {
                        keep.as_object_mut().expect("object").remove("status");
                    }
                }
                if let Some(mf) = mf {
                    keep["metadata"]["managedFields"] = mf;
                }
                *cur = keep;
            } else {
                if rt.status {
                    match cur.get("status") {
                        Some(s) => next["status"] = s.clone(),
                        None => {
                            next.as_object_mut().expect("object").remove("status");
                        }
                    }
                }
                admission::admit(rt, Some(cur), &next, user)?;
                *cur = next;
            }
            if dry {
                return Err(abandon(cur.clone()));
            }
            Ok(())
        });
        match out {
            Ok(v) => Ok((200, v)),
            Err(e) if e.code == 0 => Ok((200, e.details.unwrap_or(Value::Null))),
            Err(e) => Err(e),
        }
    }

    fn watch(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
        q: &Query,
    ) -> Result<Response<Body>, ApiError> {
        let bookmarks = q.get("allowWatchBookmarks").is_some_and(|v| v == "true");
        let initial = q.get("sendInitialEvents").is_some_and(|v| v == "true");
        let timeout = q
            .get("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(1800);
        let rv = if initial {
            None
        } else {
            q.get("resourceVersion").map(String::as_str)
        };
        let (tx, body_rx) = tokio::sync::mpsc::channel::<Bytes>(256);
        let line = |v: Value| {
            let mut s = v.to_string();
            s.push('\n');
            Bytes::from(s)
        };
        let bookmark = {
            let rt = rt.clone();
            move |rv: String, end: bool| {
                let mut meta = json!({"resourceVersion": rv});
                if end {
                    meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
                }
                json!({"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.api_version(), "metadata": meta}})
            }
        };
        match self.store.watch_lazy(rt, ns, opts, rv) {
            Err(e) if e.code == 410 => {
                // As a real server: 200, then an ERROR event with the Status.
                let ev = line(json!({"type": "ERROR", "object": e.to_status()}));
                let _ = tx.try_send(ev);
            }
            Err(e) => return Err(e),
            Ok(mut rx) => {
                let store = self.store.clone();
                let every = self.bookmark_every;
                tokio::spawn(async move {
                    let deadline = tokio::time::sleep(Duration::from_secs(timeout));
                    tokio::pin!(deadline);
                    let mut tick =
                        tokio::time::interval_at(tokio::time::Instant::now() + every, every);
                    if initial {
                        // Everything up to now was sent as ADDED under the store lock.
                        let rv = store.resource_version();
                        while let Ok(ev) = rx.try_recv() {
                            if let Some(l) = encode(ev, bookmarks, &bookmark)
                                && tx.send(line(l)).await.is_err()
                            {
                                return;
                            }
                        }
                        if tx.send(line(bookmark(rv, true))).await.is_err() {
                            return;
                        }
                    }
                    loop {
                        tokio::select! {
                            _ = &mut deadline => return,
                            _ = tx.closed() => return,
                            _ = tick.tick(), if bookmarks => {
                                // Read the version first: every event up to it is already in
                                // the channel, so after draining it the bookmark is truthful.
                                let rv = store.resource_version();
                                while let Ok(ev) = rx.try_recv() {
                                    if let Some(l) = encode(ev, bookmarks, &bookmark)
                                        && tx.send(line(l)).await.is_err() {
                                        return;
                                    }
                                }
                                if tx.send(line(bookmark(rv, false))).await.is_err() {
                                    return;
                                }
                            }
                            ev = rx.recv() => match ev {
                                None => return,
                                Some(ev) => {
                                    if let Some(l) = encode(ev, bookmarks, &bookmark)
                                        && tx.send(line(l)).await.is_err() {
                                        return;
                                    }
                                }
                            }
                        }
                    }
                });
            }
        }
        let stream = futures::stream::unfold(body_rx, |mut rx| async move {
            rx.recv()
                .await
                .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
        });
        Ok(Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .header("transfer-encoding", "chunked")
            .body(BodyExt::boxed_unsync(StreamBody::new(stream)))
            .expect("valid response"))
    }
}

/// `?dryRun=All`: validate and compute, store nothing.
/// The object a `PATCH` of media type `content_type` makes of `cur` (JSON patch, merge
/// patch, strategic merge patch for built-in kinds, or server-side apply by `by`).
fn patched(
    rt: &ResourceType,
    name: &str,
    content_type: &str,
    cur: &Value,
    p: &Value,
    by: &patch::Applier,
) -> Result<Value, ApiError> {
    let mut next = cur.clone();
    match content_type {
        "application/json-patch+json" => patch::json_patch(&mut next, p)?,
        "application/merge-patch+json" => patch::merge(&mut next, p),
        "application/strategic-merge-patch+json" => {
            if !ResourceType::builtins().contains(rt) {
                return Err(ApiError::new(
                    415,
                    "UnsupportedMediaType",
                    format!(
                        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (strategic merge patch is not supported for custom resources like {})",
                        rt.qualified()
                    ),
                ));
            }
            patch::strategic_merge(&mut next, p)?
        }
        "application/apply-patch+yaml" => {
            next = patch::server_side_apply(rt, name, Some(cur), p, by)?;
        }
        other => {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {other:?})"
                ),
            ));
        }
    }
    Ok(next)
}

fn dry_run(q: &Query) -> bool {
    q.get("dryRun").is_some_and(|v| v == "All")
}

/// Aborts a `Store::modify` after computing the object a dry run answers with (code 0 is
/// never a real API error).
fn abandon(would_be: Value) -> ApiError {
    let mut e = ApiError::new(0, "DryRun", "");
    e.details = Some(would_be);
    e
}

/// The answer to a dry-run update: the abandoned object, or the real error.
fn dry(r: Result<Value, ApiError>) -> Result<Response<Body>, ApiError> {
    match r {
        Ok(v) => Ok(json_response(200, &v)),
        Err(e) if e.code == 0 => Ok(json_response(200, &e.details.unwrap_or(Value::Null))),
        Err(e) => Err(e),
    }
}

fn scalable(rt: &ResourceType) -> bool {
    rt.group == "apps"
        && matches!(
            rt.plural.as_str(),
            "deployments" | "replicasets" | "statefulsets"
        )
}

/// A workload as an autoscaling/v1 Scale.
fn to_scale(o: &Value) -> Value {
    let mut meta = json!({});
    for k in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = o.pointer(&format!("/metadata/{k}")) {
            meta[k] = v.clone();
        }
    }
    let selector = o
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": meta,
           "spec": {"replicas": o.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)},
           "status": {"replicas": o.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0),
                      "selector": selector}})
}

fn encode(
    ev: WatchEvent,
    bookmarks: bool,
    bookmark: &impl Fn(String, bool) -> Value,
) -> Option<Value> {
    Some(match ev {
        WatchEvent::Added(o) => json!({"type": "ADDED", "object": o}),
        WatchEvent::Modified(o) => json!({"type": "MODIFIED", "object": o}),
        WatchEvent::Deleted(o) => json!({"type": "DELETED", "object": o}),
        WatchEvent::Bookmark(rv) => {
            if !bookmarks {
                return None;
            }
            bookmark(rv, false)
        }
    })
}

/// What the API server does to an object before storing a create: a new pod starts Pending;
/// kinds whose status a controller owns start without one.
fn prepare_create(rt: &ResourceType, mut obj: Value) -> Result<Value, ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request("the object must be a JSON object"));
    }
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("uid");
    }
    if rt == &ResourceType::pods() {
        obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
    } else if rt.status
        && !matches!(
            rt.plural.as_str(),
            "nodes" | "namespaces" | "customresourcedefinitions"
        )
    {
        obj.as_object_mut().expect("object").remove("status");
    }
    Ok(obj)
}

impl<B> tower::Service<Request<B>> for ApiServer
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: std::fmt::Display,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let server = self.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let bytes = match body.collect().await {
                Ok(c) => c.to_bytes(),
                Err(e) => {
                    let err = ApiError::bad_request(format!("reading the request body: {e}"));
                    return Ok(json_response(400, &err.to_status()));
                }
            };
            Ok(server.handle(Request::from_parts(parts, bytes)).await)
        })
    }
}
