//! The HTTP edge of `rota ui`: a small read-only server (hyper, GET and HEAD only) for the
//! fleet page, its live fragment, the commit view, the same data as JSON, and the embedded
//! assets. It faces a network and a browser, so:
//!
//! - **Connections.** At most `max_connections` at once and `max_per_client` from one
//!   address (one client holding every slot starved everyone, `/healthz` included). Over a
//!   cap a connection is closed at once, unread; when every slot is taken, a few spare ones
//!   answer `/healthz` (and `503` to the rest), so probes still see a live server. Slow
//!   request headers and old connections are cut ([`crate::serving::Slots`]).
//! - **Host.** A request is answered only when its `Host` is an IP address, `localhost` or a
//!   name given with `--allow-host`: a DNS-rebinding page (an attacker's name resolving to
//!   127.0.0.1) would otherwise read the fleet from a UI kept on loopback. `/healthz` is
//!   answered whatever the Host (kubelet probes send the pod's address).
//! - **Nothing cross-origin.** No CORS headers; `Cross-Origin-Resource-Policy` and
//!   `-Opener-Policy: same-origin`; a request another site's page makes (`Sec-Fetch-Site:
//!   cross-site`, anything but following a link) is refused; the page loads nothing from
//!   elsewhere (CSP) and links out without a referrer.
//! - **Cost.** What the page is computed from is read from git once per (revision, notes
//!   refs' tips) and kept; each request only recomputes the page for the clock.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::load::{self, CommitView, Loaded, RepoAt};
use super::{UiError, html};
use crate::serving::Slots;

const CSS: &str = include_str!("assets/rota.css");
const JS: &str = include_str!("assets/rota.js");

/// What the server protects itself with.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once; more are closed at once (or, a few, answered only for
    /// `/healthz`).
    pub max_connections: usize,
    /// Connections served at once from one client address.
    pub max_per_client: usize,
    /// A client must send its request headers within this.
    pub header_timeout: Duration,
    /// A connection (keep-alive included) is closed after this.
    pub connection_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 64,
            max_per_client: 16,
            header_timeout: Duration::from_secs(10),
            connection_timeout: Duration::from_secs(60),
        }
    }
}

/// Spare connections, past `max_connections`, that answer only `/healthz`.
const HEALTH_SLOTS: usize = 8;

/// Which `Host` names the page answers to (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    /// Names allowed besides IP addresses and `localhost` (lower case, no port).
    pub names: Vec<String>,
}

impl Hosts {
    pub fn new(names: impl IntoIterator<Item = String>) -> Self {
        Hosts {
            names: names
                .into_iter()
                .map(|n| n.trim().trim_end_matches('.').to_ascii_lowercase())
                .filter(|n| !n.is_empty())
                .collect(),
        }
    }

    /// Whether a request with this `Host` header is answered.
    pub fn allows(&self, host: Option<&str>) -> bool {
        let Some(host) = host else { return false };
        let name = match host.strip_prefix('[') {
            // [v6]:port
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => host.rsplit_once(':').map_or(host, |(h, port)| {
                if port.bytes().all(|b| b.is_ascii_digit()) {
                    h
                } else {
                    host
                }
            }),
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        // An address cannot be rebound: only a name resolves through someone's DNS.
        name.parse::<IpAddr>().is_ok() || name == "localhost" || self.names.contains(&name)
    }
}

/// Connections open per client address.
#[derive(Debug, Default)]
struct PerClient(Mutex<HashMap<IpAddr, usize>>);

/// A client's connection slot, given back when dropped.
struct ClientSlot {
    table: Arc<PerClient>,
    ip: IpAddr,
}

impl PerClient {
    fn admit(table: &Arc<PerClient>, ip: IpAddr, max: usize) -> Option<ClientSlot> {
        let mut open = table.0.lock().expect("no panics under the lock");
        let n = open.entry(ip).or_default();
        if *n >= max.max(1) {
            return None;
        }
        *n += 1;
        Some(ClientSlot {
            table: Arc::clone(table),
            ip,
        })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.table.0.lock().expect("no panics under the lock");
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// What the page was last computed from, and the recent commits of that revision.
type Cache = Option<(Arc<Loaded>, Arc<Vec<CommitView>>)>;

/// The page's data source and limits; cheap to clone.
#[derive(Clone)]
pub struct Ui {
    at: Arc<RepoAt>,
    limits: Limits,
    hosts: Arc<Hosts>,
    clients: Arc<PerClient>,
    /// One reader at a time: a request that finds the inputs stale reloads them while the
    /// others wait, then all use the new ones.
    cache: Arc<tokio::sync::Mutex<Cache>>,
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
            hosts: Arc::new(Hosts::default()),
            clients: Arc::new(PerClient::default()),
            cache: Arc::new(tokio::sync::Mutex::new(None)),
        }
    }

