//! The HTTP edge of `rota ui`: a small read-only server (hyper, GET and HEAD only) for the
//! fleet page, its live fragment, the commit view, the same data as JSON, and the embedded
//! assets. It faces a network, so it caps concurrent connections, times out slow request
//! headers and whole connections, and sends headers that keep the page from being framed or
//! sniffed; nothing is loaded from elsewhere (no CDN: it works offline and in-cluster).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::load::{self, RepoAt};
use super::{UiError, html};

const CSS: &str = include_str!("assets/rota.css");
const JS: &str = include_str!("assets/rota.js");

/// What the server protects itself with.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// A client must send its request headers within this.
    pub header_timeout: Duration,
    /// A connection (keep-alive included) is closed after this.
    pub connection_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 64,
            header_timeout: Duration::from_secs(10),
            connection_timeout: Duration::from_secs(60),
        }
    }
}

/// The page's data source and limits; cheap to clone.
#[derive(Debug, Clone)]
pub struct Ui {
    at: Arc<RepoAt>,
    limits: Limits,
}

/// A commit id as links carry it: 4 to 64 hex digits (nothing else reaches `revparse`).
fn commit_id(s: &str) -> Option<&str> {
    (4..=64)
        .contains(&s.len())
        .then_some(s)
        .filter(|s| s.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl Ui {
    pub fn new(at: RepoAt, limits: Limits) -> Self {
        Ui {
            at: Arc::new(at),
            limits,
        }
    }

    /// Binds `addr` and serves in the background; returns the bound address (port 0 picks
    /// one). The task stops when the returned handle is aborted or dropped with the runtime.
    pub async fn spawn(
        &self,
        addr: SocketAddr,
    ) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), UiError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| UiError::Listen { addr, source: e })?;
        let local = listener
            .local_addr()
            .map_err(|e| UiError::Listen { addr, source: e })?;
        let me = self.clone();
        Ok((local, tokio::spawn(me.serve(listener))))
    }

    /// Serves `listener` until the task is dropped.
    pub async fn serve(self, listener: TcpListener) {
        let slots = Arc::new(Semaphore::new(self.limits.max_connections.max(1)));
        loop {
            // Take a slot before accepting: at the cap, new clients wait in the backlog
            // instead of each costing a task.
            let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                return;
            };
            let stream = match listener.accept().await {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "ui: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let me = self.clone();
            tokio::spawn(async move {
                let _slot = slot;
                let limits = me.limits;
                let svc = service_fn(move |req| {
                    let me = me.clone();
                    async move { Ok::<_, Infallible>(me.respond(&req).await) }
                });
                let conn = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(limits.header_timeout)
                    .serve_connection(TokioIo::new(stream), svc);
                let _ = tokio::time::timeout(limits.connection_timeout, conn).await;
            });
        }
    }

    async fn respond(&self, req: &Request<Incoming>) -> Response<Full<Bytes>> {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return reply(
                StatusCode::METHOD_NOT_ALLOWED,
                PLAIN,
                "read-only: GET only\n".into(),
            );
        }
        let path = req.uri().path();
        let now = chrono::Utc::now();
        match path {
            "/" | "/fragment" => {
                let page = load::page(&self.at, now).await;
                let recent = load::recent(&self.at).await;
                match (page, recent) {
                    (Ok(p), Ok(r)) if path == "/" => {
                        reply(StatusCode::OK, HTML, html::page(&p, &r))
                    }
                    (Ok(p), Ok(r)) => reply(StatusCode::OK, HTML, html::fragment(&p, &r)),
                    (Err(e), _) | (_, Err(e)) => failed(&e, path == "/"),
                }
            }
            "/api/fleet" => match load::page(&self.at, now).await {
                Ok(p) => json(&p),
                Err(e) => reply(e.status(), PLAIN, format!("{e}\n")),
            },
            "/assets/rota.css" => reply(StatusCode::OK, "text/css; charset=utf-8", CSS.into()),
            "/assets/rota.js" => reply(StatusCode::OK, "text/javascript; charset=utf-8", JS.into()),
            "/healthz" => reply(StatusCode::OK, PLAIN, "ok\n".into()),
            "/metrics" => match load::page(&self.at, now).await {
                Ok(p) => reply(
                    StatusCode::OK,
                    "text/plain; version=0.0.4; charset=utf-8",
                    super::metrics::render(&p),
                ),
                Err(e) => reply(e.status(), PLAIN, format!("{e}\n")),
            },
            _ => {
                let (api, rest) = match path.strip_prefix("/api/commit/") {
                    Some(r) => (true, Some(r)),
                    None => (false, path.strip_prefix("/commit/")),
                };
                let Some(rest) = rest else {
                    return reply(
                        StatusCode::NOT_FOUND,
                        HTML,
                        html::error_page("no such page"),
                    );
                };
                let Some(id) = commit_id(rest) else {
                    return reply(
                        StatusCode::BAD_REQUEST,
                        HTML,
                        html::error_page(&format!(
                            "{rest:?} is not a commit id (4 to 64 hex digits)"
                        )),
                    );
                };
                match load::commit(&self.at.repo, id).await {
                    Ok(c) if api => json(&c),
                    Ok(c) => reply(StatusCode::OK, HTML, html::commit_page(&c)),
                    Err(e) => failed(&e, !api),
                }
            }
        }
    }
}

const PLAIN: &str = "text/plain; charset=utf-8";
const HTML: &str = "text/html; charset=utf-8";

fn failed(e: &UiError, page: bool) -> Response<Full<Bytes>> {
    tracing::warn!(error = %e, "ui: cannot render");
    if page {
        reply(e.status(), HTML, html::error_page(&e.to_string()))
    } else {
        reply(e.status(), PLAIN, format!("{e}\n"))
    }
}

fn json<T: serde::Serialize>(v: &T) -> Response<Full<Bytes>> {
    match serde_json::to_string_pretty(v) {
        Ok(s) => reply(StatusCode::OK, "application/json", s),
        Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, PLAIN, format!("{e}\n")),
    }
}

fn reply(status: StatusCode, ctype: &str, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", ctype)
        .header("cache-control", "no-store")
        .header("x-content-type-options", "nosniff")
        .header("x-frame-options", "DENY")
        .header("referrer-policy", "no-referrer")
        // Only our own script and stylesheet; inline styles for the progress bars' widths.
        .header(
            "content-security-policy",
            "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        )
        .body(Full::new(Bytes::from(body)))
        .expect("static response parts are valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hex_commit_ids_reach_git() {
        assert_eq!(commit_id("abc123"), Some("abc123"));
        assert_eq!(commit_id("HEAD"), None);
        assert_eq!(commit_id("main~1"), None);
        assert_eq!(commit_id("abc"), None);
        assert_eq!(commit_id(&"a".repeat(65)), None);
    }
}
