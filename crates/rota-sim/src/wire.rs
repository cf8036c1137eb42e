//! [`NodeGroups`] over loopback HTTP: how a `rota controller` process reaches the simulated
//! cloud of a separate `rota sim serve` process.
//!
//! The simulated cloud lives inside `rota sim serve` (its boots, shutdowns and faults run on
//! that process's clock), so a controller in another process cannot embed it. `serve` puts
//! any `NodeGroups` behind five JSON POST endpoints on 127.0.0.1 (`/describe`, `/setImage`,
//! `/setCapacity`, `/setMax`, `/terminate`); [`HttpNodeGroups`] is the client, itself a `NodeGroups`, so
//! the controller uses it exactly like a real provider. Errors travel as the `CloudError`
//! fields, so a quota error on the server is a quota error in the controller. A connection
//! failure is `Transient`. Loopback only: this is a test double's wire, not a cloud API.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::requestlog::Counted;
use rota_core::cloud::{CloudError, CloudErrorKind, GroupRef, GroupState, NodeGroups};

/// The calls a provider names in its errors, so that a name read off the wire keeps its
/// `&'static str` form.
const CALLS: &[&str] = &[
    "DescribeGroup",
    "SetTemplateImage",
    "SetDesiredCapacity",
    "TerminateInstance",
    "CheckImage",
    "FindImage",
];

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireError {
    kind: CloudErrorKind,
    call: String,
    group: String,
    message: String,
}

impl From<&CloudError> for WireError {
    fn from(e: &CloudError) -> Self {
        WireError {
            kind: e.kind,
            call: e.call.to_string(),
            group: e.group.clone(),
            message: e.message.clone(),
        }
    }
}

impl From<WireError> for CloudError {
    fn from(w: WireError) -> Self {
        CloudError {
            kind: w.kind,
            call: CALLS
                .iter()
                .find(|c| **c == w.call)
                .copied()
                .unwrap_or("RemoteCall"),
            group: w.group,
            message: w.message,
        }
    }
}

