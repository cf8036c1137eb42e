//! An EKS double for what moto does not serve: a node group's version updates
//! (`UpdateNodegroupVersion`, `ListUpdates`, `DescribeUpdate`), beside `DescribeNodegroup`
//! and `UpdateNodegroupConfig`, on a loopback port. The node groups' launch templates stay
//! in moto (the EKS client's EC2 calls go there): the double holds each node group's
//! template ID and version only.
//!
//! It answers as EKS documents: an update `InProgress` until the test ends it
//! ([`EksDouble::finish`]), then `Successful` (the node group on the update's version) or
//! `Failed` (`NodeCreationFailure`, the node group left on its version); a second update
//! while one runs refused with `ResourceInUseException` (HTTP 409); a `clientRequestToken`
//! seen before answered with the update it started. Every exchange is held to botocore's EKS
//! model when the double is dropped (`api_schemas`, `Api::Eks`).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{Value, json};

use super::loopback::Loopback;

use super::api_schemas::{Api, Exchange, check_on_drop};

#[derive(Clone, Debug)]
struct Nodegroup {
    template_id: String,
    version: String,
    desired: i64,
    update_config: Value,
}

#[derive(Clone, Debug)]
struct Update {
    id: String,
    nodegroup: (String, String),
    token: Option<String>,
    kind: &'static str,
    status: &'static str,
    version: Option<String>,
    created: i64,
    errors: Vec<Value>,
}

#[derive(Default)]
struct State {
    nodegroups: BTreeMap<(String, String), Nodegroup>,
    updates: Vec<Update>,
    exchanges: Vec<Exchange>,
    clock: i64,
}

pub struct EksDouble {
    pub url: String,
    state: Arc<Mutex<State>>,
    server: Loopback,
}

impl Drop for EksDouble {
    fn drop(&mut self) {
        self.server.stop();
        let exchanges = std::mem::take(&mut self.state.lock().unwrap().exchanges);
        check_on_drop(Api::Eks, exchanges);
    }
}

impl EksDouble {
    pub async fn start() -> EksDouble {
        let state = Arc::new(Mutex::new(State {
            clock: 1_764_000_000,
            ..State::default()
        }));
        let s = state.clone();
        let server = Loopback::serve(move |req| {
            let s = s.clone();
            async move { serve(&s, req).await }
        })
        .await;
        EksDouble {
            url: server.url.clone(),
            state,
            server,
        }
    }

    /// A node group of `desired` nodes on launch template `template_id` at `version`.
    pub fn add_nodegroup(
        &self,
        cluster: &str,
        name: &str,
        template_id: &str,
        version: &str,
        desired: i64,
    ) {
        self.state.lock().unwrap().nodegroups.insert(
            (cluster.into(), name.into()),
            Nodegroup {
                template_id: template_id.into(),
                version: version.into(),
                desired,
                update_config: json!({"maxUnavailable": 1}),
            },
        );
    }

    /// End the running version update: `Successful` (the node group moves to its version)
    /// or `Failed` (`NodeCreationFailure`; the node group stays where it was).
    pub fn finish(&self, ok: bool) {
        let mut s = self.state.lock().unwrap();
        let s = &mut *s;
        let u = s
            .updates
            .iter_mut()
            .rev()
            .find(|u| u.status == "InProgress" && u.kind == "VersionUpdate")
            .expect("a version update in progress");
        if ok {
            u.status = "Successful";
            let ng = s.nodegroups.get_mut(&u.nodegroup).unwrap();
            ng.version = u.version.clone().unwrap();
        } else {
            u.status = "Failed";
            u.errors = vec![json!({
                "errorCode": "NodeCreationFailure",
                "errorMessage": "Instances failed to join the kubernetes cluster",
                "resourceIds": ["i-0a1b2c3d4e5f60718"],
            })];
        }
    }

    /// The node group's launch template version now.
    pub fn version_of(&self, cluster: &str, name: &str) -> String {
        self.state.lock().unwrap().nodegroups[&(cluster.to_string(), name.to_string())]
            .version
            .clone()
    }

    /// The bodies of every `UpdateNodegroupVersion` request, in order.
    pub fn version_requests(&self) -> Vec<Value> {
        self.state
            .lock()
            .unwrap()
            .exchanges
            .iter()
            .filter(|x| x.method == "POST" && x.path.ends_with("/update-version"))
            .map(|x| x.request.clone())
            .collect()
    }

    /// How many requests went to `method` paths containing `part`.
    pub fn calls(&self, method: &str, part: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .exchanges
            .iter()
            .filter(|x| x.method == method && x.path.contains(part))
            .count()
    }
}

fn update_json(u: &Update) -> Value {
    let mut params = Vec::new();
    if let Some(v) = &u.version {
        params.push(json!({"type": "LaunchTemplateVersion", "value": v}));
    }
    json!({
        "id": u.id,
        "status": u.status,
        "type": u.kind,
        "params": params,
        "createdAt": u.created,
        "errors": u.errors,
    })
}

fn nodegroup_json(cluster: &str, name: &str, ng: &Nodegroup, updating: bool) -> Value {
    json!({
        "nodegroupName": name,
        "clusterName": cluster,
        "nodegroupArn": format!("arn:aws:eks:us-east-1:123456789012:nodegroup/{cluster}/{name}/0a1b2c3d"),
        "version": "1.31",
        "status": if updating { "UPDATING" } else { "ACTIVE" },
        "capacityType": "ON_DEMAND",
        "scalingConfig": {"minSize": 1, "maxSize": ng.desired + 2, "desiredSize": ng.desired},
        "subnets": ["subnet-0a1b2c3d"],
        "nodeRole": "arn:aws:iam::123456789012:role/eks-nodes",
        "launchTemplate": {"id": ng.template_id, "version": ng.version},
        "updateConfig": ng.update_config,
        "resources": {"autoScalingGroups": [{"name": format!("eks-{name}-0a1b2c3d")}]},
        "createdAt": 1_764_000_000,
    })
}

