//! `rota ui` in a real browser: the real binary serves the fleet page from a fleet repo (the
//! example fleet, committed with real git, statuses written as the agents' git notes), and
//! Debian's headless Chromium loads it. The tests assert on the DOM Chromium rendered
//! (`--dump-dom`) and keep a screenshot of each state in `target/ui-screenshots/`. Three
//! states: adopting (agents just started), mid-rotation with a soak hold on the next wave,
//! and after a revert of a version whose gate failed.
//!
//! At fleet size (`tests/support/big_fleet.rs`, past the 50 pools a page lists whole): the
//! summary and the exceptions first, pages of clusters, filters in the URL; and a tab kept
//! open is answered `304 Not Modified` while nothing changes (the bench `fleet_scale` runs the
//! same at 10,000 clusters).
//!
//! Chromium is required: without it the tests fail with how to install it (`scripts/test`
//! installs it), they never skip.

use crate::support::big_fleet;
use crate::support::git::{git, rota};

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";

fn chromium() -> PathBuf {
    let p = std::env::var_os("ROTA_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| CHROMIUM.into());
    assert!(
        p.exists(),
        "{} is missing: the browser tests need Debian's chromium \
         (apt-get install chromium; scripts/test installs it)",
        p.display()
    );
    p
}

/// Runs headless Chromium with the flags that keep it off the (closed) network, a fresh
/// profile, and `extra`; returns stdout. Killed after 90 s.
fn run_chromium(extra: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium {extra:?} did not finish in 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    reader.join().unwrap()
}

/// The DOM after load.
fn load(url: &str) -> String {
    let dom = run_chromium(&["--dump-dom", url]);
    assert!(
        dom.contains("</html>"),
        "chromium rendered nothing for {url}"
    );
    dom
}

fn screenshots() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    let dir = target.join("ui-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn screenshot(url: &str, name: &str, height: u32) -> PathBuf {
    let path = screenshots().join(format!("{name}.png"));
    let _ = std::fs::remove_file(&path);
    run_chromium(&[
        &format!("--screenshot={}", path.display()),
        &format!("--window-size=1280,{height}"),
        url,
    ]);
    let png = std::fs::read(&path).unwrap_or_default();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "no screenshot of {url} at {}",
        path.display()
    );
    path
}

