//! The fleet at fleet size, from the operator's side: fleet repos of 1,000, 5,000 and 10,000
//! clusters (5 pools each, three waves, a git-notes status per cluster on each of two
//! commits; `tests/support/big_fleet.rs`), and the real `rota` binary (`ROTA_BIN`, default
//! the one cargo built beside the bench) run on each as a user would: `validate`, `render`,
//! `diff`, `promote --check` (the guard's answer), `status --fleet` (the summary, `--all`,
//! `--format json`), `where`, and the page (`rota ui`: startup, time to first byte and to the
//! whole page, its size, an open tab's unchanged poll, filtered pages, the page in headless
//! Chromium, the server's CPU while one tab stays open for a minute or until the server
//! rebuilt its model for the clock, the tab's polls answered anew or `304`, its memory). A black box, so the same bench measures
//! any build. Wall time and peak RSS per command come from `wait4`; nothing about time is
//! asserted, only that each command answered.
//!
//! Run: `cargo bench --bench figures -- fleet_scale` (`ROTA_BENCH_CLUSTERS=10000` or `=1000,5000` picks
//! the sizes). Without `--bench` (as `cargo test --all-targets` runs it) it is a smoke pass
//! at 60 clusters (300 pools, past the size where `status --fleet` summarizes).
//! `ROTA_BENCH_KEEP=DIR` keeps the generated fleets (DIR/<clusters>/fleet). The views read
//! each repo after `git gc`, as a git server keeps it (`ROTA_BENCH_REPO=loose`: as generated,
//! every object and ref loose).
//!
//! Prints `key=value` lines, a block per size starting with `clusters=N`: `<figure>_ms`,
//! `<figure>_rss_mib`, `<figure>_bytes` (output size), and `promote_exit`, `page_*`.

use crate::support::big_fleet;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Run {
    ms: f64,
    rss_mib: f64,
    code: i32,
    out: String,
}

/// Runs `bin args` to completion with stdout to a file (a pipe would need a reader beside
/// it), and its own wall time and peak RSS (`wait4` reports the child's alone).
// The child is reaped by `wait4` below, not `Child::wait`, which cannot return its rusage.
#[allow(clippy::zombie_processes)]
fn run(bin: &Path, args: &[&str], scratch: &Path) -> Run {
    let out_path = scratch.join("stdout");
    let out = std::fs::File::create(&out_path).unwrap();
    let t = Instant::now();
    let child = Command::new(bin)
        .args(args)
        .env("ROTA_LOG", "error")
        .stdout(out)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child's pid, with pointers to live locals.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(pid, child.id() as i32, "wait4");
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    Run {
        ms,
        // ru_maxrss is in KiB on Linux.
        rss_mib: usage.ru_maxrss as f64 / 1024.0,
        code,
        out: std::fs::read_to_string(&out_path).unwrap_or_default(),
    }
}

fn report(name: &str, r: &Run) {
    println!("{name}_ms={:.0}", r.ms);
    println!("{name}_rss_mib={:.1}", r.rss_mib);
    println!("{name}_bytes={}", r.out.len());
}

/// One GET of `path` with extra header lines: (time to the first byte, time to the whole
/// response, the response). Asserts the status is `expect`.
fn get_with(addr: &str, path: &str, headers: &str, expect: u16) -> (Duration, Duration, Vec<u8>) {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(600))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{headers}\r\n"
    )
    .unwrap();
    let mut first = [0u8; 1];
    s.read_exact(&mut first).unwrap();
    let ttfb = t.elapsed();
    let mut body = first.to_vec();
    s.read_to_end(&mut body).unwrap();
    assert!(
        body.starts_with(format!("HTTP/1.1 {expect}").as_bytes()),
        "{path}: {}",
        String::from_utf8_lossy(&body[..body.len().min(300)])
    );
    (ttfb, t.elapsed(), body)
}

fn get(addr: &str, path: &str) -> (Duration, Duration, Vec<u8>) {
    get_with(addr, path, "", 200)
}

/// The body of a response (after the headers).
fn body_of(response: &[u8]) -> &[u8] {
    let at = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(0, |i| i + 4);
    &response[at..]
}

/// A `/proc/<pid>/status` figure in kB (`VmRSS`: resident now, `VmHWM`: peak), in MiB.
fn status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// CPU seconds (user + system) `pid` has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz
}

