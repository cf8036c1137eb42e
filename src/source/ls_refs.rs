//! The protocol v2 probe in front of a poll: ask the server, with git protocol v2's `ls-refs`
//! and one `ref-prefix` per ref the poll needs, for those refs only, and compare them with
//! the mirror before libgit2 connects at all.
//!
//! Why: libgit2 (1.9, what git2 0.21 bundles) speaks protocol v0/v1 only, where the server
//! sends its whole ref advertisement before the client can ask for anything: one notes ref
//! per cluster makes that 680 KB per poll at 10,000 clusters, even when nothing moved. The
//! probe's answer is about the size of the refs it names (a few hundred bytes), so an idle
//! poll costs that; when something in scope moved, the poll goes on to the libgit2 fetch
//! (`GitSource::fetch_planned`), which fetches only what moved (docs/gitops.md, "What a poll
//! costs").
//!
//! Shape: the pkt-line codec, the requests and the parsers of the answers are pure functions
//! over bytes, unit-tested with hostile and truncated answers below; the two transports at
//! the edge ([`probe`]) are `git://` (one TCP connection: the daemon request, the capability
//! advertisement, `command=ls-refs`) and smart HTTP(S) (`GET info/refs` then `POST
//! git-upload-pack`, both with `Git-Protocol: version=2`, on the crate's hyper + rustls
//! stack). ssh, `file://` and paths are not probed ([`Transport::of`] says `None`).
//!
//! Everything the server sends is bounded (pkt-line length, ref lines, total bytes, a
//! deadline) and parsed strictly: anything unexpected is a [`ProbeError`] naming what was
//! wrong, never acted on; the caller falls back to the libgit2 path, which has its own
//! defences. The probe only names refs, so it never reads a ref no declared cluster owns
//! (the flood defence); [`exact`] drops what a prefix matched beyond the names asked for
//! (`refs/notes/rota/c1` also matches `c10`).

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use git2::Oid;

use super::credentials::Auth;

/// Longest pkt-line git allows (`LARGE_PACKET_MAX`), header included.
pub const MAX_PKT_LEN: usize = 65520;
/// Most bytes one probe reads from the server, capability advertisement included.
pub const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;
/// Most lines of a capability advertisement (git sends about ten).
pub const MAX_CAPABILITY_LINES: usize = 256;
/// How long one probe may take, connecting included.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// Past this many notes refs, the request names the notes namespace with one prefix
/// instead of one per cluster (`rota ui` of a whole fleet), and [`exact`] keeps the names.
pub const MAX_NAMED_PREFIXES: usize = 1024;

/// Why a probe gave no usable answer; the poll then takes the libgit2 path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// The server answered in protocol v0/v1 (it ignored `version=2`), or without `ls-refs`.
    #[error("the server does not speak protocol v2 ls-refs: {0}")]
    NotV2(String),
    /// The answer broke the protocol or a bound.
    #[error("bad answer: {0}")]
    Protocol(String),
    /// No connection could be made (the libgit2 path will fail the same way, or succeed).
    #[error("connecting: {0}")]
    Connect(String),
    /// The connection broke or timed out mid-answer.
    #[error("{0}")]
    Io(String),
}

impl ProbeError {
    /// Whether to stop probing this URL for a while: a server that does not speak v2, or
    /// answers badly or slowly, would cost the same round trip at every poll. A failed
    /// connection does not count (the server is down, or the network: nothing learnt).
    pub fn backs_off(&self) -> bool {
        !matches!(self, ProbeError::Connect(_))
    }

    /// A stable word for logs.
    pub fn reason(&self) -> &'static str {
        match self {
            ProbeError::NotV2(_) => "NotV2",
            ProbeError::Protocol(_) => "BadAnswer",
            ProbeError::Connect(_) => "Connect",
            ProbeError::Io(_) => "Io",
        }
    }
}

// ------------------------------------------------------------------------ pkt-lines

/// One pkt-line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pkt {
    /// `0000`
    Flush,
    /// `0001`
    Delim,
    /// `0002`
    ResponseEnd,
    Data(Vec<u8>),
}

/// Appends `data` as one pkt-line.
pub fn encode(out: &mut Vec<u8>, data: &[u8]) {
    debug_assert!(data.len() + 4 <= MAX_PKT_LEN);
    out.extend_from_slice(format!("{:04x}", data.len() + 4).as_bytes());
    out.extend_from_slice(data);
}

/// Reads pkt-lines from `R` within a byte budget; every read is exact (a short answer is an
/// error naming where it stopped).
pub struct PktReader<R> {
    inner: R,
    read: usize,
    budget: usize,
}