    /// Answer requests for these `Host` names too (besides addresses and `localhost`).
    pub fn with_hosts(mut self, hosts: Hosts) -> Self {
        self.hosts = Arc::new(hosts);
        self
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
        let page = Slots::new(crate::serving::Limits {
            max_connections: self.limits.max_connections.max(1),
            header_timeout: self.limits.header_timeout,
            max_connection_age: self.limits.connection_timeout,
        });
        let health = Slots::new(crate::serving::Limits {
            max_connections: HEALTH_SLOTS,
            header_timeout: Duration::from_secs(2),
            max_connection_age: Duration::from_secs(5),
        });
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "ui: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            // One client may not hold more than its share: closed at once, unread.
            let Some(client) =
                PerClient::admit(&self.clients, peer.ip(), self.limits.max_per_client)
            else {
                continue;
            };
            let (slots, slot, full) = match page.admit() {
                Some(slot) => (page.clone(), slot, false),
                None => match health.admit() {
                    Some(slot) => (health.clone(), slot, true),
                    None => continue,
                },
            };
            let me = self.clone();
            tokio::spawn(async move {
                let _client = client;
                let svc = service_fn(move |req| {
                    let me = me.clone();
                    async move {
                        Ok::<_, Infallible>(if full {
                            busy(&req)
                        } else {
                            me.respond(&req).await
                        })
                    }
                });
                let conn = slots.http1().serve_connection(TokioIo::new(stream), svc);
                let _ = slots.run(slot, conn).await;
            });
        }
    }

    /// What the page is computed from: kept while the revision and the notes refs' tips
    /// stay the same, read again from git when either moved.
    async fn inputs(&self) -> Result<(Arc<Loaded>, Arc<Vec<CommitView>>), UiError> {
        let mut cache = self.cache.lock().await;
        if let Some((loaded, recent)) = &*cache
            && load::key_now(&self.at, loaded).await?.as_ref() == Some(&loaded.key)
        {
            return Ok((Arc::clone(loaded), Arc::clone(recent)));
        }
        let loaded = Arc::new(load::load(&self.at).await?);
        let recent = Arc::new(load::recent_of(&self.at, &loaded).await?);
        *cache = Some((Arc::clone(&loaded), Arc::clone(&recent)));
        Ok((loaded, recent))
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
        if path == "/healthz" {
            return reply(StatusCode::OK, PLAIN, "ok\n".into());
        }
        if let Some(refused) = self.refuse(req) {
            return refused;
        }
        let now = chrono::Utc::now();
        match path {
            "/" | "/fragment" => match self.inputs().await {
                Ok((loaded, recent)) if path == "/" => {
                    reply(StatusCode::OK, HTML, html::page(&loaded.page(now), &recent))
                }
                Ok((loaded, recent)) => reply(
                    StatusCode::OK,
                    HTML,
                    html::fragment(&loaded.page(now), &recent),
                ),
                Err(e) => failed(&e, path == "/"),
            },
            "/api/fleet" => match self.inputs().await {
                Ok((loaded, _)) => json(&loaded.page(now)),
                Err(e) => reply(e.status(), PLAIN, format!("{e}\n")),
            },
            "/assets/rota.css" => reply(StatusCode::OK, "text/css; charset=utf-8", CSS.into()),
            "/assets/rota.js" => reply(StatusCode::OK, "text/javascript; charset=utf-8", JS.into()),
            "/metrics" => match self.inputs().await {
                Ok((loaded, _)) => reply(
                    StatusCode::OK,
                    "text/plain; version=0.0.4; charset=utf-8",
                    super::metrics::render(&loaded.page(now)),
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
                            "{:?} is not a commit id (4 to 64 hex digits)",
                            rota_core::sanitize::line(rest)
                        )),
                    );
                };
                let loaded = match self.inputs().await {
                    Ok((loaded, _)) => loaded,
                    Err(e) => return failed(&e, !api),
                };
                let store = self.at.notes(loaded.cluster_names());
                match load::commit(&self.at.repo, &store, id).await {
                    Ok(c) if api => json(&c),
                    Ok(c) => reply(StatusCode::OK, HTML, html::commit_page(&c)),
                    Err(e) => failed(&e, !api),
                }
            }
        }
    }

    /// A request the page does not answer: an unknown `Host` (DNS rebinding), or one that
    /// another site's page makes.
    fn refuse(&self, req: &Request<Incoming>) -> Option<Response<Full<Bytes>>> {
        let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
        // HTTP/1.1 puts the authority in Host; an absolute-form request line in the URI.
        let host = header("host").or_else(|| req.uri().authority().map(|a| a.as_str()));
        if !self.hosts.allows(host) {
            tracing::warn!(host = %rota_core::sanitize::line(host.unwrap_or("")),
                "ui: request for a host name not allowed (--allow-host): refused");
            return Some(reply(
                StatusCode::MISDIRECTED_REQUEST,
                PLAIN,
                "this host name is not served here: reach the page by address or localhost, or start rota ui with --allow-host NAME\n".into(),
            ));
        }
        let cross_site = header("sec-fetch-site") == Some("cross-site");
        let navigation = header("sec-fetch-mode") == Some("navigate");
        if cross_site && !navigation {
            return Some(reply(
                StatusCode::FORBIDDEN,
                PLAIN,
                "cross-site requests are not answered\n".into(),
            ));
        }
        None
    }
}

