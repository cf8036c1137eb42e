//! What one agent's poll of the fleet repo costs the git server and the network, at fleet
//! size (issue 25): a bare repo with one notes ref per cluster, served by `git daemon` behind
//! a byte-counting TCP proxy on loopback, polled by
//! - `today`: the poll before issue 25's per-poll work, rebuilt here with the same git2 calls
//!   (a listing of the remote's refs, then a fetch of the branch and every cluster's notes
//!   refs on a second connection: two full advertisements per poll);
//! - `idle`: `GitSource::fetch` of an agent with nothing to start (its own notes only):
//!   the protocol v2 probe (`source::ls_refs`, `ls-refs` with one `ref-prefix` per ref)
//!   answers it when nothing moved, without a libgit2 connection;
//! - `guard`: the same while its guard waits on a wave of clusters (its own notes and the
//!   wave's), with nothing moved, and right after every cluster of the wave reported (the
//!   probe, then libgit2's fetch of what moved);
//! - `idle_v0`, `guard_v0`: the same polls with the probe off (`GitSource::with_probe`),
//!   libgit2 alone, as before the probe: the whole advertisement each poll;
//! - `v2_floor`: `git ls-remote --heads` of the branch over protocol v2 (`ref-prefix`), what
//!   a poll would cost with a client that speaks v2 (libgit2 1.9 does not), and `v0_full`,
//!   the whole advertisement (`git ls-remote`, as the issue measured it).
//!
//! Prints one key=value line per case: bytes from the server (`down`) and to it (`up`),
//! connections, the median wall time of a poll, and the 1-minute load average when the case
//! ended (`load1`, from /proc/loadavg: the machine may be shared). Asserts what each poll fetched, never a
//! time. Run: `cargo bench --bench figures -- git_poll` (1,000 and 10,000 clusters, a wave of a tenth);
//! `ROTA_BENCH_CLUSTERS=1000,10000 ROTA_BENCH_WAVE=100 ROTA_BENCH_POLLS=5` choose,
//! `ROTA_BENCH_TODAY_POLLS=0` leaves the `today` rows out (minutes at 10,000 clusters). `cargo
//! test --all-targets` runs it without `--bench` at 60 clusters, once each.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rota::source::{Auth, GitSource, SourceConfig};

use crate::support::git::git;

fn cluster(i: usize) -> String {
    format!("c{i:05}")
}

/// Writes (or moves) the notes ref of each cluster in `clusters`: a notes commit holding one
/// status note on `on`, as an agent's report would. `git fast-import`: 10,000 refs in a pack,
/// in seconds.
fn report(repo: &Path, clusters: &[String], on: &str, round: usize) {
    let mut stream = Vec::new();
    for c in clusters {
        let note = format!(
            "{{\"cluster\":\"{c}\",\"round\":{round},\"pools\":[{{\"pool\":\"general\",\"state\":\"success\"}}]}}\n"
        );
        let from = if round == 0 {
            String::new()
        } else {
            format!("from refs/notes/rota/{c}^0\n")
        };
        write!(
            stream,
            "commit refs/notes/rota/{c}\ncommitter rota <rota@rota.dev> {} +0000\ndata 0\n{from}M 100644 inline {on}\ndata {}\n{note}\n",
            1_700_000_000 + round,
            note.len()
        )
        .unwrap();
    }
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet", "--force"])
        .current_dir(repo)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&stream).unwrap();
    assert!(child.wait().unwrap().success());
    git(repo, &["pack-refs", "--all"]);
}

/// A TCP proxy in front of `git daemon` that counts the bytes each way and the connections.
struct Counter {
    port: u16,
    down: Arc<AtomicU64>,
    up: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
    open: Arc<AtomicUsize>,
}

