//! A stand-in for the fleet's Prometheus, on loopback: the example repo's Prometheus gates
//! (`error-rate`, `gpu-errors`) point at `http://prometheus.monitoring:9090`, which does not
//! exist next to the simulated fleet. The demo commits, visibly, a change of that address to
//! this server, which answers every instant query (`/api/v1/query`, the Prometheus HTTP API)
//! with one sample of value 0: no 5xx responses, no GPU XID errors, a healthy fleet.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;

/// The running stand-in; stops when dropped.
pub struct Served {
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn serve() -> std::io::Result<Served> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(
                    |req: http::Request<hyper::body::Incoming>| async move {
                        Ok::<_, Infallible>(answer(req.uri()))
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok(Served { url, task })
}

fn answer(uri: &http::Uri) -> http::Response<Full<Bytes>> {
    let (status, body) = if uri.path() == "/api/v1/query" {
        let now = chrono::Utc::now().timestamp();
        (
            200,
            serde_json::json!({
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": {}, "value": [now, "0"]}]}
            }),
        )
    } else {
        (
            404,
            serde_json::json!({"status": "error", "errorType": "not_found", "error": "only /api/v1/query"}),
        )
    };
    http::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("static response")
}