/// Past the connection cap: `/healthz` only.
fn busy(req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.uri().path() == "/healthz" {
        return reply(StatusCode::OK, PLAIN, "ok\n".into());
    }
    let mut r = reply(
        StatusCode::SERVICE_UNAVAILABLE,
        PLAIN,
        "too many connections: retry shortly\n".into(),
    );
    r.headers_mut()
        .insert("retry-after", hyper::header::HeaderValue::from_static("2"));
    r
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
        .header("cross-origin-resource-policy", "same-origin")
        .header("cross-origin-opener-policy", "same-origin")
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
    fn only_addresses_localhost_and_allowed_names_are_hosts() {
        let hosts = Hosts::new(["Rota-UI.example.".to_string()]);
        for ok in [
            "127.0.0.1:8088",
            "localhost:8088",
            "LOCALHOST",
            "[::1]:8088",
            "10.1.2.3",
            "rota-ui.example:443",
            "rota-ui.example",
        ] {
            assert!(hosts.allows(Some(ok)), "{ok}");
        }
        for bad in [
            "attacker.example:8088",
            "localhost.attacker.example",
            "rota-ui.example.attacker.example",
            "",
        ] {
            assert!(!hosts.allows(Some(bad)), "{bad}");
        }
        assert!(!hosts.allows(None), "no Host at all");
    }

    #[test]
    fn one_client_gets_its_share_of_connections() {
        let table = Arc::new(PerClient::default());
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let a = PerClient::admit(&table, ip, 2).unwrap();
        let _b = PerClient::admit(&table, ip, 2).unwrap();
        assert!(PerClient::admit(&table, ip, 2).is_none());
        assert!(PerClient::admit(&table, "127.0.0.2".parse().unwrap(), 2).is_some());
        drop(a);
        assert!(PerClient::admit(&table, ip, 2).is_some());
    }

    #[test]
    fn only_hex_commit_ids_reach_git() {
        assert_eq!(commit_id("abc123"), Some("abc123"));
        assert_eq!(commit_id("HEAD"), None);
        assert_eq!(commit_id("main~1"), None);
        assert_eq!(commit_id("abc"), None);
        assert_eq!(commit_id(&"a".repeat(65)), None);
    }
}