impl<R: Read> PktReader<R> {
    pub fn new(inner: R, budget: usize) -> Self {
        PktReader {
            inner,
            read: 0,
            budget,
        }
    }

    /// Bytes read so far.
    pub fn bytes_read(&self) -> usize {
        self.read
    }

    fn exact(&mut self, buf: &mut [u8], what: &str) -> Result<(), ProbeError> {
        if self.read + buf.len() > self.budget {
            return Err(ProbeError::Protocol(format!(
                "more than {} bytes (at {what})",
                self.budget
            )));
        }
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => ProbeError::Protocol(format!(
                "the answer ends inside {what} (after {} bytes)",
                self.read
            )),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                ProbeError::Io(format!("no answer within {}s", TIMEOUT.as_secs()))
            }
            _ => ProbeError::Io(format!("reading the answer: {e}")),
        })?;
        self.read += buf.len();
        Ok(())
    }

    pub fn read_pkt(&mut self) -> Result<Pkt, ProbeError> {
        let mut head = [0u8; 4];
        self.exact(&mut head, "a pkt-line length")?;
        let len = std::str::from_utf8(&head)
            .ok()
            .filter(|s| s.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .ok_or_else(|| {
                ProbeError::Protocol(format!(
                    "pkt-line length {:?} is not 4 hex digits",
                    String::from_utf8_lossy(&head)
                ))
            })?;
        match len {
            0 => Ok(Pkt::Flush),
            1 => Ok(Pkt::Delim),
            2 => Ok(Pkt::ResponseEnd),
            3 => Err(ProbeError::Protocol("pkt-line length 3".into())),
            4 => Err(ProbeError::Protocol("empty pkt-line (length 4)".into())),
            n if n > MAX_PKT_LEN => Err(ProbeError::Protocol(format!(
                "pkt-line of {n} bytes, over git's {MAX_PKT_LEN}"
            ))),
            n => {
                let mut data = vec![0u8; n - 4];
                self.exact(&mut data, "a pkt-line")?;
                Ok(Pkt::Data(data))
            }
        }
    }
}

/// A data line as text, its trailing LF removed; a flush, delim or non-UTF-8 line is an error
/// naming `what` was expected.
fn text(pkt: Pkt, what: &str) -> Result<String, ProbeError> {
    match pkt {
        Pkt::Data(d) => {
            let s = String::from_utf8(d)
                .map_err(|_| ProbeError::Protocol(format!("{what}: not UTF-8")))?;
            Ok(s.strip_suffix('\n').unwrap_or(&s).to_string())
        }
        other => Err(ProbeError::Protocol(format!("{what}: got {other:?}"))),
    }
}

// ------------------------------------------------------------------------ requests

/// The first pkt-line of a `git://` connection asking for upload-pack in protocol v2.
pub fn daemon_request(path: &str, host: &str) -> Vec<u8> {
    let mut out = Vec::new();
    encode(
        &mut out,
        format!("git-upload-pack {path}\0host={host}\0\0version=2\0").as_bytes(),
    );
    out
}

/// `command=ls-refs` with one `ref-prefix` per name, ended by a flush.
pub fn ls_refs_request(prefixes: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    encode(&mut out, b"command=ls-refs\n");
    encode(
        &mut out,
        concat!("agent=rota/", env!("CARGO_PKG_VERSION"), "\n").as_bytes(),
    );
    out.extend_from_slice(b"0001");
    for p in prefixes {
        encode(&mut out, format!("ref-prefix {p}\n").as_bytes());
    }
    out.extend_from_slice(b"0000");
    out
}

/// The refs one poll asks for: the branch (when the poll fetches it) and each cluster's
/// notes ref, or, past [`MAX_NAMED_PREFIXES`] clusters, the notes namespace as one prefix.
/// `None` when there is nothing to ask (an empty request would list every ref), or a name
/// could not be sent as one `ref-prefix` line (a space, a control byte, over 1024 bytes).
pub fn wanted(branch: Option<&str>, clusters: &BTreeSet<String>) -> Option<Wanted> {
    let mut names: BTreeSet<String> = clusters
        .iter()
        .filter(|c| !c.is_empty())
        .map(|c| format!("{}{c}", super::refs::NOTES_PREFIX))
        .collect();
    let mut prefixes: Vec<String> = if names.len() > MAX_NAMED_PREFIXES {
        vec![super::refs::NOTES_PREFIX.to_string()]
    } else {
        names.iter().cloned().collect()
    };
    if let Some(b) = branch {
        let r = format!("refs/heads/{b}");
        prefixes.insert(0, r.clone());
        names.insert(r);
        // A poll also reads the fleet stop's ref (`rota stop`): a stop moves it alone.
        let stop = rota_core::fleet::stops::STOP_REF.to_string();
        prefixes.insert(1, stop.clone());
        names.insert(stop);
    }
    let sendable = |n: &String| n.len() <= 1024 && n.bytes().all(|b| b.is_ascii_graphic());
    (!prefixes.is_empty() && names.iter().all(sendable)).then_some(Wanted { names, prefixes })
}

