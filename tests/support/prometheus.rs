//! A real Prometheus (Debian's `prometheus` package, installed by `scripts/test`) for the
//! tests of the Prometheus gate, scraping a target the test binary serves itself.
//!
//! One Prometheus and one target per test binary ([`shared`]): Prometheus starts in well
//! under a second but needs a few scrapes before a `rate()` has data, so the tests share it.
//! Each test gets its own `app` label ([`Target::app`]): the target exposes, for every app,
//! `http_requests_total{app, code="200"}` and `{app, code="500"}` counters, and each scrape
//! adds [`REQUESTS_PER_SCRAPE`] requests to every app, of which the app's current error ratio
//! are 500s. Changing an app's ratio changes what Prometheus sees at the next scrape.
//!
//! Everything here is blocking std code on its own threads, so it outlives the tokio runtime
//! of the test that started it; async tests call the waits through `spawn_blocking`.
//!
//! Cleanup: Prometheus runs under a small `sh` that holds the write end of a pipe from this
//! process; when the test process exits (however it exits) the pipe closes and the shell
//! kills Prometheus and removes its temporary directory. [`Prometheus`] values that are
//! dropped (not the shared one) do the same at once.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{Read, Seek, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Requests each scrape adds to every app.
pub const REQUESTS_PER_SCRAPE: u64 = 1000;

/// How long a wait may take before the test fails (a deadline for a broken setup, not a
/// timing assertion: every wait polls and returns as soon as its condition holds).
pub const SETUP_DEADLINE: Duration = Duration::from_secs(60);

/// The error ratio of a realistic gate query over the test target, per app: 5xx requests
/// over all requests, as rates over a short window (the scrape interval is 1s).
pub fn error_ratio_query(app: &str) -> String {
    format!(
        "sum(rate(http_requests_total{{app=\"{app}\",code=~\"5..\"}}[4s])) / sum(rate(http_requests_total{{app=\"{app}\"}}[4s]))"
    )
}

// ------------------------------------------------------------------------------ the target

#[derive(Default)]
struct Counters {
    /// app → (ratio of errors, 200s so far, 500s so far)
    apps: BTreeMap<String, (f64, u64, u64)>,
}

/// The scrape target: a tiny HTTP server on loopback.
pub struct Target {
    pub port: u16,
    counters: Arc<Mutex<Counters>>,
}

impl Target {
    pub fn start() -> Target {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the scrape target");
        let port = listener.local_addr().unwrap().port();
        let counters = Arc::new(Mutex::new(Counters::default()));
        let c = counters.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let c = c.clone();
                std::thread::spawn(move || {
                    let _ = read_request(&mut conn);
                    let body = scrape(&c);
                    let _ = write!(
                        conn,
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                });
            }
        });
        Target { port, counters }
    }

    /// Starts exposing `app` at error ratio `ratio` (0.0 to 1.0), or changes its ratio.
    pub fn app(&self, app: &str, ratio: f64) {
        let mut c = self.counters.lock().unwrap();
        c.apps.entry(app.to_string()).or_insert((ratio, 0, 0)).0 = ratio;
    }

    /// An app whose counters stop moving (no traffic: its error ratio becomes 0/0 = NaN).
    pub fn idle(&self, app: &str) {
        self.app(app, f64::NAN);
    }
}

/// One scrape: advance every app, then print the counters in the text format.
fn scrape(c: &Mutex<Counters>) -> String {
    let mut c = c.lock().unwrap();
    let mut out = String::from(
        "# HELP http_requests_total Requests served.\n# TYPE http_requests_total counter\n",
    );
    for (app, (ratio, ok, errors)) in c.apps.iter_mut() {
        if !ratio.is_nan() {
            let e = (REQUESTS_PER_SCRAPE as f64 * *ratio).round() as u64;
            *errors += e;
            *ok += REQUESTS_PER_SCRAPE - e;
        }
        out.push_str(&format!(
            "http_requests_total{{app=\"{app}\",code=\"200\"}} {ok}\nhttp_requests_total{{app=\"{app}\",code=\"500\"}} {errors}\n"
        ));
    }
    out
}

fn read_request(conn: &mut TcpStream) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(())
}

// ------------------------------------------------------------------------------ Prometheus

/// A running Prometheus.
pub struct Prometheus {
    pub port: u16,
    child: Child,
    /// Closing it makes the guarding shell kill Prometheus.
    guard: Option<ChildStdin>,
    log: std::fs::File,
}