/// `rota ui` on `repo`, killed when dropped.
struct Served {
    child: Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(repo: &Path) -> Served {
    let mut child = Command::new(rota())
        .args(["ui", "--listen", "127.0.0.1:0", "--repo"])
        .arg(repo)
        .env("ROTA_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start rota ui");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines
        .next()
        .expect("rota ui printed nothing")
        .expect("read rota ui's stdout");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    Served { child, url }
}

/// The example fleet, committed in a fresh repo, with `edit` applied to fleet.yaml first.
fn fleet_repo(edit: impl Fn(String) -> String) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo");
    copy_dir(&src, dir.path());
    let fleet = dir.path().join("fleet.yaml");
    std::fs::write(&fleet, edit(std::fs::read_to_string(&fleet).unwrap())).unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    git(dir.path(), &["add", "."]);
    git(
        dir.path(),
        &["commit", "-q", "-m", "fleet: the example fleet"],
    );
    let head = git(dir.path(), &["rev-parse", "HEAD"]);
    (dir, head)
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Writes cluster `cluster`'s note on `commit` as its agent would (`refs/notes/rota/<c>`):
/// the cluster status, one status per `(pool, state, description)`, and `records`.
fn note(
    repo: &Path,
    commit: &str,
    cluster: &str,
    cluster_state: (&str, &str),
    pools: &[(&str, &str, &str)],
    records: Value,
) {
    let now = ts(Utc::now());
    let mut statuses = vec![
        json!({"context": format!("rota/{cluster}"), "state": cluster_state.0,
        "description": cluster_state.1, "updatedAt": now}),
    ];
    for (pool, state, description) in pools {
        statuses.push(
            json!({"context": format!("rota/{cluster}/{pool}"), "state": state,
            "description": description, "updatedAt": now}),
        );
    }
    let doc = json!({"cluster": cluster, "statuses": statuses, "pools": records});
    git(
        repo,
        &[
            "notes",
            "--ref",
            &format!("rota/{cluster}"),
            "add",
            "-f",
            "-m",
            &doc.to_string(),
            commit,
        ],
    );
}

fn done(cluster: &str, pool: &str, completions: &[(&str, &str, DateTime<Utc>)]) -> Value {
    json!({"cluster": cluster, "pool": pool, "completions": completions.iter()
        .map(|(c, v, at)| json!({"channel": c, "version": v, "completedAt": ts(*at)}))
        .collect::<Vec<_>>()})
}

/// The `<tr>` of one pool in the DOM.
fn pool_row<'d>(dom: &'d str, cluster: &str, pool: &str) -> &'d str {
    let start = dom
        .find(&format!(r#"data-pool="{cluster}/{pool}""#))
        .unwrap_or_else(|| panic!("no row for {cluster}/{pool}"));
    let end = dom[start..].find("</tr>").unwrap() + start;
    &dom[start..end]
}

/// Accessibility basics, on any page: a skip link first, every state a word (not only a
/// colour), every progress bar labelled with its value, and no click handlers on
/// non-links (everything that leads somewhere is a real link, reachable by Tab).
fn assert_accessible(dom: &str) {
    let body = &dom[dom.find("<body").unwrap()..];
    let first_link = body.find("<a ").unwrap();
    assert!(
        body[first_link..].starts_with(r##"<a class="skip" href="#main">"##),
        "the first focusable element is the skip link"
    );
    assert!(!dom.contains("onclick"), "no script-only controls");
    for badge in dom.split(r#"<span class="badge "#).skip(1) {
        // `<span class="badge s-x"><span aria-hidden="true">✓</span> success</span>`: the
        // word after the icon (hidden from screen readers) is what must be there.
        let rest = &badge[badge.find('>').unwrap() + 1..];
        let rest = match rest.strip_prefix(r#"<span aria-hidden="true">"#) {
            Some(r) => &r[r.find("</span>").unwrap() + "</span>".len()..],
            None => rest,
        };
        let word = &rest[..rest.find("</span>").unwrap()];
        assert!(
            word.chars().any(char::is_alphabetic),
            "a badge without a word: {word:?}"
        );
    }
    for bar in dom.split(r#"role="progressbar""#).skip(1) {
        let tag = &bar[..bar.find('>').unwrap()];
        assert!(
            tag.contains("aria-valuenow=") && tag.contains("aria-label="),
            "an unlabelled progress bar: {tag}"
        );
    }
}

#[test]
fn adopting_fleet_shows_every_wave_in_order_with_no_version_in_force_yet() {
    let (repo, head) = fleet_repo(|s| s);
    // The canary agents just started: their pools have no completion yet.
    for c in ["canary-use1", "dev-usc1"] {
        note(
            repo.path(),
            &head,
            c,
            (
                "pending",
                "0/2 pools on the desired image, 2 in progress or waiting",
            ),
            &[
                (
                    "general",
                    "pending",
                    "waiting for the controller to take general@2026.11.2",
                ),
                ("gpu", "pending", "planning gpu@2026.11.1"),
            ],
            json!([]),
        );
    }
    let ui = serve(repo.path());
    let dom = load(&ui.url);
    assert_accessible(&dom);
    let order: Vec<usize> = ["canary", "early", "main"]
        .iter()
        .map(|w| dom.find(&format!(r#"data-wave="{w}""#)).expect(w))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "waves in order");
    let general = pool_row(&dom, "canary-use1", "general");
    assert!(general.contains("planning"), "{general}");
    assert!(general.contains("→ </span>2026.11.2") || general.contains("2026.11.2"));
    assert!(pool_row(&dom, "canary-use1", "gpu").contains(r#"data-phase="planning""#));
    // No agent reported in later waves; the guard holds them for canary's completion.
    let prod = pool_row(&dom, "prod-use1", "general");
    assert!(prod.contains(r#"data-phase="held""#), "{prod}");
    assert!(
        prod.contains("Held (guard):")
            && (prod.contains("wave canary) to complete general@2026.11.2")
                || prod.contains("no rota agent has reported from canary-use1")),
        "{prod}"
    );
    // The main wave waits for canary to complete the version main pins (no agent reported).
    let system = pool_row(&dom, "prod-weu", "system");
    assert!(
        system.contains(r#"data-hold="guard""#)
            && (system.contains("(wave canary) to complete general@2026.11.1")
                || system.contains("no rota agent has reported from canary-use1")),
        "{system}"
    );
    assert!(dom.contains("fleet: the example fleet"), "the commit list");
    screenshot(&ui.url, "adopting", 2600);
}

#[test]
fn mid_rotation_shows_progress_and_the_soak_that_holds_the_next_wave() {
    let (repo, head) = fleet_repo(|s| s);
    let now = Utc::now();
    let canary_done = now - chrono::Duration::minutes(30);
    let long_ago = now - chrono::Duration::days(10);
    for c in ["canary-use1", "dev-usc1"] {
        note(
            repo.path(),
            &head,
            c,
            (
                "pending",
                "1/2 pools on the desired image, 1 in progress or waiting",
            ),
            &[
                ("general", "success", "40/40 nodes on general@2026.11.2"),
                ("gpu", "pending", "batch 3/8 · 14/40 nodes on gpu@2026.11.1"),
            ],
            json!([
                done(
                    c,
                    "general",
                    &[
                        ("general", "2026.11.1", long_ago),
                        ("general", "2026.11.2", canary_done)
                    ]
                ),
                done(c, "gpu", &[("gpu", "2026.10.3", long_ago)]),
            ]),
        );
    }
    let held = "waiting for wave canary to soak general@2026.11.2: 1h30m left";
    note(
        repo.path(),
        &head,
        "prod-use1",
        (
            "pending",
            "1/3 pools on the desired image, 2 in progress or waiting",
        ),
        &[
            ("general", "pending", held),
            ("batch", "pending", held),
            ("gpu", "success", "12/12 nodes on gpu@2026.10.3"),
        ],
        json!([
            done(
                "prod-use1",
                "general",
                &[("general", "2026.11.1", long_ago)]
            ),
            done("prod-use1", "batch", &[("general", "2026.11.1", long_ago)]),
            done("prod-use1", "gpu", &[("gpu", "2026.10.3", long_ago)]),
        ]),
    );
    let ui = serve(repo.path());
    let dom = load(&ui.url);
    assert_accessible(&dom);
    let gpu = pool_row(&dom, "canary-use1", "gpu");
    assert!(gpu.contains("batch 3/8 · 14/40 nodes"), "{gpu}");
    assert!(gpu.contains(r#"aria-valuenow="14""#) && gpu.contains(r#"aria-valuemax="40""#));
    assert!(gpu.contains(r#"data-phase="rotating""#), "{gpu}");
    let general = pool_row(&dom, "canary-use1", "general");
    assert!(general.contains(r#"data-phase="done""#), "{general}");
    // The early wave waits for canary's 2h soak, 30 minutes in: a countdown near 1h30m.
    let prod = pool_row(&dom, "prod-use1", "general");
    assert!(prod.contains(r#"data-hold="soak""#), "{prod}");
    assert!(prod.contains("Held (soak):"), "{prod}");
    assert!(prod.contains(r#"class="countdown" data-until=""#), "{prod}");
    assert!(
        prod.contains("1h29m left") || prod.contains("1h30m left"),
        "{prod}"
    );
    assert!(prod.contains(">2026.11.1<"), "in force: {prod}");
    assert!(pool_row(&dom, "prod-use1", "gpu").contains(r#"data-phase="done""#));
    // The timeline: canary completed general@2026.11.2 and soaks it.
    let general_tl = &dom[dom.find(r#"data-channel="general""#).unwrap()..];
    let row = &general_tl[general_tl.find(r#"data-version="2026.11.2""#).unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains("completed") && row.contains("soaking"),
        "{row}"
    );
    screenshot(&ui.url, "mid-rotation", 2600);
    // The same data as JSON, for scripts.
    let api = dom_text(&format!("{}api/fleet", ui.url));
    assert!(api.contains(r#""kind": "soak""#), "{api}");
}

/// The body text of a non-HTML response, through the browser.
fn dom_text(url: &str) -> String {
    run_chromium(&["--dump-dom", url])
}

#[test]
fn after_a_revert_the_page_shows_the_gate_failure_and_the_rollback() {
    // Canary starts on 2026.11.1; a commit moves it to 2026.11.2, whose gate fails; the
    // fleet team reverts that commit.
    let (repo, base) = fleet_repo(|s| {
        s.replacen(
            r#"images: {general: "2026.11.2", gpu: "2026.11.1"}"#,
            r#"images: {general: "2026.11.1", gpu: "2026.11.1"}"#,
            1,
        )
    });
    let dir = repo.path();
    let fleet = dir.join("fleet.yaml");
    let text = std::fs::read_to_string(&fleet).unwrap();
    std::fs::write(
        &fleet,
        text.replacen(
            r#"images: {general: "2026.11.1", gpu: "2026.11.1"}"#,
            r#"images: {general: "2026.11.2", gpu: "2026.11.1"}"#,
            1,
        ),
    )
    .unwrap();
    git(dir, &["commit", "-q", "-am", "canary: general 2026.11.2"]);
    let bump = git(dir, &["rev-parse", "HEAD"]);
    git(dir, &["revert", "--no-edit", "HEAD"]);
    let revert = git(dir, &["rev-parse", "HEAD"]);
    let now = Utc::now();
    let long_ago = now - chrono::Duration::days(10);
    let failed_at = now - chrono::Duration::minutes(20);
    let _ = base;
    let records = json!([{
        "cluster": "canary-use1", "pool": "general",
        "completions": [{"channel": "general", "version": "2026.11.1", "completedAt": ts(long_ago)}],
        "gateFailures": [{"channel": "general", "version": "2026.11.2", "gate": "pods-healthy",
                          "at": ts(failed_at)}]
    }]);
    note(
        dir,
        &bump,
        "canary-use1",
        ("failure", "1/2 pools failed, 1 done"),
        &[
            (
                "general",
                "failure",
                "paused: gate pods-healthy failed: 3 pods crash-looping",
            ),
            ("gpu", "success", "8/8 nodes on gpu@2026.11.1"),
        ],
        records.clone(),
    );
    note(
        dir,
        &revert,
        "canary-use1",
        (
            "pending",
            "1/2 pools on the desired image, 1 in progress or waiting",
        ),
        &[
            (
                "general",
                "pending",
                "batch 1/2 · 3/6 nodes on general@2026.11.1",
            ),
            ("gpu", "success", "8/8 nodes on gpu@2026.11.1"),
        ],
        records,
    );
    let ui = serve(dir);
    let dom = load(&ui.url);
    assert_accessible(&dom);
    let general = pool_row(&dom, "canary-use1", "general");
    assert!(general.contains("batch 1/2 · 3/6 nodes"), "{general}");
    assert!(general.contains(r#"data-phase="rotating""#), "{general}");
    let tl = &dom[dom.find(r#"data-channel="general""#).unwrap()..];
    let row = &tl[tl.find(r#"data-version="2026.11.2""#).unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains("gate pods-healthy failed on canary-use1/general"),
        "{row}"
    );
    assert!(
        dom.contains("Revert &quot;canary: general 2026.11.2&quot;")
            || dom.contains("Revert \"canary: general 2026.11.2\"")
    );
    screenshot(&ui.url, "after-revert", 2600);
    // The reverted commit as a forge shows it: the failure the agent recorded on it.
    let commit_url = format!("{}commit/{bump}", ui.url);
    let page = load(&commit_url);
    assert_accessible(&page);
    let row = &page[page
        .find(r#"data-context="rota/canary-use1/general""#)
        .unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains("failure") && row.contains("gate pods-healthy failed"),
        "{row}"
    );
    screenshot(&commit_url, "commit", 900);
}

#[test]
fn the_server_refuses_writes_and_bad_revisions() {
    let (repo, _) = fleet_repo(|s| s);
    let ui = serve(repo.path());
    let page = load(&format!("{}commit/main~1", ui.url));
    assert!(page.contains("is not a commit id"), "{page}");
    let page = load(&format!("{}commit/0123456789abcdef", ui.url));
    assert!(page.contains(r#"role="alert""#), "{page}");
}

/// `rota demo --serve` serves the fleet page after the story and prints its address; the page
/// shows the demo's fleet, every wave in order.
#[test]
fn the_demo_serves_the_fleet_page() {
    let dir = tempfile::tempdir().unwrap();
    let keep = dir.path().join("demo");
    let mut child = Command::new(rota())
        .args(["demo", "--serve", "--keep"])
        .arg(&keep)
        .env("ROTA_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start rota demo");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("the fleet page: ") {
                let _ = tx.send(url.trim().to_string());
            }
        }
    });
    let url = rx.recv_timeout(Duration::from_secs(600));
    let served = Served {
        child,
        url: url.expect("rota demo --serve never printed `the fleet page: URL`"),
    };
    let dom = load(&served.url);
    assert_accessible(&dom);
    let order: Vec<usize> = ["canary", "early", "main"]
        .iter()
        .map(|w| dom.find(&format!(r#"data-wave="{w}""#)).expect(w))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "waves in order");
    assert!(dom.contains(r#"data-pool="canary-use1/general""#));
    assert!(dom.contains(r#"data-channel="general""#), "the timeline");
}

/// One HTTP/1.1 GET with extra header lines; the status line, the headers and the body.
fn http_get(url: &str, path: &str, headers: &str) -> (u16, String, String) {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    // Header names are case-insensitive, their values are not (a weak ETag's `W/`).
    let head = head
        .lines()
        .map(|l| match l.split_once(':') {
            Some((name, value)) => format!("{}:{value}", name.to_ascii_lowercase()),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\r\n");
    (code, head, body.to_string())
}

fn etag_of(head: &str) -> String {
    head.lines()
        .find_map(|l| l.strip_prefix("etag: "))
        .unwrap_or_else(|| panic!("no ETag in {head}"))
        .trim()
        .to_string()
}

/// A page of the fleet, through Chromium: how many pool rows and which clusters it lists.
fn rows(dom: &str) -> usize {
    dom.matches(r#"<tr class="pool""#).count()
}

#[test]
fn a_big_fleet_leads_with_the_summary_and_the_exceptions_then_pages_its_clusters() {
    let dir = tempfile::tempdir().unwrap();
    let e = big_fleet::generate(dir.path(), 120, Utc::now());
    let ui = serve(dir.path());
    let dom = load(&ui.url);
    assert_accessible(&dom);
    // Summary, then exceptions, then the first page of clusters.
    let summary = dom.find(r#"id="summary-h""#).expect("a summary");
    let exceptions = dom.find(r#"id="exceptions-h""#).expect("exceptions");
    let clusters = dom.find(r#"id="waves-h""#).expect("clusters");
    assert!(summary < exceptions && exceptions < clusters);
    assert!(dom.contains("120 clusters and 600 pools"), "{dom}");
    for w in ["canary", "early", "main"] {
        assert!(dom.contains(&format!(r#"<tr data-wave="{w}">"#)), "{w}");
    }
    assert!(
        dom.contains(&format!("{} failing", e.failing)),
        "the exception counts: {}",
        &dom[exceptions..clusters]
    );
    let failing = e.a_failing.clone().unwrap();
    assert!(dom[exceptions..clusters].contains(&format!(r#"data-cluster="{failing}""#)));
    assert!(
        dom.contains("Clusters 1–50 of 120 · page 1 of 3"),
        "the pager"
    );
    assert_eq!(rows(&dom), 50 * 5, "one page: 50 clusters of 5 pools");
    assert!(
        !dom.contains(r#"id="cluster-c00119""#),
        "page 1 stops at 50"
    );
    screenshot(&ui.url, "fleet-at-size", 2400);

    // The last page, by its link.
    let last = load(&format!("{}?page=3", ui.url));
    assert!(last.contains("Clusters 101–120 of 120 · page 3 of 3"));
    assert_eq!(rows(&last), 20 * 5);
    assert!(last.contains(r#"id="cluster-c00119""#));
    assert!(last.contains(r#"rel="prev""#) && !last.contains(r#"rel="next""#));

    // Filters in the URL: every listed pool matches; the summary is the selection's.
    let failed = load(&format!("{}?state=failed", ui.url));
    assert_eq!(
        rows(&failed),
        e.failing,
        "every failed pool, and only those"
    );
    assert!(failed.contains(r#"<option value="failed" selected"#));
    assert!(failed.contains("Showing "), "says it is a selection");
    for row in failed.split(r#"<tr class="pool""#).skip(1) {
        assert!(row.contains(r#"data-phase="failed""#), "{row}");
    }
    let one = load(&format!("{}?cluster={failing}", ui.url));
    assert_eq!(rows(&one), 5);
    let labelled = load(&format!("{}?wave=canary", ui.url));
    assert_eq!(rows(&labelled), e.wave_clusters[0] * 5);
    // The summary's counts are links to their pools.
    assert!(
        dom.contains(r#"href="/?wave=early&amp;state=failed""#),
        "a count links"
    );

    // A wrong filter says what is wrong and what there is.
    let (code, _, body) = http_get(&ui.url, "/?wave=nope", "");
    assert_eq!(code, 400);
    assert!(
        body.contains("no wave") && body.contains("canary"),
        "{body}"
    );
    let (code, _, body) = http_get(&ui.url, "/fragment?state=sleeping", "");
    assert_eq!(code, 400);
    assert!(body.contains("query parameter state"), "{body}");
}

#[test]
fn an_open_tab_is_answered_not_modified_until_the_notes_change() {
    let (repo, head) = fleet_repo(|s| s);
    let ui = serve(repo.path());
    let (code, head1, page) = http_get(&ui.url, "/", "");
    assert_eq!(code, 200);
    let etag = etag_of(&head1);
    let carried = format!("data-etag=\"{}\"", etag.replace('"', "&quot;"));
    assert!(
        page.contains(&carried),
        "the page carries {carried}: {}",
        page.lines()
            .find(|l| l.contains("data-etag"))
            .unwrap_or("no data-etag")
    );
    // The tab's poll with the page's ETag: nothing rendered, nothing sent.
    let (code, _, body) = http_get(&ui.url, "/fragment", &format!("If-None-Match: {etag}\r\n"));
    assert_eq!(code, 304);
    assert!(body.is_empty());
    // An agent reports: the next poll gets the new fragment, under a new ETag.
    note(
        repo.path(),
        &head,
        "canary-use1",
        ("pending", "rotating 1 pool"),
        &[("gpu", "pending", "batch 3/8 · 14/40 nodes on gpu@2026.11.1")],
        json!([]),
    );
    let (code, head2, body) = http_get(&ui.url, "/fragment", &format!("If-None-Match: {etag}\r\n"));
    assert_eq!(code, 200, "the notes moved");
    assert_ne!(etag_of(&head2), etag);
    assert!(body.contains("batch 3/8 · 14/40 nodes"), "{body}");

    // In the browser: the script polls with the ETag it was served, and is answered 304.
    let before = http_get(&ui.url, "/metrics", "").2;
    let answered = |m: &str, what: &str| -> u64 {
        m.lines()
            .find_map(|l| {
                l.strip_prefix(&format!("rota_ui_page_answers_total{{answer=\"{what}\"}} "))
            })
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {what} answers in {m}"))
    };
    // Virtual time runs the script's 3-second poll several times within the budget.
    run_chromium(&["--virtual-time-budget=12000", "--dump-dom", &ui.url]);
    let after = http_get(&ui.url, "/metrics", "").2;
    assert!(
        answered(&after, "not_modified") > answered(&before, "not_modified"),
        "the tab's polls were answered 304: before {before}, after {after}"
    );
    assert_eq!(
        answered(&after, "rendered"),
        answered(&before, "rendered") + 1,
        "only the page itself was rendered"
    );
}