/// What a probe asks for, and the exact names it keeps from the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub names: BTreeSet<String>,
    pub prefixes: Vec<String>,
}

// ------------------------------------------------------------------------ answers

/// A capability advertisement, after the optional smart-HTTP service header: `version 2`
/// first, then capability lines to a flush; `ls-refs` must be among them. A v0/v1
/// advertisement (a ref line, `version 1`, or a flush: an empty repo) is [`ProbeError::NotV2`].
pub fn read_capabilities<R: Read>(
    r: &mut PktReader<R>,
    http: bool,
) -> Result<Vec<String>, ProbeError> {
    let mut first = r.read_pkt()?;
    if http
        && let Pkt::Data(d) = &first
        && d.starts_with(b"# service=")
    {
        if d != b"# service=git-upload-pack\n" {
            return Err(ProbeError::Protocol(format!(
                "service header {:?}",
                String::from_utf8_lossy(d)
            )));
        }
        if r.read_pkt()? != Pkt::Flush {
            return Err(ProbeError::Protocol(
                "no flush after the service header".into(),
            ));
        }
        first = r.read_pkt()?;
    }
    let first = match first {
        Pkt::Data(d) => d,
        Pkt::Flush => return Err(ProbeError::NotV2("an empty v0 advertisement".into())),
        other => {
            return Err(ProbeError::Protocol(format!(
                "the advertisement starts with {other:?}"
            )));
        }
    };
    if first != b"version 2\n" && first != b"version 2" {
        let shown: String =
            String::from_utf8_lossy(&first[..first.len().min(60)]).replace('\0', " ");
        return Err(ProbeError::NotV2(format!(
            "the advertisement starts with {shown:?}"
        )));
    }
    let mut caps = Vec::new();
    loop {
        match r.read_pkt()? {
            Pkt::Flush => break,
            p => {
                let line = text(p, "a capability line")?;
                if line.is_empty() || line.bytes().any(|b| b.is_ascii_control()) {
                    return Err(ProbeError::Protocol(format!("capability line {line:?}")));
                }
                caps.push(line);
                if caps.len() > MAX_CAPABILITY_LINES {
                    return Err(ProbeError::Protocol(format!(
                        "more than {MAX_CAPABILITY_LINES} capability lines"
                    )));
                }
            }
        }
    }
    if !caps
        .iter()
        .any(|c| c == "ls-refs" || c.starts_with("ls-refs="))
    {
        return Err(ProbeError::NotV2("no ls-refs capability".into()));
    }
    if let Some(f) = caps.iter().find_map(|c| c.strip_prefix("object-format="))
        && f != "sha1"
    {
        return Err(ProbeError::NotV2(format!("object format {f}")));
    }
    Ok(caps)
}

/// The answer to `ls-refs`: `<40 hex> SP <refname> *(SP attribute)` lines to a flush, at
/// most `max_lines` of them. Any other line is an error naming it.
pub fn read_ls_refs<R: Read>(
    r: &mut PktReader<R>,
    max_lines: usize,
) -> Result<Vec<(String, Oid)>, ProbeError> {
    let mut out = Vec::new();
    loop {
        let p = r.read_pkt()?;
        if p == Pkt::Flush {
            return Ok(out);
        }
        let line = text(p, "a ref line")?;
        out.push(parse_ref_line(&line)?);
        if out.len() > max_lines {
            return Err(ProbeError::Protocol(format!(
                "more than {max_lines} ref lines for the prefixes asked"
            )));
        }
    }
}