/// A running endpoint; dropping it stops serving.
pub struct Served {
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serve `groups` on a free loopback port.
pub async fn serve(groups: Arc<dyn NodeGroups>) -> std::io::Result<Served> {
    serve_logged(groups, None).await
}

/// [`serve`], writing a line per call to the simulated fleet's request log when one is given
/// (the `agent_scale` bench counts cloud calls from it).
pub async fn serve_logged(
    groups: Arc<dyn NodeGroups>,
    log: Option<crate::requestlog::RequestLog>,
) -> std::io::Result<Served> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let task = tokio::spawn(async move {
        // Connections live in a set owned by this task: aborting the task (dropping `Served`)
        // drops the set and with it every open keep-alive connection, so a stopped endpoint
        // really stops answering instead of serving pooled connections.
        let mut connections = tokio::task::JoinSet::new();
        loop {
            while connections.try_join_next().is_some() {}
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let groups = groups.clone();
            let log = log.clone();
            connections.spawn(async move {
                let svc = service_fn(move |req: hyper::Request<Incoming>| {
                    let groups = groups.clone();
                    let log = log.clone();
                    async move {
                        let path = req.uri().path().to_string();
                        let method = req.method().to_string();
                        let body = req.into_body().collect().await.map(|b| b.to_bytes());
                        let (code, v) = match body {
                            Ok(b) => handle(groups.as_ref(), &path, &b).await,
                            Err(e) => (400, json!({"message": e.to_string()})),
                        };
                        Ok::<_, std::convert::Infallible>(
                            hyper::Response::builder()
                                .status(code)
                                .header("content-type", "application/json")
                                .body({
                                    let body = Full::new(Bytes::from(v.to_string()));
                                    match log {
                                        Some(log) => {
                                            Counted::new(body, log, "cloud", &method, &path, code)
                                        }
                                        None => Counted::unlogged(body),
                                    }
                                })
                                .expect("a valid response"),
                        )
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok(Served { url, task })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Req {
    group: GroupRef,
    #[serde(default)]
    image: String,
    #[serde(default)]
    desired: u32,
    #[serde(default)]
    max: Option<u32>,
    #[serde(default)]
    instance_id: String,
    #[serde(default)]
    decrement: bool,
    #[serde(default)]
    arch: rota_core::cloud::Arch,
}

/// `/findImage`'s body: a query, not a group.
#[derive(Deserialize)]
struct FindReq {
    query: rota_core::cloud::ImageQuery,
}

async fn handle(groups: &dyn NodeGroups, path: &str, body: &[u8]) -> (u16, Value) {
    let out = if path == "/findImage" {
        let req: FindReq = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => return (400, json!({"message": format!("bad request: {e}")})),
        };
        groups
            .find_image(&req.query)
            .await
            .map(|f| serde_json::to_value(f).expect("a found image serializes"))
    } else {
        match group_call(groups, path, body).await {
            Ok(out) => out,
            Err(answer) => return answer,
        }
    };
    match out {
        Ok(v) => (200, v),
        Err(e) => (
            409,
            serde_json::to_value(WireError::from(&e)).expect("an error serializes"),
        ),
    }
}

/// A call about one group; `Err` is an answer of its own (a bad request, no such endpoint).
async fn group_call(
    groups: &dyn NodeGroups,
    path: &str,
    body: &[u8],
) -> Result<Result<Value, CloudError>, (u16, Value)> {
    let req: Req = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return Err((400, json!({"message": format!("bad request: {e}")}))),
    };
    let out = match path {
        "/describe" => groups
            .describe(&req.group)
            .await
            .map(|s| serde_json::to_value(s).expect("a group state serializes")),
        "/checkImage" => groups
            .check_image(&req.group, &req.image, req.arch)
            .await
            .map(|c| serde_json::to_value(c).expect("an image check serializes")),
        "/setImage" => groups
            .set_image(&req.group, &req.image)
            .await
            .map(|_| json!({})),
        "/setCapacity" => groups
            .set_capacity(&req.group, req.desired, req.max)
            .await
            .map(|_| json!({})),
        "/setMax" => match req.max {
            Some(max) => groups.set_max(&req.group, max).await.map(|_| json!({})),
            None => return Err((400, json!({"message": "bad request: /setMax needs max"}))),
        },
        "/terminate" => groups
            .terminate(&req.group, &req.instance_id, req.decrement)
            .await
            .map(|_| json!({})),
        _ => return Err((404, json!({"message": format!("no endpoint {path}")}))),
    };
    Ok(out)
}

/// The client: a [`NodeGroups`] whose calls go to a [`serve`]d endpoint.
#[derive(Clone)]
pub struct HttpNodeGroups {
    url: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl HttpNodeGroups {
    pub fn new(url: &str) -> Self {
        HttpNodeGroups {
            url: url.trim_end_matches('/').to_string(),
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    async fn call(
        &self,
        call: &'static str,
        path: &str,
        group: &GroupRef,
        body: Value,
    ) -> Result<Value, CloudError> {
        self.call_for(call, path, group.to_string(), body).await
    }

    /// A call about `subject` (a group, or an image query), named so in its errors.
    async fn call_for(
        &self,
        call: &'static str,
        path: &str,
        subject: String,
        body: Value,
    ) -> Result<Value, CloudError> {
        let transient =
            |message: String| CloudError::about(CloudErrorKind::Transient, call, &subject, message);
        let req = hyper::Request::post(format!("{}{path}", self.url))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| transient(e.to_string()))?;
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| transient(format!("{}: {e}", self.url)))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| transient(e.to_string()))?
            .to_bytes();
        match status {
            200 => serde_json::from_slice(&bytes).map_err(|e| transient(e.to_string())),
            409 => Err(serde_json::from_slice::<WireError>(&bytes)
                .map(CloudError::from)
                .unwrap_or_else(|e| transient(e.to_string()))),
            s => Err(transient(format!(
                "HTTP {s}: {}",
                String::from_utf8_lossy(&bytes)
            ))),
        }
    }
}

#[async_trait]
impl NodeGroups for HttpNodeGroups {
    async fn describe(&self, group: &GroupRef) -> Result<GroupState, CloudError> {
        let v = self
            .call("DescribeGroup", "/describe", group, json!({"group": group}))
            .await?;
        serde_json::from_value(v).map_err(|e| {
            CloudError::new(
                CloudErrorKind::Transient,
                "DescribeGroup",
                group,
                e.to_string(),
            )
        })
    }

    async fn check_image(
        &self,
        group: &GroupRef,
        image: &str,
        arch: rota_core::cloud::Arch,
    ) -> Result<rota_core::cloud::ImageCheck, CloudError> {
        let v = self
            .call(
                "CheckImage",
                "/checkImage",
                group,
                json!({"group": group, "image": image, "arch": arch}),
            )
            .await?;
        serde_json::from_value(v).map_err(|e| {
            CloudError::new(
                CloudErrorKind::Transient,
                "CheckImage",
                group,
                e.to_string(),
            )
        })
    }

    async fn find_image(
        &self,
        query: &rota_core::cloud::ImageQuery,
    ) -> Result<rota_core::cloud::FoundImage, CloudError> {
        let v = self
            .call_for(
                "FindImage",
                "/findImage",
                query.to_string(),
                json!({ "query": query }),
            )
            .await?;
        serde_json::from_value(v).map_err(|e| {
            CloudError::query(CloudErrorKind::Transient, "FindImage", query, e.to_string())
        })
    }

    async fn set_image(&self, group: &GroupRef, image: &str) -> Result<(), CloudError> {
        self.call(
            "SetTemplateImage",
            "/setImage",
            group,
            json!({"group": group, "image": image}),
        )
        .await
        .map(drop)
    }

    async fn set_capacity(
        &self,
        group: &GroupRef,
        desired: u32,
        max: Option<u32>,
    ) -> Result<(), CloudError> {
        self.call(
            "SetDesiredCapacity",
            "/setCapacity",
            group,
            json!({"group": group, "desired": desired, "max": max}),
        )
        .await
        .map(drop)
    }

    async fn set_max(&self, group: &GroupRef, max: u32) -> Result<(), CloudError> {
        self.call(
            "SetMaxSize",
            "/setMax",
            group,
            json!({"group": group, "max": max}),
        )
        .await
        .map(drop)
    }

    async fn terminate(
        &self,
        group: &GroupRef,
        instance_id: &str,
        decrement: bool,
    ) -> Result<(), CloudError> {
        self.call(
            "TerminateInstance",
            "/terminate",
            group,
            json!({"group": group, "instanceId": instance_id, "decrement": decrement}),
        )
        .await
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::{GroupSpec, SimCloud};
    use crate::faults::{Call, FaultProfile, ScriptedError, ScriptedFault};

    #[tokio::test]
    async fn calls_and_errors_cross_the_wire_unchanged() {
        let cloud = SimCloud::new(1, FaultProfile::default(), 1000.0);
        let g = GroupRef::Aws {
            region: "us-east-1".into(),
            auto_scaling_group: "general".into(),
        };
        cloud
            .create_group(GroupSpec::new(g.clone(), 2, "ami-1").prebooted())
            .unwrap();
        let served = serve(Arc::new(cloud.clone())).await.unwrap();
        let url = served.url.clone();
        let remote = HttpNodeGroups::new(&url);
        let local = cloud.describe(&g).await.unwrap();
        assert_eq!(remote.describe(&g).await.unwrap(), local);
        remote.set_image(&g, "ami-2").await.unwrap();
        remote.set_capacity(&g, 3, Some(4)).await.unwrap();
        let s = cloud.describe(&g).await.unwrap();
        assert_eq!(
            (s.template_image.as_str(), s.desired, s.max),
            ("ami-2", 3, 4)
        );
        cloud.inject(ScriptedFault {
            call: Call::SetCapacity,
            group: None,
            error: ScriptedError::Quota,
            times: 1,
        });
        let e = remote.set_capacity(&g, 4, None).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Quota);
        assert_eq!(e.call, "SetDesiredCapacity");
        let missing = GroupRef::Aws {
            region: "us-east-1".into(),
            auto_scaling_group: "nope".into(),
        };
        assert_eq!(
            remote.describe(&missing).await.unwrap_err().kind,
            CloudErrorKind::NotFound
        );
        drop(served);
        // A new client (the old one's pooled connection outlives the listener).
        let down = HttpNodeGroups::new(&url).describe(&g).await.unwrap_err();
        assert_eq!(down.kind, CloudErrorKind::Transient);
    }
}
