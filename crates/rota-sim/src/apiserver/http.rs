//! Serving an `ApiServer` over loopback HTTP (plain HTTP/1.1; kubectl accepts an `http://`
//! server in its kubeconfig).

use std::net::SocketAddr;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::server::ApiServer;
use crate::requestlog::{Counted, RequestLog};

/// A running HTTP listener; dropping it stops accepting (open connections finish on their own).
pub struct HttpServer {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl HttpServer {
    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Binds 127.0.0.1 on a free port and serves `server` there until the returned handle drops.
pub async fn serve_http(server: ApiServer) -> std::io::Result<HttpServer> {
    serve_http_logged(server, None).await
}

/// [`serve_http`], writing a line per request to `log` (named `name`) when one is given.
pub async fn serve_http_logged(
    server: ApiServer,
    log: Option<(RequestLog, String)>,
) -> std::io::Result<HttpServer> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let server = server.clone();
            let log = log.clone();
            let svc = service_fn(move |req: hyper::Request<Incoming>| {
                let mut s = server.clone();
                let log = log.clone();
                async move {
                    let Some((log, name)) = log else {
                        return tower::Service::call(&mut s, req).await;
                    };
                    let method = req.method().to_string();
                    let target = req
                        .uri()
                        .path_and_query()
                        .map_or_else(|| req.uri().path().to_string(), |p| p.to_string());
                    let resp = tower::Service::call(&mut s, req).await?;
                    let status = resp.status().as_u16();
                    Ok(resp.map(|b| {
                        http_body_util::BodyExt::boxed_unsync(Counted::new(
                            b, log, &name, &method, &target, status,
                        ))
                    }))
                }
            });
            tokio::spawn(async move {
                // A client going away mid-watch is normal; nothing to report.
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok(HttpServer { addr, task })
}