impl Counter {
    fn start(target: u16) -> Counter {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let c = Counter {
            port,
            down: Arc::default(),
            up: Arc::default(),
            connections: Arc::default(),
            open: Arc::default(),
        };
        let (down, up, connections, open) = (
            c.down.clone(),
            c.up.clone(),
            c.connections.clone(),
            c.open.clone(),
        );
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let server = TcpStream::connect(("127.0.0.1", target)).unwrap();
                connections.fetch_add(1, Ordering::SeqCst);
                open.fetch_add(2, Ordering::SeqCst);
                for (from, to, count) in [
                    (
                        client.try_clone().unwrap(),
                        server.try_clone().unwrap(),
                        up.clone(),
                    ),
                    (server, client, down.clone()),
                ] {
                    let open = open.clone();
                    std::thread::spawn(move || pipe(from, to, &count, &open));
                }
            }
        });
        c
    }

    /// Bytes down, bytes up and connections since the last call, once every connection
    /// the poll opened is closed (the copy threads may trail the client by a moment).
    fn take(&self) -> (u64, u64, u64) {
        while self.open.load(Ordering::SeqCst) != 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        (
            self.down.swap(0, Ordering::SeqCst),
            self.up.swap(0, Ordering::SeqCst),
            self.connections.swap(0, Ordering::SeqCst),
        )
    }
}