fn error(status: u16, code: &str, message: &str) -> (u16, Value, Option<String>) {
    (status, json!({"message": message}), Some(code.to_string()))
}

/// The answer to one request: status, body, and the error type header for errors.
fn answer(
    s: &mut State,
    method: &str,
    path: &str,
    query: &str,
    body: &Value,
) -> (u16, Value, Option<String>) {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let nodegroup_q = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("nodegroupName="))
        .map(str::to_string);
    s.clock += 1;
    match (method, parts.as_slice()) {
        ("GET", ["clusters", c, "node-groups", n]) => {
            let key = (c.to_string(), n.to_string());
            let Some(ng) = s.nodegroups.get(&key) else {
                return error(
                    404,
                    "ResourceNotFoundException",
                    "No node group found for name",
                );
            };
            let updating = s
                .updates
                .iter()
                .any(|u| u.nodegroup == key && u.status == "InProgress");
            (
                200,
                json!({"nodegroup": nodegroup_json(c, n, ng, updating)}),
                None,
            )
        }
        ("POST", ["clusters", c, "node-groups", n, "update-config"]) => {
            let key = (c.to_string(), n.to_string());
            let Some(ng) = s.nodegroups.get_mut(&key) else {
                return error(
                    404,
                    "ResourceNotFoundException",
                    "No node group found for name",
                );
            };
            if let Some(cfg) = body.get("updateConfig") {
                ng.update_config = cfg.clone();
            }
            let u = Update {
                id: format!("cfg-{}", s.clock),
                nodegroup: key,
                token: body["clientRequestToken"].as_str().map(str::to_string),
                kind: "ConfigUpdate",
                status: "Successful",
                version: None,
                created: s.clock,
                errors: Vec::new(),
            };
            s.updates.push(u.clone());
            (200, json!({"update": update_json(&u)}), None)
        }
        ("POST", ["clusters", c, "node-groups", n, "update-version"]) => {
            update_version(s, (c.to_string(), n.to_string()), body)
        }
        ("GET", ["clusters", c, "updates"]) => {
            let ids: Vec<&str> = s
                .updates
                .iter()
                .filter(|u| u.nodegroup.0 == *c && Some(&u.nodegroup.1) == nodegroup_q.as_ref())
                .map(|u| u.id.as_str())
                .collect();
            (200, json!({"updateIds": ids}), None)
        }
        ("GET", ["clusters", c, "updates", id]) => {
            match s
                .updates
                .iter()
                .find(|u| u.id == *id && u.nodegroup.0 == *c)
            {
                Some(u) => (200, json!({"update": update_json(u)}), None),
                None => error(404, "ResourceNotFoundException", "No update found"),
            }
        }
        _ => error(
            404,
            "ResourceNotFoundException",
            "the EKS double does not serve this",
        ),
    }
}

/// `UpdateNodegroupVersion`: the update a token started before, or a refusal while one
/// runs, or a new update `InProgress`.
fn update_version(
    s: &mut State,
    key: (String, String),
    body: &Value,
) -> (u16, Value, Option<String>) {
    if !s.nodegroups.contains_key(&key) {
        return error(
            404,
            "ResourceNotFoundException",
            "No node group found for name",
        );
    }
    let token = body["clientRequestToken"].as_str().map(str::to_string);
    if let Some(seen) = s
        .updates
        .iter()
        .find(|u| token.is_some() && u.token == token && u.nodegroup == key)
    {
        return (200, json!({"update": update_json(seen)}), None);
    }
    if s.updates
        .iter()
        .any(|u| u.nodegroup == key && u.status == "InProgress")
    {
        return error(
            409,
            "ResourceInUseException",
            "Nodegroup is currently being updated",
        );
    }
    let u = Update {
        id: format!("ver-{}", s.clock),
        nodegroup: key,
        token,
        kind: "VersionUpdate",
        status: "InProgress",
        version: body["launchTemplate"]["version"]
            .as_str()
            .map(str::to_string),
        created: s.clock,
        errors: Vec::new(),
    };
    s.updates.push(u.clone());
    (200, json!({"update": update_json(&u)}), None)
}

async fn serve(state: &Arc<Mutex<State>>, req: Request<Incoming>) -> Response<Full<bytes::Bytes>> {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let raw = req.into_body().collect().await.unwrap().to_bytes();
    let body: Value = if raw.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&raw).unwrap_or(Value::Null)
    };
    let mut s = state.lock().unwrap();
    let (status, answer, code) = answer(&mut s, &method, &path, &query, &body);
    s.exchanges.push(Exchange {
        method: method.clone(),
        path: if query.is_empty() {
            path.clone()
        } else {
            format!("{path}?{query}")
        },
        status,
        request: body,
        response: answer.clone(),
        headers: code
            .iter()
            .map(|c| ("x-amzn-errortype".to_string(), c.clone()))
            .collect(),
    });
    let mut resp = Response::builder()
        .status(status)
        .header("content-type", "application/json");
    if let Some(c) = code {
        resp = resp.header("x-amzn-errortype", c);
    }
    resp.body(Full::new(bytes::Bytes::from(answer.to_string())))
        .unwrap()
}
