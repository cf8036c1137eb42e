//! The HTTP edge of `rota ui`: a small read-only server (hyper, GET and HEAD only) for the
//! fleet page, its live fragment, the commit view, the same data as JSON, and the embedded
//! assets. It faces a network and a browser, so:
//!
//! - **Connections.** At most `max_connections` at once and `max_per_client` from one
//!   address (one client holding every slot starved everyone, `/healthz` included). A
//!   connection over either cap gets one of a few spare, short-lived slots that answer
//!   `/healthz` (and `503` to the rest), so probes still see a live server even when they
//!   come from the address of a client holding its whole share: behind a proxy or an
//!   ingress, every client and the probes share one address. Slow request headers and old
//!   connections are cut ([`crate::serving::Slots`]).
//! - **Memory.** An answer that holds the whole fleet (`/api/fleet`, the page or fragment
//!   rendered whole, a commit's statuses of every cluster) is built as one string, tens of
//!   MiB at 2,000 clusters; 16 of them at once took the page from 90 to ~400 MiB. At most
//!   `max_heavy` of them are built or sent at once (the permit is held until the socket took
//!   the body's last chunk); a request over it gets `503` with `Retry-After` at once, never
//!   a queue.
//! - **Host.** A request is answered only when its `Host` is an IP address, `localhost` or a
//!   name given with `--allow-host`: a DNS-rebinding page (an attacker's name resolving to
//!   127.0.0.1) would otherwise read the fleet from a UI kept on loopback. `/healthz` is
//!   answered whatever the Host (kubelet probes send the pod's address).
//! - **Nothing cross-origin.** No CORS headers; `Cross-Origin-Resource-Policy` and
//!   `-Opener-Policy: same-origin`; a request another site's page makes (`Sec-Fetch-Site:
//!   cross-site`, anything but following a link) is refused; the page loads nothing from
//!   elsewhere (CSP) and links out without a referrer.
//! - **Cost.** The page's model is built once per (revision, notes refs' tips) and rebuilt
//!   for the clock once a minute ([`super::view`]); a request renders only the part it asks
//!   for (the summary, the exceptions, a page of clusters: [`super::html_size`]). Every
//!   answer carries an `ETag` naming what the model shows (a rebuild for the clock that
//!   changed nothing keeps it), and a poll that sends it back (`If-None-Match`) is answered
//!   `304` with nothing rendered: an open tab costs a `stat` or three every few seconds, and
//!   learns the model's moment from the `rota-as-of` header. While a big fleet is read again,
//!   requests get the last model at once rather than wait for the new one.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::load::{self, RepoAt};
use super::query::Query;
use super::text::LIST_ALL_UP_TO_POOLS;
use super::view::{self, CLOCK_EVERY, Stamp, View};
use super::{UiError, html, html_size};
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
    /// Answers holding the whole fleet built or sent at once (see the module doc).
    pub max_heavy: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 64,
            max_per_client: 16,
            header_timeout: Duration::from_secs(10),
            connection_timeout: Duration::from_secs(60),
            max_heavy: 2,
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

/// The model requests are answered from, or why there is none.
enum Current {
    Empty,
    Ready(Arc<View>),
    /// The last build failed (a bad revision, an invalid fleet at the commit): answered as
    /// an error until the stamp moves or a minute passed.
    Failed {
        stamp: Stamp,
        error: Arc<UiError>,
        at: Instant,
    },
}

/// How long a request waits for a rebuild it started before it takes the last model, when
/// the last build took no longer than this: a small fleet's page is then fresh on the poll
/// that follows a change; a big fleet's requests are not held for its reading of git.
const WAIT_FOR_FRESH: Duration = Duration::from_millis(800);