/// Copies one direction. The proxy must not slow what it measures: it writes at once
/// (`TCP_NODELAY`) and acknowledges at once (`TCP_QUICKACK`, as `source::ls_refs` does),
/// or each answer upload-pack writes in pieces would wait on the delayed-ACK timer here.
fn pipe(mut from: TcpStream, mut to: TcpStream, count: &AtomicU64, open: &AtomicUsize) {
    let mut buf = [0u8; 64 * 1024];
    let _ = to.set_nodelay(true);
    loop {
        rota::source::ls_refs::quick_ack(&from);
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                count.fetch_add(n as u64, Ordering::SeqCst);
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    open.fetch_sub(1, Ordering::SeqCst);
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn daemon(base: &Path) -> (Daemon, u16) {
    let exec = git(base, &["--exec-path"]);
    for _ in 0..5 {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // git-daemon itself: the `git daemon` wrapper's child would outlive a kill.
        let mut child = Command::new(Path::new(&exec).join("git-daemon"))
            .args(["--reuseaddr", "--export-all", "--listen=127.0.0.1"])
            .arg(format!("--base-path={}", base.display()))
            .arg(format!("--port={port}"))
            .arg(base)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return (Daemon(child), port);
            }
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("git daemon did not start");
}

/// The poll as it was before issue 25's per-poll work (`GitSource::fetch` then): list the
/// remote's refs on one connection, then fetch the branch and every declared cluster's notes
/// refs (one glob up to 2,048 refs, each by name past it) on a second.
fn today_poll(mirror: &Path, declared: &[String]) {
    let repo = git2::Repository::open_bare(mirror).unwrap();
    let mut remote = repo.find_remote("origin").unwrap();
    let names: Vec<String> = {
        let conn = remote
            .connect_auth(git2::Direction::Fetch, None, None)
            .unwrap();
        conn.list()
            .unwrap()
            .iter()
            .map(|h| h.name().to_string())
            .filter(|n| n.starts_with("refs/notes/rota/"))
            .collect()
    };
    let mut specs = vec!["+refs/heads/main:refs/remotes/origin/main".to_string()];
    if names.len() <= 2048 {
        specs.push("+refs/notes/rota/*:refs/rota/remote-notes/*".into());
    } else {
        let declared: BTreeSet<&String> = declared.iter().collect();
        specs.extend(
            names
                .iter()
                .filter(|n| declared.contains(&n["refs/notes/rota/".len()..].to_string()))
                .map(|n| {
                    format!(
                        "+{n}:refs/rota/remote-notes/{}",
                        &n["refs/notes/rota/".len()..]
                    )
                }),
        );
    }
    let mut opts = git2::FetchOptions::new();
    opts.download_tags(git2::AutotagOption::None);
    remote.fetch(&specs, Some(&mut opts), None).unwrap();
}

fn mirrored_notes(mirror: &Path) -> usize {
    let repo = git2::Repository::open_bare(mirror).unwrap();
    repo.references_glob("refs/rota/remote-notes/*")
        .unwrap()
        .count()
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn line(
    clusters: usize,
    wave: usize,
    case: &str,
    counts: &[(u64, u64, u64)],
    times: Vec<Duration>,
) {
    let (down, up, conns) = counts[counts.len() / 2];
    println!(
        "clusters={clusters} wave={wave} poll={case} down_bytes={down} up_bytes={up} connections={conns} median_ms={:.1} polls={} load1={}",
        median(times).as_secs_f64() * 1000.0,
        counts.len(),
        load1()
    );
}

/// The 1-minute load average (`?` where /proc/loadavg is not there).
fn load1() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// Runs `poll` `n` times, each after `before`, and prints its line.
fn measure(
    counter: &Counter,
    (clusters, wave, case): (usize, usize, &str),
    n: usize,
    mut before: impl FnMut(usize),
    mut poll: impl FnMut(),
) {
    let mut counts = Vec::new();
    let mut times = Vec::new();
    for i in 0..n {
        before(i);
        counter.take();
        let t = Instant::now();
        poll();
        times.push(t.elapsed());
        counts.push(counter.take());
    }
    counts.sort();
    line(clusters, wave, case, &counts, times);
}

fn ls_remote(counter: &Counter, url: &str, v2: bool, refs: &[&str]) -> (u64, u64, u64, usize) {
    counter.take();
    let out = Command::new("git")
        .args([
            "-c",
            &format!("protocol.version={}", if v2 { 2 } else { 0 }),
        ])
        .arg("ls-remote")
        .args(refs.iter().filter(|r| r.starts_with("--")))
        .arg(url)
        .args(refs.iter().filter(|r| !r.starts_with("--")))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (d, u, c) = counter.take();
    (d, u, c, out.stdout.len())
}

fn fleet(root: &Path, clusters: usize, (polls, today_polls): (usize, usize), wave: usize) {
    let srv = root.join("srv");
    let repo = srv.join("fleet.git");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "--bare", "-b", "main"]);
    let work = root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("fleet.yaml"), "kind: Fleet\n").unwrap();
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "fleet"]);
    git(&work, &["push", "-q", repo.to_str().unwrap(), "main"]);
    let head = git(&work, &["rev-parse", "HEAD"]);
    let names: Vec<String> = (0..clusters).map(cluster).collect();
    report(&repo, &names, &head, 0);
    let (_daemon, port) = daemon(&srv);
    let counter = Counter::start(port);
    let url = format!("git://127.0.0.1:{}/fleet.git", counter.port);

    // The agent of the last cluster; its guard waits on the first `wave` clusters.
    let own = names[clusters - 1].clone();
    let waited: Vec<String> = names[..wave].to_vec();
    let source = |dir: &str, notes: &[String], probe: bool| -> (GitSource, PathBuf) {
        let mirror = root.join(dir);
        let s = GitSource::open(
            SourceConfig {
                url: url.clone(),
                branch: "main".into(),
                auth: Auth::None,
                // `rota agent`'s default (no --depth), as the `today` poll fetches.
                depth: None,
            },
            &mirror,
        )
        .unwrap()
        .with_probe(probe);
        s.set_notes_clusters(notes.iter().cloned());
        s.fetch().unwrap();
        (s, mirror)
    };
    let today_mirror = root.join("today");
    {
        let r = git2::Repository::init_bare(&today_mirror).unwrap();
        r.remote_with_fetch("origin", &url, "+refs/heads/*:refs/remotes/origin/*")
            .unwrap();
    }
    let (idle, idle_mirror) = source("idle", std::slice::from_ref(&own), true);
    let (idle_v0, _) = source("idle_v0", std::slice::from_ref(&own), false);
    let mut guard_notes = waited.clone();
    guard_notes.push(own.clone());
    let (guard, guard_mirror) = source("guard", &guard_notes, true);
    let (guard_v0, _) = source("guard_v0", &guard_notes, false);
    counter.take();

    let at = |case: &'static str| (clusters, wave, case);
    // Which path answered each poll: the probe alone when nothing moved.
    let answered = |s: &GitSource| s.poll_counts();
    let before = answered(&idle);
    measure(
        &counter,
        at("idle"),
        polls,
        |_| {},
        || {
            idle.fetch().unwrap();
        },
    );
    assert_eq!(
        answered(&idle).by_probe - before.by_probe,
        polls as u64,
        "every idle poll is answered by the probe"
    );
    assert_eq!(answered(&idle).by_libgit2, before.by_libgit2);
    measure(
        &counter,
        at("idle_v0"),
        polls,
        |_| {},
        || {
            idle_v0.fetch().unwrap();
        },
    );
    measure(
        &counter,
        at("guard_v0_waiting_nothing_moved"),
        polls,
        |_| {},
        || {
            guard_v0.fetch().unwrap();
        },
    );
    assert_eq!(
        mirrored_notes(&idle_mirror),
        1,
        "an idle agent fetches its own notes only"
    );
    measure(
        &counter,
        at("guard_waiting_nothing_moved"),
        polls,
        |_| {},
        || {
            guard.fetch().unwrap();
        },
    );
    assert_eq!(mirrored_notes(&guard_mirror), wave + 1);
    assert_eq!(
        answered(&guard).by_libgit2,
        1,
        "only the first fetch connected"
    );
    // Every cluster of the wave reports between two polls: today's poll and the guard's
    // each bring the `wave` new notes; the idle agent's brings none.
    let mut round = 0;
    let mut bump = |_| {
        round += 1;
        report(&repo, &waited, &head, round);
    };
    measure(
        &counter,
        at("guard_waiting_wave_reported"),
        polls,
        &mut bump,
        || {
            let (_, plan) = guard.fetch_planned(true).unwrap();
            assert_eq!(
                plan.specs.len(),
                wave,
                "every cluster of the wave, nothing else"
            );
        },
    );
    let before = answered(&idle);
    measure(&counter, at("idle_wave_reported"), polls, &mut bump, || {
        let (_, plan) = idle.fetch_planned(true).unwrap();
        assert!(plan.specs.is_empty(), "{plan:?}");
    });
    assert_eq!(answered(&idle).by_libgit2, before.by_libgit2);

    let (d, u, c, out) = ls_remote(&counter, &url, false, &[]);
    println!(
        "clusters={clusters} poll=v0_full_ls_remote down_bytes={d} up_bytes={u} connections={c} listing_bytes={out}"
    );
    // `--heads` is what makes git send `ref-prefix refs/heads/` (a pattern alone is matched
    // on the client, after the whole listing).
    let (d, u, c, out) = ls_remote(&counter, &url, true, &["--heads", "main"]);
    println!(
        "clusters={clusters} poll=v2_floor_ls_remote_branch down_bytes={d} up_bytes={u} connections={c} listing_bytes={out}"
    );
    // Today's poll last: past 2,048 clusters it names every cluster's ref in a refspec of
    // its own, and libgit2 matches each advertised ref against each refspec, so at 10,000
    // clusters one poll takes minutes of CPU (ROTA_BENCH_TODAY_POLLS, default 1 there).
    // `ROTA_BENCH_TODAY_POLLS=0` leaves it out (its figures are in docs/gitops.md).
    if today_polls == 0 {
        return;
    }
    today_poll(&today_mirror, &names);
    assert_eq!(mirrored_notes(&today_mirror), clusters);
    counter.take();
    measure(
        &counter,
        at("today_idle"),
        today_polls,
        |_| {},
        || today_poll(&today_mirror, &names),
    );
    measure(
        &counter,
        at("today_wave_reported"),
        today_polls,
        &mut bump,
        || today_poll(&today_mirror, &names),
    );
}