/// The page server's counters on `/metrics`: answers rendered, answered `304`, model builds.
fn served(addr: &str) -> [u64; 3] {
    let (_, _, m) = get(addr, "/metrics");
    let m = String::from_utf8_lossy(&m);
    let find = |prefix: &str| {
        m.lines()
            .find_map(|l| l.strip_prefix(prefix)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {prefix} on /metrics"))
    };
    [
        find("rota_ui_page_answers_total{answer=\"rendered\"} "),
        find("rota_ui_page_answers_total{answer=\"not_modified\"} "),
        find("rota_ui_page_builds_total "),
    ]
}

const CHROMIUM: &str = "/usr/bin/chromium";

fn chromium(profile: &Path) -> Command {
    let mut c = Command::new(CHROMIUM);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    c
}

/// The DOM Chromium renders for `url`.
fn chromium_dom(url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = chromium(profile.path())
        .args(["--dump-dom", url])
        .output()
        .expect("chromium (apt-get install chromium; scripts/test installs it)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn page(bin: &Path, repo: &str, clusters: usize, bench: bool) {
    let t = Instant::now();
    let mut child = Command::new(bin)
        .args(["ui", "--listen", "127.0.0.1:0", "--repo", repo])
        .env("ROTA_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // `rota ui` builds the page's model before it listens.
    println!("page_startup_ms={:.0}", t.elapsed().as_secs_f64() * 1000.0);
    let pid = child.id();
    let addr = line
        .trim()
        .rsplit("http://")
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let (ttfb, full, body) = get(&addr, "/");
    println!("page_first_byte_ms={:.0}", ttfb.as_secs_f64() * 1000.0);
    println!("page_full_ms={:.0}", full.as_secs_f64() * 1000.0);
    println!("page_bytes={}", body.len());
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains(r#"id="summary-h""#),
        "the page leads with the summary"
    );
    let etag = text
        .lines()
        .find_map(|l| l.strip_prefix("etag: "))
        .expect("an ETag")
        .trim()
        .to_string();
    let (ttfb, full, _) = get(&addr, "/");
    println!(
        "page_again_first_byte_ms={:.0}",
        ttfb.as_secs_f64() * 1000.0
    );
    println!("page_again_full_ms={:.0}", full.as_secs_f64() * 1000.0);
    // An open tab's poll while nothing changed.
    let (_, full, r) = get_with(
        &addr,
        "/fragment",
        &format!("If-None-Match: {etag}\r\n"),
        304,
    );
    println!("page_poll_unchanged_ms={:.1}", full.as_secs_f64() * 1000.0);
    println!("page_poll_unchanged_bytes={}", r.len());
    // The last page of clusters, and filters: the failing pools; the biggest wave.
    let pages = clusters.div_ceil(50);
    let (ttfb, _, r) = get(&addr, &format!("/?page={pages}"));
    println!("page_last_first_byte_ms={:.0}", ttfb.as_secs_f64() * 1000.0);
    let last = big_fleet::name(clusters - 1);
    assert!(
        String::from_utf8_lossy(&r).contains(&format!(r#"id="cluster-{last}""#)),
        "the last page lists {last}"
    );
    let (ttfb, _, r) = get(&addr, "/?state=failed");
    println!(
        "page_failed_first_byte_ms={:.0}",
        ttfb.as_secs_f64() * 1000.0
    );
    println!("page_failed_bytes={}", r.len());
    let (ttfb, _, r) = get(&addr, "/?wave=main");
    println!(
        "page_wave_main_first_byte_ms={:.0}",
        ttfb.as_secs_f64() * 1000.0
    );
    println!("page_wave_main_bytes={}", r.len());
    let (ttfb, _, r) = get(&addr, "/api/fleet?state=failed");
    println!(
        "page_api_failed_first_byte_ms={:.0}",
        ttfb.as_secs_f64() * 1000.0
    );
    assert!(body_of(&r).starts_with(b"{"));
    // In the browser, at this size.
    let url = format!("http://{addr}/");
    let t = Instant::now();
    let dom = chromium_dom(&url);
    println!(
        "page_chromium_load_ms={:.0}",
        t.elapsed().as_secs_f64() * 1000.0
    );
    assert!(
        dom.contains(r#"id="exceptions-h""#)
            && dom.contains(&format!("of {}", rota::ui::text::count(clusters))),
        "chromium shows the summary, the exceptions and the pager: {}",
        &dom[..dom.len().min(2000)]
    );
    // One tab kept open: the server's CPU while its script polls every 3 s.
    let secs = if bench { 60 } else { 8 };
    let profile = tempfile::tempdir().unwrap();
    let mut tab = chromium(profile.path())
        .args(["--remote-debugging-port=0", &url])
        .spawn()
        .expect("chromium");
    // Let the page load and its first poll pass before counting.
    std::thread::sleep(Duration::from_secs(5));
    let (cpu0, t0, before) = (cpu_seconds(pid), Instant::now(), served(&addr));
    std::thread::sleep(Duration::from_secs(secs));
    let mut after = served(&addr);
    // What the figure is for: a minute in which nothing in the fleet changed, the server's
    // rebuilds for the clock included (at 10,000 clusters one comes every minute or two).
    // The tab stays open past the minute until one did, up to four minutes.
    while bench && after[2] == before[2] && t0.elapsed() < Duration::from_secs(240) {
        std::thread::sleep(Duration::from_secs(10));
        after = served(&addr);
    }
    let cpu = cpu_seconds(pid) - cpu0;
    println!("page_tab_seconds={:.0}", t0.elapsed().as_secs_f64());
    let _ = tab.kill();
    let _ = tab.wait();
    println!(
        "page_tab_cpu_percent={:.2}",
        cpu * 100.0 / t0.elapsed().as_secs_f64()
    );
    // The tab's polls in the minute alone (the counters also hold the bench's own requests
    // above), and the model's builds in it (the clock's).
    for (i, what) in ["rendered", "not_modified", "builds"].iter().enumerate() {
        println!("page_tab_{what}={}", after[i] - before[i]);
    }
    for (i, what) in ["rendered", "not_modified"].iter().enumerate() {
        println!("page_answers_{what}={}", after[i]);
    }
    println!("page_server_rss_mib={:.1}", status_mib(pid, "VmRSS"));
    println!("page_server_peak_rss_mib={:.1}", status_mib(pid, "VmHWM"));
    // An agent reports (the common change): one cluster's note rewritten. The server reads
    // that note again and rebuilds the model; how long until the page shows it, and what
    // the server holds then and at its peak.
    let cluster = big_fleet::name(1);
    let marker = "reported again by the bench";
    let note = format!(
        r#"{{"cluster":"{cluster}","pools":[],"statuses":[{{"context":"rota/{cluster}","state":"failure","description":"{marker}","updatedAt":"{}"}}]}}"#,
        chrono::Utc::now().to_rfc3339()
    );
    let ok = Command::new("git")
        .args([
            "notes",
            "--ref",
            &format!("rota/{cluster}"),
            "add",
            "-f",
            "-m",
            &note,
            "HEAD",
        ])
        .current_dir(repo)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .status()
        .unwrap();
    assert!(ok.success(), "git notes add");
    let t = Instant::now();
    loop {
        let (_, _, r) = get(&addr, &format!("/api/fleet?cluster={cluster}"));
        if String::from_utf8_lossy(&r).contains(marker) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the page never showed the note"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    println!(
        "page_note_shown_ms={:.0}",
        t.elapsed().as_secs_f64() * 1000.0
    );
    std::thread::sleep(Duration::from_secs(2));
    println!(
        "page_server_rss_after_note_mib={:.1}",
        status_mib(pid, "VmRSS")
    );
    println!(
        "page_server_peak_rss_after_note_mib={:.1}",
        status_mib(pid, "VmHWM")
    );
    let _ = child.kill();
    let _ = child.wait();
}

fn measure(bin: &Path, clusters: usize, bench: bool) {
    let tmp = tempfile::tempdir().unwrap();
    // `ROTA_BENCH_KEEP=DIR` keeps each generated fleet in DIR/<clusters>/fleet, to try the
    // views on it by hand (the docs' example output comes from one).
    let base = match std::env::var_os("ROTA_BENCH_KEEP") {
        Some(keep) => std::path::PathBuf::from(keep).join(clusters.to_string()),
        None => tmp.path().to_path_buf(),
    };
    let dir = base.join("fleet");
    std::fs::create_dir_all(&dir).unwrap();
    let scratch = base.as_path();
    let t = Instant::now();
    let e = big_fleet::generate(&dir, clusters, chrono::Utc::now());
    println!("clusters={clusters}");
    println!("pools={}", e.pools);
    println!("generate_ms={:.0}", t.elapsed().as_secs_f64() * 1000.0);
    // The generator writes every object and ref loose (70,000 objects and 10,000 notes refs
    // at 10,000 clusters). A git server does not keep them so: a push of fewer than 100
    // objects (an agent's note is three) lands loose, and `receive-pack` runs `git gc
    // --auto` past 6,700 loose objects, which packs them and the refs. So by default the
    // views read the repo as a server keeps it after that `gc`; `ROTA_BENCH_REPO=loose`
    // measures the generator's all-loose repo, a worst case no server reaches.
    let loose = std::env::var("ROTA_BENCH_REPO").is_ok_and(|v| v == "loose");
    if loose {
        println!("repo=loose");
    } else {
        let t = Instant::now();
        let gc = Command::new("git")
            .args(["gc", "--quiet"])
            .current_dir(&dir)
            .status()
            .expect("git gc runs");
        assert!(gc.success(), "git gc packs the generated fleet");
        println!("repo=packed");
        println!("gc_ms={:.0}", t.elapsed().as_secs_f64() * 1000.0);
    }
    let repo = dir.to_str().unwrap();
    let r = run(bin, &["validate", repo], scratch);
    assert_eq!(r.code, 0, "validate: {}", r.out);
    report("validate", &r);
    let r = run(
        bin,
        &[
            "render",
            "--repo",
            repo,
            "--rev",
            "HEAD",
            "--cluster",
            "c00001",
        ],
        scratch,
    );
    assert_eq!(r.code, 0, "render: {}", r.out);
    report("render", &r);
    let r = run(
        bin,
        &["diff", "--repo", repo, "--from", "HEAD~1", "--to", "HEAD"],
        scratch,
    );
    assert!(r.out.contains("early"), "diff names the wave: {}", r.out);
    report("diff", &r);
    // The guard's answer for main: early has not completed general@2026.11.2.
    let r = run(
        bin,
        &["promote", "--wave", "main", "--check", "--repo", repo],
        scratch,
    );
    assert!(r.code >= 0, "promote --check answered");
    report("promote_check", &r);
    println!("promote_exit={}", r.code);
    let r = run(bin, &["status", "--fleet", "--repo", repo], scratch);
    assert!(r.out.contains("exceptions:"), "status --fleet: {}", r.out);
    report("status_fleet", &r);
    let r = run(
        bin,
        &["status", "--fleet", "--all", "--repo", repo],
        scratch,
    );
    assert!(r.out.contains(&big_fleet::name(clusters - 1)));
    report("status_fleet_all", &r);
    let r = run(
        bin,
        &["status", "--fleet", "--format", "json", "--repo", repo],
        scratch,
    );
    assert!(r.out.contains("\"exceptionCounts\""));
    report("status_fleet_json", &r);
    let r = run(
        bin,
        &["status", "--fleet", "--state", "failed", "--repo", repo],
        scratch,
    );
    report("status_fleet_failed", &r);
    let r = run(
        bin,
        &["where", "general@2026.11.2", "--repo", repo],
        scratch,
    );
    assert_eq!(r.code, 0, "where: {}", r.out);
    report("where", &r);
    page(bin, repo, clusters, bench);
}

pub fn main() {
    // `cargo test --all-targets` runs this without `--bench`: a smoke pass that still runs
    // every command once and checks each answered.
    let bench = std::env::args().any(|a| a == "--bench");
    let sizes: Vec<usize> = match std::env::var("ROTA_BENCH_CLUSTERS") {
        Ok(v) => v
            .split(',')
            .map(|s| {
                s.trim()
                    .parse()
                    .expect("ROTA_BENCH_CLUSTERS: numbers, comma-separated")
            })
            .collect(),
        Err(_) if bench => vec![1_000, 5_000, 10_000],
        Err(_) => vec![60],
    };
    let bin = std::env::var_os("ROTA_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rota")));
    assert!(
        bin.exists(),
        "{} is missing: build it, or set ROTA_BIN",
        bin.display()
    );
    for n in sizes {
        measure(&bin, n, bench);
    }
}