impl Prometheus {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Starts Prometheus scraping `target` every second. Fails (never skips) when the binary
    /// is missing.
    pub fn start(target_port: u16) -> Prometheus {
        let bin = which("prometheus").unwrap_or_else(|| {
            panic!(
                "the `prometheus` server binary is not on PATH; it comes with Debian's \
                 `prometheus` package, which scripts/test installs (apt-get install prometheus)"
            )
        });
        let mut last = String::new();
        for _ in 0..3 {
            let dir = tempfile::Builder::new()
                .prefix("rota-prometheus-")
                .tempdir()
                .unwrap()
                .keep();
            let config = dir.join("prometheus.yml");
            std::fs::write(
                &config,
                format!(
                    "global: {{scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}}\n\
                     scrape_configs:\n  - job_name: app\n    static_configs: [{{targets: [\"127.0.0.1:{target_port}\"]}}]\n"
                ),
            )
            .unwrap();
            let port = free_port();
            // Unlinked at once: readable through the handle, gone with the process.
            let log = tempfile::tempfile().unwrap();
            // The shell runs Prometheus in the background and kills it when its stdin (a
            // pipe from this process) closes; then it removes the directory.
            let script = r#"exec 3<&0
"$@" </dev/null & p=$!
(read -r _ <&3; kill $p 2>/dev/null) &
wait $p; s=$?
rm -rf "$ROTA_PROM_DIR"
exit $s"#;
            let mut child = Command::new("sh")
                .arg("-c")
                .arg(script)
                .arg("sh")
                .arg(&bin)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--log.level=warn")
                .env("ROTA_PROM_DIR", &dir)
                .stdin(Stdio::piped())
                .stdout(log.try_clone().unwrap())
                .stderr(log.try_clone().unwrap())
                .spawn()
                .expect("starting sh for prometheus");
            let guard = child.stdin.take();
            let mut p = Prometheus {
                port,
                child,
                guard,
                log,
            };
            match p.wait_ready() {
                Ok(()) => return p,
                Err(e) => last = e,
            }
        }
        panic!("prometheus did not start (3 attempts): {last}");
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let end = Instant::now() + SETUP_DEADLINE;
        while Instant::now() < end {
            if let Ok(Some(status)) = self.child.try_wait() {
                let mut log = String::new();
                let _ = self.log.seek(std::io::SeekFrom::Start(0));
                let _ = self.log.read_to_string(&mut log);
                return Err(format!("prometheus exited ({status}):\n{log}"));
            }
            if let Ok((200, _)) = get(self.port, "/-/ready") {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("prometheus not ready within {SETUP_DEADLINE:?}"))
    }

    /// Polls an instant query until `pred` holds for its value (the first series' value, or
    /// `None` for an empty result); returns that value. Panics after [`SETUP_DEADLINE`].
    pub fn wait_for(&self, query: &str, pred: impl Fn(Option<f64>) -> bool) -> Option<f64> {
        let end = Instant::now() + SETUP_DEADLINE;
        let mut last = String::new();
        while Instant::now() < end {
            match self.value(query) {
                Ok(v) if pred(v) => return v,
                Ok(v) => last = format!("{v:?}"),
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("query `{query}` never met the condition within {SETUP_DEADLINE:?}; last: {last}");
    }

    /// The first series' value of an instant query now.
    pub fn value(&self, query: &str) -> Result<Option<f64>, String> {
        let path = format!("/api/v1/query?query={}", encode(query));
        let (status, body) = get(self.port, &path)?;
        let v: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| format!("HTTP {status}: {e}: {body}"))?;
        if v["status"] != "success" {
            return Err(body);
        }
        let value = match v["data"]["resultType"].as_str() {
            Some("scalar") => &v["data"]["result"][1],
            _ => &v["data"]["result"][0]["value"][1],
        };
        Ok(value.as_str().and_then(|s| s.parse().ok()))
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        drop(self.guard.take());
        let _ = self.child.wait();
    }
}

/// The Prometheus and target shared by the tests of one binary.
pub fn shared() -> &'static (Prometheus, Target) {
    static SHARED: OnceLock<(Prometheus, Target)> = OnceLock::new();
    SHARED.get_or_init(|| {
        let target = Target::start();
        let prom = Prometheus::start(target.port);
        prom.wait_for("up{job=\"app\"}", |v| v == Some(1.0));
        (prom, target)
    })
}

/// [`shared`] with `app` exposed at `ratio`, once Prometheus has the app's error ratio
/// within 1e-9 of it (NaN for an idle app).
pub fn app_at(app: &str, ratio: f64) -> &'static (Prometheus, Target) {
    let s = shared();
    s.1.app(app, ratio);
    s.0.wait_for(&error_ratio_query(app), |v| {
        v.is_some_and(|v| {
            (ratio.is_nan() && v.is_nan()) || (v - ratio).abs() <= 1e-6 * ratio.abs().max(1e-3)
        })
    });
    s
}

fn which(bin: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| PathBuf::from(d).join(bin))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A minimal HTTP/1.0 GET on loopback: (status, body).
pub fn get(port: u16, path: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).map_err(|e| e.to_string())?;
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no HTTP status in {raw:?}"))?;
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    Ok((status, body.to_string()))
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

// ------------------------------------------------------------------------------ impostors

/// A loopback server that answers every request with the same raw response (status line,
/// headers and body as given), or never answers (`None`): a server that is not Prometheus.
pub fn impostor(response: Option<Vec<u8>>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let response = response.clone();
            std::thread::spawn(move || {
                let _ = read_request(&mut conn);
                match response {
                    Some(r) => {
                        let _ = conn.write_all(&r);
                    }
                    // Hold the connection open without a word.
                    None => std::thread::sleep(Duration::from_secs(30)),
                }
            });
        }
    });
    port
}

/// An HTTP response with a body.
pub fn response(status: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}
