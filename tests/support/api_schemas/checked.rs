//! A double held to its service's published description request by request (the GKE and
//! AKS doubles): every request is checked as it arrives and one the description does not
//! allow (a field it does not name, a value of the wrong type, a path no method serves) is
//! refused in the service's own error shape, naming the problems, as the service refuses a
//! malformed request; every exchange, answers included, is checked again when the double is
//! dropped. What a double answers, and how its service words a refusal, are its own
//! ([`Service`]); the server, the checks and the record of what was served are here.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{HeaderMap, Request, Response, Uri};
use serde_json::Value;

use super::{Api, Exchange, check_on_drop, check_request};
use crate::support::loopback::Loopback;

/// One double's service: its state and how it answers.
pub trait Service: Default + Send + 'static {
    /// The description its requests and answers are held to (one `check_request` serves).
    const API: Api;

    /// The request's path as the description's checker reads it (GKE: from `v1/`, without
    /// the query; AKS: with its query, which carries the api-version).
    fn path(uri: &Uri) -> String;

    /// The service's answer to a request its description does not allow (`problems` joined).
    fn refuse(problems: &str) -> (u16, Value);

    /// The answer to a request that conforms: status and body (`null` for none).
    fn answer(
        &mut self,
        method: &str,
        path: &str,
        headers: &HeaderMap,
        body: &Value,
    ) -> (u16, Value);
}

struct Served<S> {
    service: S,
    exchanges: Vec<Exchange>,
    /// Requests refused for breaking the description (tests assert it stays empty, or not).
    refused: Vec<String>,
}

/// A running double of `S` on a loopback port.
pub struct CheckedDouble<S: Service> {
    pub url: String,
    served: Arc<Mutex<Served<S>>>,
    server: Loopback,
}

impl<S: Service> Drop for CheckedDouble<S> {
    fn drop(&mut self) {
        self.server.stop();
        let exchanges = std::mem::take(&mut self.served.lock().unwrap().exchanges);
        check_on_drop(S::API, exchanges);
    }
}

impl<S: Service> CheckedDouble<S> {
    /// A double of `S` in its default state, serving.
    pub async fn start() -> CheckedDouble<S> {
        let served = Arc::new(Mutex::new(Served {
            service: S::default(),
            exchanges: Vec::new(),
            refused: Vec::new(),
        }));
        let s = served.clone();
        let server = Loopback::serve(move |req| {
            let s = s.clone();
            async move { serve(&s, req).await }
        })
        .await;
        CheckedDouble {
            url: server.url.clone(),
            served,
            server,
        }
    }

    /// Read or change the service's state (a double's own setup and assertions).
    pub fn with<R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        f(&mut self.served.lock().unwrap().service)
    }

    /// The requests refused for breaking the description.
    pub fn refused(&self) -> Vec<String> {
        self.served.lock().unwrap().refused.clone()
    }

    /// Every (method, path) served, in order.
    pub fn calls(&self) -> Vec<String> {
        let s = self.served.lock().unwrap();
        s.exchanges
            .iter()
            .map(|x| format!("{} {}", x.method, x.path))
            .collect()
    }
}

async fn serve<S: Service>(
    served: &Arc<Mutex<Served<S>>>,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let method = req.method().to_string();
    let path = S::path(req.uri());
    let headers = req.headers().clone();
    let bytes = req.into_body().collect().await.unwrap().to_bytes();
    let request: Value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or(Value::String("<not JSON>".into()))
    };
    let problems = check_request(S::API, &method, &path, &request);
    let mut s = served.lock().unwrap();
    let (status, response) = if problems.is_empty() {
        s.service.answer(&method, &path, &headers, &request)
    } else {
        s.refused.extend(problems.iter().cloned());
        S::refuse(&problems.join("; "))
    };
    s.exchanges.push(Exchange {
        method,
        path,
        status,
        request,
        response: response.clone(),
        headers: vec![],
    });
    let body = if response.is_null() {
        String::new()
    } else {
        response.to_string()
    };
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(body.into()))
        .unwrap()
}