/// One `ls-refs` line.
pub fn parse_ref_line(line: &str) -> Result<(String, Oid), ProbeError> {
    let bad = |why: &str| {
        let shown: String = line.chars().take(80).collect();
        ProbeError::Protocol(format!("ref line {shown:?}: {why}"))
    };
    let mut parts = line.split(' ');
    let id = parts.next().unwrap_or("");
    let name = parts.next().ok_or_else(|| bad("no ref name"))?;
    if id.len() != 40 || !id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(bad("the id is not 40 lowercase hex digits"));
    }
    if !name.starts_with("refs/")
        || name.len() > 1024
        || name
            .bytes()
            .any(|b| b.is_ascii_control() || b == b'\\' || !b.is_ascii())
    {
        return Err(bad("not a ref name"));
    }
    for attr in parts {
        if !(attr.starts_with("symref-target:") || attr.starts_with("peeled:")) {
            return Err(bad("unknown attribute"));
        }
    }
    let oid = Oid::from_str(id).map_err(|_| bad("the id"))?;
    Ok((name.to_string(), oid))
}

/// The refs of the answer whose name is exactly one asked for (a prefix matches more), each
/// once; a name answered twice with two ids is an error.
pub fn exact(
    answered: Vec<(String, Oid)>,
    names: &BTreeSet<String>,
) -> Result<Vec<(String, Oid)>, ProbeError> {
    let mut kept: Vec<(String, Oid)> = answered
        .into_iter()
        .filter(|(n, _)| names.contains(n))
        .collect();
    kept.sort();
    kept.dedup();
    if let Some(w) = kept.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(ProbeError::Protocol(format!(
            "{} answered twice with two ids",
            w[0].0
        )));
    }
    Ok(kept)
}

/// Most ref lines the answer to `wanted` may hold: what the names ask, and room for what a
/// prefix matches beyond them (refs below a cluster's name, `c1` matching `c10`...).
pub fn max_lines(wanted: &Wanted) -> usize {
    wanted.names.len() * 4 + 1024
}

// ------------------------------------------------------------------------ transports

/// Where a probe goes, from the source's URL; `None`: not probed (ssh, scp-like, `file://`,
/// paths, and URLs with user info, a query, a fragment or a `%` escape).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// `git://host[:port]/path`: `host` as git sends it (with the port when the URL has one).
    Daemon {
        host: String,
        connect: String,
        path: String,
    },
    /// `http(s)://host[:port]/path`, without a trailing `/`.
    Http { base: String },
}

impl Transport {
    pub fn of(url: &str) -> Option<Transport> {
        let (scheme, rest) = url.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        if rest.contains(['?', '#', '%', '@']) || rest.bytes().any(|b| b <= b' ') {
            return None;
        }
        let (authority, path) = rest.split_at(rest.find('/')?);
        if authority.is_empty() || path.len() < 2 {
            return None;
        }
        match scheme.as_str() {
            "git" => {
                let connect = if authority.starts_with('[') {
                    if authority.ends_with(']') {
                        format!("{authority}:9418")
                    } else {
                        authority.to_string()
                    }
                } else if authority.contains(':') {
                    authority.to_string()
                } else {
                    format!("{authority}:9418")
                };
                Some(Transport::Daemon {
                    host: authority.to_string(),
                    connect,
                    path: path.to_string(),
                })
            }
            "http" | "https" => Some(Transport::Http {
                base: format!("{scheme}://{authority}{}", path.trim_end_matches('/')),
            }),
            _ => None,
        }
    }
}

/// Asks the server for `wanted` over `transport`; the refs answered whose name is exactly
/// one asked for, and the bytes read. Blocking, bounded by [`TIMEOUT`].
pub fn probe(
    transport: &Transport,
    auth: &Auth,
    wanted: &Wanted,
) -> Result<Vec<(String, Oid)>, ProbeError> {
    let answered = match transport {
        Transport::Daemon {
            host,
            connect,
            path,
        } => over_daemon(host, connect, path, wanted)?,
        Transport::Http { base } => over_http(base, auth, wanted)?,
    };
    exact(answered, &wanted.names)
}

fn over_daemon(
    host: &str,
    connect: &str,
    path: &str,
    wanted: &Wanted,
) -> Result<Vec<(String, Oid)>, ProbeError> {
    use std::net::{TcpStream, ToSocketAddrs};
    let deadline = Instant::now() + TIMEOUT;
    let addrs: Vec<_> = connect
        .to_socket_addrs()
        .map_err(|e| ProbeError::Connect(format!("{connect}: {e}")))?
        .collect();
    let mut last = None;
    let mut stream = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, TIMEOUT) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let mut stream = stream.ok_or_else(|| {
        ProbeError::Connect(format!(
            "{connect}: {}",
            last.map_or("no address".to_string(), |e| e.to_string())
        ))
    })?;
    let io = |e: std::io::Error| ProbeError::Io(format!("writing the request: {e}"));
    stream.set_write_timeout(Some(TIMEOUT)).map_err(io)?;
    let _ = stream.set_nodelay(true);
    stream.write_all(&daemon_request(path, host)).map_err(io)?;
    let mut r = PktReader::new(
        std::io::BufReader::with_capacity(
            64 * 1024,
            Deadline {
                stream: stream.try_clone().map_err(io)?,
                deadline,
            },
        ),
        MAX_ANSWER_BYTES,
    );
    read_capabilities(&mut r, false)?;
    stream
        .write_all(&ls_refs_request(&wanted.prefixes))
        .map_err(io)?;
    let refs = read_ls_refs(&mut r, max_lines(wanted))?;
    // The end of the conversation: upload-pack exits without complaining of a hang-up.
    let _ = stream.write_all(b"0000");
    let _ = stream.shutdown(std::net::Shutdown::Both);
    Ok(refs)
}