pub fn main() {
    // `cargo test --all-targets` runs this without `--bench`: a smoke pass at 60 clusters
    // that checks what each poll fetched; `cargo bench` measures at fleet size.
    let bench = std::env::args().any(|a| a == "--bench");
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let sizes: Vec<usize> = match env("ROTA_BENCH_CLUSTERS") {
        Some(v) => v.split(',').map(|s| s.trim().parse().unwrap()).collect(),
        None if bench => vec![1000, 10_000],
        None => vec![60],
    };
    let polls: usize = env("ROTA_BENCH_POLLS")
        .map(|v| v.parse().unwrap())
        .unwrap_or(if bench { 5 } else { 1 });
    println!(
        "rota git poll bench (one agent, git daemon on loopback behind a byte-counting proxy; {} cores)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for clusters in sizes {
        let wave: usize = env("ROTA_BENCH_WAVE")
            .map(|v| v.parse().unwrap())
            .unwrap_or((clusters / 10).max(1))
            .min(clusters - 1);
        let t = tempfile::tempdir().unwrap();
        let today_polls = env("ROTA_BENCH_TODAY_POLLS")
            .map(|v| v.parse().unwrap())
            .unwrap_or(if clusters > 2048 { 1 } else { polls });
        fleet(t.path(), clusters, (polls, today_polls), wave);
    }
}