/// The built model and the one rebuild that may be under way.
struct Views {
    current: Mutex<Current>,
    building: AtomicBool,
    /// Counts finished builds: a request that started one waits on it.
    done: tokio::sync::watch::Sender<u64>,
    generation: AtomicU64,
    /// Tells this process's `ETag`s from another's (a restart counts generations from 1).
    boot: u64,
    served: super::metrics::Served,
    /// How long the last build took, in milliseconds.
    last_build_ms: AtomicU64,
}

impl Views {
    fn new() -> Self {
        Views {
            current: Mutex::new(Current::Empty),
            building: AtomicBool::new(false),
            done: tokio::sync::watch::Sender::new(0),
            generation: AtomicU64::new(0),
            boot: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            served: Default::default(),
            last_build_ms: AtomicU64::new(0),
        }
    }

    fn get(&self) -> Result<Arc<View>, Arc<UiError>> {
        match &*self.current.lock().expect("no panics under the lock") {
            Current::Ready(v) => Ok(Arc::clone(v)),
            Current::Failed { error, .. } => Err(Arc::clone(error)),
            Current::Empty => Err(Arc::new(UiError::Notes("the page is not built yet".into()))),
        }
    }

    /// Whether a request that found `stamp` should have a newer model built.
    fn due(&self, stamp: &Stamp) -> (bool, Option<Arc<View>>) {
        match &*self.current.lock().expect("no panics under the lock") {
            Current::Ready(v) => (v.stale(stamp), Some(Arc::clone(v))),
            Current::Failed { stamp: s, at, .. } => {
                (s != stamp || at.elapsed() >= CLOCK_EVERY, None)
            }
            Current::Empty => (true, None),
        }
    }

    /// Weak (`W/`): answers under one tag show the same but may differ in bytes (the "as
    /// of" stamp, a countdown's first text).
    fn etag(&self, v: &View) -> String {
        format!("W/\"{:x}-{}\"", self.boot, v.generation)
    }
}

/// Resets `building` however the build ends.
struct Building(Arc<Views>);

impl Drop for Building {
    fn drop(&mut self) {
        self.0.building.store(false, Ordering::SeqCst);
        self.0.done.send_modify(|n| *n += 1);
    }
}