/// A TCP stream whose reads time out at one deadline for the whole answer.
struct Deadline {
    stream: std::net::TcpStream,
    deadline: Instant,
}

impl Read for Deadline {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        quick_ack(&self.stream);
        self.stream.read(buf)
    }
}

/// Acknowledges what arrives at once instead of after the delayed-ACK timer: upload-pack
/// writes an `ls-refs` answer of more than a few lines in pieces, and without it each answer
/// waited 40 ms on Linux's delayed ACK (measured against `git daemon` on loopback: 42 ms
/// for 101 prefixes, under 1 ms with it). Linux forgets the flag, so it is set before
/// every read; elsewhere nothing is done.
pub fn quick_ack(stream: &std::net::TcpStream) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let one: libc::c_int = 1;
        // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from a live local, on a socket
        // this stream owns; a failure only leaves the default behaviour.
        unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_QUICKACK,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = stream;
}

fn http_connector() -> Result<crate::https::Connector, String> {
    use std::sync::OnceLock;
    static CONNECTOR: OnceLock<Result<crate::https::Connector, String>> = OnceLock::new();
    CONNECTOR
        .get_or_init(|| crate::https::connector(Some(TIMEOUT)))
        .clone()
}

fn over_http(base: &str, auth: &Auth, wanted: &Wanted) -> Result<Vec<(String, Oid)>, ProbeError> {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    let connector = http_connector().map_err(ProbeError::Connect)?;
    let authorization = match auth {
        Auth::HttpsToken { username, token } => {
            use base64::Engine as _;
            let b64 = base64::engine::general_purpose::STANDARD
                .encode(format!("{username}:{}", token.expose()));
            let mut v = http::HeaderValue::from_str(&format!("Basic {b64}")).map_err(|_| {
                ProbeError::Connect("the token holds characters not allowed in a header".into())
            })?;
            v.set_sensitive(true);
            Some(v)
        }
        _ => None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ProbeError::Connect(format!("starting the probe's runtime: {e}")))?;
    let exchange = async {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build::<_, Full<Bytes>>(connector);
        let send = |method: http::Method, uri: String, body: Vec<u8>| {
            let mut req = http::Request::builder()
                .method(method.clone())
                .uri(uri)
                .header(
                    http::header::USER_AGENT,
                    concat!("git/2.0 (rota/", env!("CARGO_PKG_VERSION"), ")"),
                )
                .header("git-protocol", "version=2");
            if let Some(a) = &authorization {
                req = req.header(http::header::AUTHORIZATION, a.clone());
            }
            if method == http::Method::POST {
                req = req
                    .header(
                        http::header::CONTENT_TYPE,
                        "application/x-git-upload-pack-request",
                    )
                    .header(http::header::ACCEPT, "application/x-git-upload-pack-result");
            }
            let req = req.body(Full::new(Bytes::from(body)));
            let client = &client;
            async move {
                let req = req.map_err(|e| ProbeError::Connect(format!("the request: {e}")))?;
                let resp = client
                    .request(req)
                    .await
                    .map_err(|e| ProbeError::Connect(format!("{e}")))?;
                let status = resp.status();
                let kind = resp
                    .headers()
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                if !status.is_success() {
                    return Err(ProbeError::Protocol(format!("HTTP status {status}")));
                }
                let body = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER_BYTES)
                    .collect()
                    .await
                    .map_err(|e| {
                        ProbeError::Protocol(format!(
                            "reading the answer (at most {MAX_ANSWER_BYTES} bytes): {e}"
                        ))
                    })?
                    .to_bytes();
                Ok::<_, ProbeError>((kind, body))
            }
        };
        let (kind, body) = send(
            http::Method::GET,
            format!("{base}/info/refs?service=git-upload-pack"),
            Vec::new(),
        )
        .await?;
        if kind != "application/x-git-upload-pack-advertisement" {
            return Err(ProbeError::NotV2(format!(
                "info/refs answered with content type {kind:?} (not smart HTTP)"
            )));
        }
        read_capabilities(&mut PktReader::new(&body[..], MAX_ANSWER_BYTES), true)?;
        let (kind, body) = send(
            http::Method::POST,
            format!("{base}/git-upload-pack"),
            ls_refs_request(&wanted.prefixes),
        )
        .await?;
        if kind != "application/x-git-upload-pack-result" {
            return Err(ProbeError::Protocol(format!(
                "git-upload-pack answered with content type {kind:?}"
            )));
        }
        let mut r = PktReader::new(&body[..], MAX_ANSWER_BYTES);
        let refs = read_ls_refs(&mut r, max_lines(wanted))?;
        if r.bytes_read() != body.len() {
            return Err(ProbeError::Protocol(format!(
                "{} bytes after the ref list's flush",
                body.len() - r.bytes_read()
            )));
        }
        Ok(refs)
    };
    runtime.block_on(async {
        tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| ProbeError::Io(format!("no answer within {}s", TIMEOUT.as_secs())))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkts(lines: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for l in lines {
            match *l {
                "0000" | "0001" | "0002" => out.extend_from_slice(l.as_bytes()),
                l => encode(&mut out, l.as_bytes()),
            }
        }
        out
    }

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    fn caps(bytes: &[u8], http: bool) -> Result<Vec<String>, ProbeError> {
        read_capabilities(&mut PktReader::new(bytes, MAX_ANSWER_BYTES), http)
    }

    fn refs(bytes: &[u8]) -> Result<Vec<(String, Oid)>, ProbeError> {
        read_ls_refs(&mut PktReader::new(bytes, MAX_ANSWER_BYTES), 10)
    }

    #[test]
    fn requests_are_the_pkt_lines_git_sends() {
        assert_eq!(
            daemon_request("/fleet.git", "h:9418"),
            b"0036git-upload-pack /fleet.git\0host=h:9418\0\0version=2\0"
        );
        let req = ls_refs_request(&["refs/heads/main".into(), "refs/notes/rota/c1".into()]);
        let text = String::from_utf8(req).unwrap();
        assert!(text.starts_with("0014command=ls-refs\n"), "{text}");
        assert!(
            text.ends_with(
                "0001001fref-prefix refs/heads/main\n0022ref-prefix refs/notes/rota/c1\n0000"
            ),
            "{text}"
        );
    }

    #[test]
    fn wanted_names_the_branch_and_each_cluster_or_the_namespace_past_the_limit() {
        let set: BTreeSet<String> = ["c1".to_string(), "c2".into(), "".into()].into();
        let w = wanted(Some("main"), &set).unwrap();
        assert_eq!(
            w.prefixes,
            vec![
                "refs/heads/main".to_string(),
                "refs/rota/stop".into(),
                "refs/notes/rota/c1".into(),
                "refs/notes/rota/c2".into()
            ]
        );
        assert_eq!(w.names.len(), 4);
        let many: BTreeSet<String> = (0..MAX_NAMED_PREFIXES + 1)
            .map(|i| format!("c{i}"))
            .collect();
        let w = wanted(None, &many).unwrap();
        assert_eq!(w.prefixes, vec!["refs/notes/rota/".to_string()]);
        assert_eq!(w.names.len(), MAX_NAMED_PREFIXES + 1);
        // Nothing to ask would list every ref; a name that is not one line is not sent.
        assert_eq!(wanted(None, &BTreeSet::new()), None);
        assert_eq!(
            wanted(Some("main"), &["a\nref-prefix refs/".to_string()].into()),
            None
        );
        assert_eq!(wanted(Some("ma in"), &BTreeSet::new()), None);
    }

    #[test]
    fn a_v2_advertisement_is_read_with_or_without_the_http_service_header() {
        let adv = pkts(&[
            "version 2\n",
            "agent=git/2.47.0\n",
            "ls-refs=unborn\n",
            "fetch=shallow\n",
            "object-format=sha1\n",
            "0000",
        ]);
        assert_eq!(caps(&adv, false).unwrap().len(), 4);
        let mut http = pkts(&["# service=git-upload-pack\n", "0000"]);
        http.extend_from_slice(&adv);
        assert!(caps(&http, true).is_ok());
        // Only HTTP may carry the header.
        assert!(matches!(caps(&http, false), Err(ProbeError::NotV2(_))));
    }

    #[test]
    fn a_v0_or_v1_server_or_one_without_ls_refs_is_not_v2() {
        let v0 = pkts(&[&format!("{A} HEAD\0multi_ack side-band-64k\n"), "0000"]);
        let e = caps(&v0, false).unwrap_err();
        assert!(
            matches!(e, ProbeError::NotV2(ref m) if m.contains("HEAD")),
            "{e}"
        );
        assert!(matches!(
            caps(&pkts(&["version 1\n", "0000"]), false),
            Err(ProbeError::NotV2(_))
        ));
        assert!(matches!(
            caps(&pkts(&["0000"]), false),
            Err(ProbeError::NotV2(_))
        ));
        assert!(matches!(
            caps(&pkts(&["version 2\n", "fetch\n", "0000"]), false),
            Err(ProbeError::NotV2(ref m)) if m.contains("ls-refs")
        ));
        assert!(matches!(
            caps(
                &pkts(&["version 2\n", "ls-refs\n", "object-format=sha256\n", "0000"]),
                false
            ),
            Err(ProbeError::NotV2(ref m)) if m.contains("sha256")
        ));
    }

    #[test]
    fn hostile_or_truncated_pkt_lines_are_errors_naming_what_was_wrong() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "ends inside a pkt-line length"),
            (b"00", "ends inside a pkt-line length"),
            (b"zz12", "not 4 hex digits"),
            (b"+012", "not 4 hex digits"),
            (b"0003", "length 3"),
            (b"0004", "empty pkt-line"),
            (b"fff1", "over git's 65520"),
            (b"000eversion", "ends inside a pkt-line"),
        ];
        for (bytes, want) in cases {
            let e = caps(bytes, false).unwrap_err();
            assert!(e.to_string().contains(want), "{bytes:?}: {e}");
            assert!(matches!(e, ProbeError::Protocol(_)), "{e:?}");
        }
        // The byte budget holds whatever the server sends.
        let big = pkts(&["version 2\n", &"x".repeat(1000), "0000"]);
        let e = read_capabilities(&mut PktReader::new(&big[..], 500), false).unwrap_err();
        assert!(e.to_string().contains("more than 500 bytes"), "{e}");
        // Endless capability lines.
        let mut many = vec!["version 2\n".to_string()];
        many.extend((0..=MAX_CAPABILITY_LINES).map(|i| format!("cap{i}\n")));
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let e = caps(&pkts(&many), false).unwrap_err();
        assert!(e.to_string().contains("capability lines"), "{e}");
        // A control byte in a capability, a delim inside the list.
        assert!(caps(&pkts(&["version 2\n", "ls-refs\x1b\n", "0000"]), false).is_err());
        assert!(caps(&pkts(&["version 2\n", "ls-refs\n", "0001"]), false).is_err());
        // No flush: the answer stops.
        let e = caps(&pkts(&["version 2\n", "ls-refs\n"]), false).unwrap_err();
        assert!(e.to_string().contains("ends inside"), "{e}");
    }

    #[test]
    fn ref_lines_are_parsed_strictly() {
        let ok = pkts(&[
            &format!("{A} refs/heads/main\n"),
            &format!("{B} refs/notes/rota/c1"),
            &format!("{B} refs/tags/v1 peeled:{A}"),
            "0000",
        ]);
        let got = refs(&ok).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].0, "refs/heads/main");
        assert_eq!(got[1].1, Oid::from_str(B).unwrap());
        for (line, want) in [
            (A.to_string(), "no ref name"),
            (format!("{} refs/heads/main", &A[..39]), "40 lowercase hex"),
            (
                format!("{} refs/heads/main", "AB".repeat(20)),
                "40 lowercase hex",
            ),
            (format!("{A} HEAD"), "not a ref name"),
            (format!("{A} refs/heads/a\tb"), "not a ref name"),
            (
                format!("{A} refs/heads/main unknown:x"),
                "unknown attribute",
            ),
            (format!("{A}  refs/heads/main"), "not a ref name"),
        ] {
            let e = refs(&pkts(&[&line, "0000"])).unwrap_err();
            assert!(e.to_string().contains(want), "{line:?}: {e}");
        }
        // Not UTF-8, a delim, a truncated list, too many lines.
        let mut bad = Vec::new();
        encode(&mut bad, b"\xff\xfe");
        bad.extend_from_slice(b"0000");
        assert!(refs(&bad).unwrap_err().to_string().contains("UTF-8"));
        assert!(refs(&pkts(&["0001"])).is_err());
        assert!(refs(&pkts(&[&format!("{A} refs/heads/main\n")])).is_err());
        let lines: Vec<String> = (0..11)
            .map(|i| format!("{A} refs/notes/rota/c{i}\n"))
            .collect();
        let mut flood: Vec<&str> = lines.iter().map(String::as_str).collect();
        flood.push("0000");
        let e = refs(&pkts(&flood)).unwrap_err();
        assert!(e.to_string().contains("more than 10 ref lines"), "{e}");
    }

    #[test]
    fn only_the_exact_names_asked_for_are_kept() {
        let a = Oid::from_str(A).unwrap();
        let b = Oid::from_str(B).unwrap();
        let names: BTreeSet<String> =
            ["refs/heads/main".into(), "refs/notes/rota/c1".into()].into();
        let got = exact(
            vec![
                ("refs/notes/rota/c10".into(), b),
                ("refs/notes/rota/c1/x".into(), b),
                ("refs/notes/rota/c1".into(), a),
                ("refs/heads/main".into(), a),
                ("refs/heads/main".into(), a),
                ("refs/heads/mainline".into(), b),
            ],
            &names,
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                ("refs/heads/main".to_string(), a),
                ("refs/notes/rota/c1".to_string(), a)
            ]
        );
        let e = exact(
            vec![("refs/heads/main".into(), a), ("refs/heads/main".into(), b)],
            &names,
        )
        .unwrap_err();
        assert!(e.to_string().contains("answered twice"), "{e}");
    }

    proptest::proptest! {
        /// Whatever the server sends, the parsers end without panicking, within the budget,
        /// and keep only names asked for; a valid answer cut anywhere is an error.
        #[test]
        fn arbitrary_answers_never_panic_nor_pass_the_budget(
            noise in proptest::collection::vec(proptest::num::u8::ANY, 0..512),
            lines in proptest::collection::vec("[0-9a-f]{40} refs/notes/rota/c[0-9]{1,2}", 0..8),
            cut in 0usize..2048,
        ) {
            let mut r = PktReader::new(&noise[..], 256);
            let _ = read_capabilities(&mut r, true);
            proptest::prop_assert!(r.bytes_read() <= 256);
            let mut r = PktReader::new(&noise[..], 256);
            let _ = read_ls_refs(&mut r, 4);
            proptest::prop_assert!(r.bytes_read() <= 256);
            let mut answer = Vec::new();
            for l in &lines {
                encode(&mut answer, l.as_bytes());
            }
            answer.extend_from_slice(b"0000");
            let whole = read_ls_refs(&mut PktReader::new(&answer[..], MAX_ANSWER_BYTES), 16);
            proptest::prop_assert!(whole.is_ok());
            let names: BTreeSet<String> = ["refs/notes/rota/c1".to_string()].into();
            if let Ok(kept) = exact(whole.unwrap(), &names) {
                proptest::prop_assert!(kept.iter().all(|(n, _)| names.contains(n)));
            }
            let cut = cut % answer.len();
            let part = read_ls_refs(&mut PktReader::new(&answer[..cut], MAX_ANSWER_BYTES), 16);
            proptest::prop_assert!(part.is_err());
        }
    }

    #[test]
    fn only_git_and_http_urls_are_probed() {
        assert_eq!(
            Transport::of("git://127.0.0.1:9418/fleet.git"),
            Some(Transport::Daemon {
                host: "127.0.0.1:9418".into(),
                connect: "127.0.0.1:9418".into(),
                path: "/fleet.git".into()
            })
        );
        assert_eq!(
            Transport::of("git://git.acme.test/fleet"),
            Some(Transport::Daemon {
                host: "git.acme.test".into(),
                connect: "git.acme.test:9418".into(),
                path: "/fleet".into()
            })
        );
        assert!(matches!(
            Transport::of("git://[::1]/f"),
            Some(Transport::Daemon { connect, .. }) if connect == "[::1]:9418"
        ));
        assert_eq!(
            Transport::of("https://github.com/acme/fleet.git/"),
            Some(Transport::Http {
                base: "https://github.com/acme/fleet.git".into()
            })
        );
        for not in [
            "ssh://git@host/fleet.git",
            "git@github.com:acme/fleet.git",
            "file:///srv/fleet.git",
            "/srv/fleet.git",
            "https://TOKEN@github.com/acme/fleet.git",
            "https://host/fleet.git?x=1",
            "https://host/fleet%20x.git",
            "git://host",
            "git:///fleet",
        ] {
            assert_eq!(Transport::of(not), None, "{not}");
        }
    }
}
