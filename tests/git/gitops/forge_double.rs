//! A local HTTP double of the GitHub, Gitea and GitLab commit-status APIs: it keeps statuses
//! per commit like the forges do (latest per context wins in the combined view), paginates,
//! checks the token, mimics GitLab's refusal to repeat a state, and records every request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use crate::support::loopback::Loopback;

#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub body: Option<Value>,
}

#[derive(Default)]
struct State {
    /// sha -> statuses in creation order (context, state, description, target_url).
    statuses: HashMap<String, Vec<Value>>,
    requests: Vec<Recorded>,
    fail_next: Option<(u16, Vec<(String, String)>)>,
}

#[derive(Clone)]
pub struct ForgeDouble {
    state: Arc<Mutex<State>>,
    pub base: String,
    /// Serves until the double's last clone is dropped.
    _server: Arc<Loopback>,
}

impl ForgeDouble {
    /// Starts the double; `auth` is the exact Authorization / PRIVATE-TOKEN value expected.
    pub async fn start(auth: (&'static str, String)) -> ForgeDouble {
        let state: Arc<Mutex<State>> = Arc::default();
        let st = Arc::clone(&state);
        let server = Loopback::serve(move |req| {
            let st = Arc::clone(&st);
            let auth = auth.clone();
            async move { handle(&st, &auth, req).await }
        })
        .await;
        ForgeDouble {
            state,
            base: server.url.clone(),
            _server: Arc::new(server),
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }

    pub fn posts(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == "POST")
            .map(|r| r.body.unwrap())
            .collect()
    }

    pub fn clear_requests(&self) {
        self.state.lock().unwrap().requests.clear();
    }

    /// Adds statuses another tool posted (e.g. CI), to exercise pagination and filtering.
    pub fn seed(&self, sha: &str, n: usize) {
        let mut s = self.state.lock().unwrap();
        let v = s.statuses.entry(sha.to_string()).or_default();
        for i in 0..n {
            v.push(json!({"context": format!("ci/check-{i}"), "state": "success", "description": "ok", "target_url": null}));
        }
    }

    /// The next request fails with this status and headers.
    pub fn fail_next(&self, status: u16, headers: &[(&str, &str)]) {
        self.state.lock().unwrap().fail_next = Some((
            status,
            headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ));
    }
}

fn respond(status: u16, body: Value) -> http::Response<Full<Bytes>> {
    let mut r = http::Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = http::StatusCode::from_u16(status).unwrap();
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    r
}

fn query(uri: &http::Uri, key: &str) -> Option<usize> {
    uri.query()?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.parse().ok()).flatten()
    })
}

/// Latest status per context, newest first (how the forges' combined views answer).
fn latest(all: &[Value]) -> Vec<Value> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for s in all.iter().rev() {
        let key = s["context"].as_str().unwrap().to_string();
        if seen.insert(key) {
            out.push(s.clone());
        }
    }
    out
}

fn page(items: Vec<Value>, per_page: usize, page: usize) -> Vec<Value> {
    items
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect()
}

async fn handle(
    st: &Mutex<State>,
    auth: &(&'static str, String),
    req: http::Request<hyper::body::Incoming>,
) -> http::Response<Full<Bytes>> {
    let method = req.method().to_string();
    let uri = req.uri().clone();
    let path = uri.path().to_string();
    let authorized =
        req.headers().get(auth.0).and_then(|v| v.to_str().ok()) == Some(auth.1.as_str());
    let bytes = req.into_body().collect().await.unwrap().to_bytes();
    let body: Option<Value> = if bytes.is_empty() {
        None
    } else {
        Some(serde_json::from_slice(&bytes).unwrap())
    };
    let mut s = st.lock().unwrap();
    s.requests.push(Recorded {
        method: method.clone(),
        path: path.clone(),
        body: body.clone(),
    });
    if let Some((status, headers)) = s.fail_next.take() {
        let mut r = respond(status, json!({"message": "API rate limit exceeded"}));
        for (k, v) in headers {
            r.headers_mut().insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        return r;
    }
    if !authorized {
        return respond(401, json!({"message": "Bad credentials"}));
    }
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    // GitHub: repos/o/r/statuses/sha | repos/o/r/commits/sha/status; Gitea: the same under api/v1.
    let gh = if parts.first() == Some(&"api") && parts.get(1) == Some(&"v1") {
        &parts[2..]
    } else {
        &parts[..]
    };
    match (method.as_str(), gh) {
        ("POST", ["repos", _, _, "statuses", sha]) => {
            let b = body.unwrap();
            let state = b["state"].as_str().unwrap().to_string();
            let stored = json!({
                "context": b["context"], "state": state, "status": state,
                "description": b["description"], "target_url": b.get("target_url").cloned().unwrap_or(Value::Null),
            });
            s.statuses
                .entry(sha.to_string())
                .or_default()
                .push(stored.clone());
            return respond(201, stored);
        }
        ("GET", ["repos", _, _, "commits", sha, "status"]) => {
            let all = latest(s.statuses.get(*sha).map(Vec::as_slice).unwrap_or(&[]));
            let total = all.len();
            let per = query(&uri, "per_page")
                .or(query(&uri, "limit"))
                .unwrap_or(30);
            let p = query(&uri, "page").unwrap_or(1);
            return respond(
                200,
                json!({"state": "pending", "total_count": total, "statuses": page(all, per, p)}),
            );
        }
        _ => {}
    }
    match (method.as_str(), &parts[..]) {
        ("POST", ["api", "v4", "projects", _, "statuses", sha]) => {
            let b = body.unwrap();
            let name = b["name"].as_str().unwrap().to_string();
            let state = b["state"].as_str().unwrap().to_string();
            let list = s.statuses.entry(sha.to_string()).or_default();
            let current = latest(list)
                .into_iter()
                .find(|x| x["context"] == name.as_str());
            if current.is_some_and(|c| c["state"] == state.as_str()) {
                return respond(
                    400,
                    json!({"message": format!("Cannot transition status via :enqueue from :{state}")}),
                );
            }
            let stored = json!({"context": name, "name": name, "state": state, "status": state,
                "description": b["description"], "target_url": b.get("target_url").cloned().unwrap_or(Value::Null)});
            list.push(stored.clone());
            respond(201, stored)
        }
        (
            "GET",
            [
                "api",
                "v4",
                "projects",
                _,
                "repository",
                "commits",
                sha,
                "statuses",
            ],
        ) => {
            let all = latest(s.statuses.get(*sha).map(Vec::as_slice).unwrap_or(&[]));
            let per = query(&uri, "per_page").unwrap_or(20);
            let p = query(&uri, "page").unwrap_or(1);
            respond(200, Value::Array(page(all, per, p)))
        }
        _ => respond(404, json!({"message": "Not Found"})),
    }
}