/// The page's data source and limits; cheap to clone.
#[derive(Clone)]
pub struct Ui {
    at: Arc<RepoAt>,
    limits: Limits,
    hosts: Arc<Hosts>,
    clients: Arc<PerClient>,
    views: Arc<Views>,
    /// Permits for answers that hold the whole fleet ([`Limits::max_heavy`]).
    heavy: Arc<tokio::sync::Semaphore>,
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
            views: Arc::new(Views::new()),
            heavy: Arc::new(tokio::sync::Semaphore::new(limits.max_heavy.max(1))),
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
            // One client may not hold more than its share, nor everyone more than the page's:
            // past either, a spare slot that answers `/healthz` only (the probes may come
            // from that very client's address), or the connection is closed unread.
            let client = PerClient::admit(&self.clients, peer.ip(), self.limits.max_per_client);
            let admitted = match (&client, page.admit()) {
                (Some(_), Some(slot)) => Some((page.clone(), slot, false)),
                _ => health.admit().map(|slot| (health.clone(), slot, true)),
            };
            let Some((slots, slot, full)) = admitted else {
                continue;
            };
            let me = self.clone();
            tokio::spawn(async move {
                let _client = client;
                let svc = service_fn(move |req| {
                    let me = me.clone();
                    async move {
                        let mut permit = None;
                        let r = if full {
                            busy(&req)
                        } else {
                            me.respond(&req, &mut permit).await
                        };
                        Ok::<_, Infallible>(r.map(|body| Answer::new(body, permit)))
                    }
                });
                let conn = slots.http1().serve_connection(TokioIo::new(stream), svc);
                let _ = slots.run(slot, conn).await;
            });
        }
    }

    /// Builds the first model now (`rota ui` does before it listens, so that a wrong repo
    /// fails at start and the first request is answered from a built page).
    pub async fn warm(&self) -> Result<(), UiError> {
        match self.view().await {
            Ok(_) => Ok(()),
            Err(e) => Err(match Arc::try_unwrap(e) {
                Ok(e) => e,
                Err(e) => UiError::Notes(e.to_string()),
            }),
        }
    }

    /// The model to answer from (see the module doc): the current one while its stamp
    /// holds; else a rebuild is started and waited for a moment (or, with no model yet,
    /// until it is done).
    async fn view(&self) -> Result<Arc<View>, Arc<UiError>> {
        let at = Arc::clone(&self.at);
        let stamp = match tokio::task::spawn_blocking(move || view::stamp(&at)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(Arc::new(e)),
            Err(e) => return Err(Arc::new(UiError::Notes(format!("stamp task failed: {e}")))),
        };
        let (due, last) = self.views.due(&stamp);
        if !due {
            return self.views.get();
        }
        let mut done = self.views.done.subscribe();
        self.start_build(stamp);
        match last {
            Some(v) => {
                let last_took =
                    Duration::from_millis(self.views.last_build_ms.load(Ordering::Relaxed));
                if last_took <= WAIT_FOR_FRESH
                    && tokio::time::timeout(WAIT_FOR_FRESH, done.changed())
                        .await
                        .is_ok()
                {
                    return self.views.get();
                }
                Ok(v)
            }
            None => {
                let _ = done.changed().await;
                self.views.get()
            }
        }
    }

    /// Starts a rebuild for `stamp` unless one is under way.
    fn start_build(&self, stamp: Stamp) {
        if self.views.building.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            let _building = Building(Arc::clone(&me.views));
            me.views.served.builds.fetch_add(1, Ordering::Relaxed);
            let last = me.views.get().ok();
            let generation = me.views.generation.fetch_add(1, Ordering::SeqCst) + 1;
            let started = Instant::now();
            let next = match view::next(&me.at, last, stamp.clone(), generation).await {
                Ok(v) => Current::Ready(Arc::new(v)),
                Err(e) => {
                    tracing::warn!(error = %e, "ui: cannot build the page");
                    Current::Failed {
                        stamp,
                        error: Arc::new(e),
                        at: Instant::now(),
                    }
                }
            };
            me.views
                .last_build_ms
                .store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
            let old = std::mem::replace(
                &mut *me.views.current.lock().expect("no panics under the lock"),
                next,
            );
            // The last model and the transient reading of git go back to the kernel now,
            // not at the next periodic trim.
            drop(old);
            crate::memory::trim();
        });
    }

    /// A permit for an answer holding the whole fleet, kept in `held` until the answer is
    /// sent; `Some`: none is left, the `503` to answer instead.
    fn heavy(
        &self,
        held: &mut Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Option<Response<Full<Bytes>>> {
        match Arc::clone(&self.heavy).try_acquire_owned() {
            Ok(p) => {
                *held = Some(p);
                None
            }
            Err(_) => {
                self.views.served.busy.fetch_add(1, Ordering::Relaxed);
                Some(retry_later(
                    "too many whole-fleet answers under way: retry shortly\n",
                ))
            }
        }
    }

    /// The answer to `req`; one holding the whole fleet takes a permit into `held`.
    async fn respond(
        &self,
        req: &Request<Incoming>,
        held: &mut Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Response<Full<Bytes>> {
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
        let query = match path {
            "/" | "/fragment" | "/api/fleet" => match Query::parse(req.uri().query()) {
                Ok(q) => Some(q),
                Err(e) => {
                    return if path == "/" {
                        reply(
                            StatusCode::BAD_REQUEST,
                            HTML,
                            html::error_page(&e.to_string()),
                        )
                    } else {
                        reply(StatusCode::BAD_REQUEST, PLAIN, format!("{e}\n"))
                    };
                }
            },
            _ => None,
        };
        // One method a route, so that each reads as what that answer is made of.
        match path {
            "/" | "/fragment" => self.page(req, path, query.unwrap_or_default(), held).await,
            "/api/fleet" => self.fleet_json(query.unwrap_or_default(), held).await,
            "/assets/rota.css" => reply(StatusCode::OK, "text/css; charset=utf-8", CSS.into()),
            "/assets/rota.js" => reply(StatusCode::OK, "text/javascript; charset=utf-8", JS.into()),
            "/metrics" => match self.view().await {
                Ok(v) => reply(
                    StatusCode::OK,
                    "text/plain; version=0.0.4; charset=utf-8",
                    super::metrics::render(&v.page) + &self.views.served.render(),
                ),
                Err(e) => self.failed(&e, false),
            },
            _ => self.commit(path, held).await,
        }
    }

    /// `/` (the page) and `/fragment` (what its script swaps in): the view rendered for the
    /// query, or `304` when the tab already shows it.
    async fn page(
        &self,
        req: &Request<Incoming>,
        path: &str,
        q: Query,
        held: &mut Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Response<Full<Bytes>> {
        let v = match self.view().await {
            Ok(v) => v,
            Err(e) => return self.failed(&e, path == "/"),
        };
        let etag = self.views.etag(&v);
        let tag = Tag {
            etag: &etag,
            as_of: v.page.now,
        };
        // The tab already shows what this model renders to: nothing to render or send.
        if req
            .headers()
            .get(hyper::header::IF_NONE_MATCH)
            .is_some_and(|h| h.as_bytes() == etag.as_bytes())
        {
            self.views
                .served
                .not_modified
                .fetch_add(1, Ordering::Relaxed);
            return not_modified(&tag);
        }
        self.views.served.rendered.fetch_add(1, Ordering::Relaxed);
        if whole(&v, &q)
            && let Some(busy) = self.heavy(held)
        {
            return busy;
        }
        match render(&v, &q) {
            Ok(body) if path == "/" => {
                // The page carries its ETag for the script's first poll.
                let page = html::live_page(&v.page.fleet, &body, &etag);
                tag.on(reply(StatusCode::OK, HTML, page))
            }
            Ok(body) => tag.on(reply(StatusCode::OK, HTML, body)),
            Err(e) if path == "/" => reply(StatusCode::BAD_REQUEST, HTML, html::error_page(&e)),
            Err(e) => reply(StatusCode::BAD_REQUEST, PLAIN, format!("{e}\n")),
        }
    }

    /// `/api/fleet`: the page's model and its summary as JSON, for the query's selection.
    async fn fleet_json(
        &self,
        q: Query,
        held: &mut Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Response<Full<Bytes>> {
        let v = match self.view().await {
            Ok(v) => v,
            Err(e) => return self.failed(&e, false),
        };
        if let Err(e) = q.filter.check(&v.page) {
            return reply(StatusCode::BAD_REQUEST, PLAIN, format!("{e}\n"));
        }
        if let Some(busy) = self.heavy(held) {
            return busy;
        }
        #[derive(serde::Serialize)]
        struct FleetJson<'a> {
            #[serde(flatten)]
            page: &'a super::model::FleetPage,
            summary: std::borrow::Cow<'a, super::summary::FleetSummary>,
        }
        let (selected, summary) = v.select(&q.filter);
        json(&FleetJson {
            page: &selected,
            summary,
        })
    }

    /// `/commit/<id>` and `/api/commit/<id>`: every cluster's note on one commit (the whole
    /// fleet's statuses); any other path is not found.
    async fn commit(
        &self,
        path: &str,
        held: &mut Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Response<Full<Bytes>> {
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
        let names = match self.view().await {
            Ok(v) => Arc::clone(&v.names),
            Err(e) => return self.failed(&e, !api),
        };
        // Every cluster's note on the commit: the whole fleet's statuses.
        if let Some(busy) = self.heavy(held) {
            return busy;
        }
        let store = self.at.notes(names.iter().cloned());
        match load::commit(&self.at.repo, &store, id).await {
            Ok(c) if api => json(&c),
            Ok(c) => reply(StatusCode::OK, HTML, html::commit_page(&c)),
            Err(e) => self.failed(&e, !api),
        }
    }

    /// An error as a client sees it (without the server's paths: [`UiError::public`]); the
    /// log line has it whole.
    fn failed(&self, e: &UiError, page: bool) -> Response<Full<Bytes>> {
        tracing::warn!(error = %e, "ui: cannot render");
        let text = e.public(&self.at.repo);
        if page {
            reply(e.status(), HTML, html::error_page(&text))
        } else {
            reply(e.status(), PLAIN, format!("{text}\n"))
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

/// Whether `q` renders the fleet whole (every cluster: a small fleet, or `?all=1`).
fn whole(v: &View, q: &Query) -> bool {
    !q.filter.narrowed() && (v.summary.pools <= LIST_ALL_UP_TO_POOLS || q.all)
}

/// The live part of the page `q` asks for: a small fleet whole, as it always was; a big one
/// (or any filtered view) as the summary, the exceptions and a page of clusters. An unknown
/// wave or cluster is the caller's mistake, said with what there is.
fn render(v: &View, q: &Query) -> Result<String, String> {
    if whole(v, q) {
        return Ok(html::fragment(&v.page, &v.recent));
    }
    q.filter.check(&v.page)?;
    let (selected, summary) = v.select(&q.filter);
    Ok(html_size::fragment(
        &v.page, &selected, &summary, q, &v.recent,
    ))
}

/// What names the model an answer of the page came from: its `ETag`, and the moment the
/// model was built (`rota-as-of`). A rebuild for the clock that changes nothing else keeps
/// the `ETag` ([`View::shows_the_same_as`]) and moves only that moment: the tab is answered
/// `304` and its script sets the page's "as of" from the header, rather than be sent the
/// whole page again for one changed time.
struct Tag<'a> {
    etag: &'a str,
    as_of: chrono::DateTime<chrono::Utc>,
}

/// The header that carries [`Tag::as_of`] (read by `assets/rota.js`).
pub const AS_OF_HEADER: &str = "rota-as-of";

impl Tag<'_> {
    fn on(&self, mut r: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
        if let Ok(h) = hyper::header::HeaderValue::from_str(self.etag) {
            r.headers_mut().insert(hyper::header::ETAG, h);
        }
        if let Ok(h) = hyper::header::HeaderValue::from_str(&self.as_of.to_rfc3339()) {
            r.headers_mut().insert(AS_OF_HEADER, h);
        }
        r
    }
}

/// `304 Not Modified`: the tab's copy stands.
fn not_modified(tag: &Tag<'_>) -> Response<Full<Bytes>> {
    let mut r = reply(StatusCode::NOT_MODIFIED, HTML, String::new());
    r.headers_mut().remove("content-type");
    tag.on(r)
}

/// Past a connection cap: `/healthz` only.
fn busy(req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.uri().path() == "/healthz" {
        return reply(StatusCode::OK, PLAIN, "ok\n".into());
    }
    retry_later("too many connections: retry shortly\n")
}

/// `503` with `Retry-After: 2`.
fn retry_later(text: &str) -> Response<Full<Bytes>> {
    let mut r = reply(StatusCode::SERVICE_UNAVAILABLE, PLAIN, text.into());
    r.headers_mut()
        .insert("retry-after", hyper::header::HeaderValue::from_static("2"));
    r
}

/// An answer's body, handed to hyper in [`CHUNK`]s, with the permit of a whole-fleet answer
/// ([`Limits::max_heavy`]) given back only with its last chunk. hyper asks for the next
/// chunk when the socket took the last one, so the permit stands for the answer while the
/// client has not read it: a whole body handed over at once was queued in hyper's buffer and
/// its permit given back at once, and 16 slow readers held 16 answers again.
struct Answer {
    rest: Bytes,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// What hyper gets of an answer at a time.
const CHUNK: usize = 64 * 1024;

impl Answer {
    fn new(mut body: Full<Bytes>, permit: Option<tokio::sync::OwnedSemaphorePermit>) -> Self {
        use hyper::body::Body as _;
        // A `Full` answers at once, in one frame: its bytes, without copying them.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let rest = match std::pin::Pin::new(&mut body).poll_frame(&mut cx) {
            std::task::Poll::Ready(Some(Ok(frame))) => frame.into_data().unwrap_or_default(),
            _ => Bytes::new(),
        };
        Answer { rest, permit }
    }
}

impl hyper::body::Body for Answer {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        let me = self.get_mut();
        if me.rest.is_empty() {
            me.permit = None;
            return std::task::Poll::Ready(None);
        }
        let chunk = me.rest.split_to(me.rest.len().min(CHUNK));
        if me.rest.is_empty() {
            me.permit = None;
        }
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.rest.len() as u64)
    }
}

const PLAIN: &str = "text/plain; charset=utf-8";
const HTML: &str = "text/html; charset=utf-8";

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
            "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
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

    /// 16 connections each asking for `/api/fleet` of a 2,000-cluster fleet at once took the
    /// page from 90 to ~400 MiB. A whole-fleet answer now holds a permit until its body is
    /// dropped (sent); one over the bound is answered 503 at once, with Retry-After.
    #[test]
    fn whole_fleet_answers_are_bounded_until_their_bodies_are_sent() {
        let ui = Ui::new(
            RepoAt {
                repo: "/srv/fleet".into(),
                rev: "HEAD".into(),
                subdir: None,
                agent_signers: None,
            },
            Limits {
                max_heavy: 2,
                ..Limits::default()
            },
        );
        let (mut a, mut b, mut c) = (None, None, None);
        assert!(ui.heavy(&mut a).is_none());
        assert!(ui.heavy(&mut b).is_none());
        let refused = ui.heavy(&mut c).unwrap();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()["retry-after"], "2");
        assert!(c.is_none());
        // The permit lives in the body until its last chunk is taken (the socket took the
        // rest), or it is dropped (the client went away).
        use hyper::body::Body as _;
        let mut body = Answer::new(Full::new(Bytes::from(vec![b'x'; 3 * CHUNK / 2])), a.take());
        assert_eq!(body.size_hint().exact(), Some(3 * CHUNK as u64 / 2));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut frame = || match std::pin::Pin::new(&mut body).poll_frame(&mut cx) {
            std::task::Poll::Ready(Some(Ok(f))) => f.into_data().unwrap().len(),
            other => panic!("{other:?}"),
        };
        assert_eq!(frame(), CHUNK);
        assert!(ui.heavy(&mut c).is_some(), "half sent: still held");
        assert_eq!(frame(), CHUNK / 2);
        assert!(ui.heavy(&mut c).is_none(), "the last chunk gives it back");
        let unread = Answer::new(Full::new(Bytes::from_static(b"{}")), b.take());
        let mut d = None;
        assert!(ui.heavy(&mut d).is_some());
        drop(unread);
        assert!(ui.heavy(&mut d).is_none());
        assert_eq!(ui.views.served.busy.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn errors_shown_to_clients_leave_the_servers_paths_out() {
        let e = UiError::Git {
            repo: "/srv/fleet".into(),
            message: "revision \"deadbeef\": not found".into(),
        };
        assert_eq!(
            e.public(std::path::Path::new("/srv/fleet")),
            "git repository: revision \"deadbeef\": not found"
        );
        let e = UiError::Notes("reading /srv/fleet/.git/refs: denied".into());
        assert_eq!(
            e.public(std::path::Path::new("/srv/fleet")),
            "status notes: reading (the fleet repo)/.git/refs: denied"
        );
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
