//! The protocol v2 probe in front of a poll (`source::ls_refs`) against `git daemon` and
//! `git http-backend`: an idle poll is answered by `ls-refs` alone (one connection that asked
//! for `version=2`, a few hundred bytes), a moved branch or a moved own notes ref is still
//! fetched by libgit2, another cluster's notes (even one whose name the own one prefixes) are
//! not, and a server that answers in protocol v0 costs one wasted round trip, then is not
//! probed again for a while.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use rota::source::{Auth, GitSource, PollCounts, Secret, SourceConfig};

use super::support::{GitDaemon, commit_file, git, init_repo, tmp};

/// A TCP proxy in front of `git daemon`: the first pkt-line of each connection (the daemon
/// request, which says whether the client asked for `version=2`) and the bytes sent down.
/// With `v0_only` it drops `version=2` from the request, as a server that ignores it would.
struct Proxy {
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
    down: Arc<AtomicU64>,
    open: Arc<AtomicUsize>,
}

impl Proxy {
    fn start(target: u16, v0_only: bool) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let p = Proxy {
            port: listener.local_addr().unwrap().port(),
            requests: Arc::default(),
            down: Arc::default(),
            open: Arc::default(),
        };
        let (requests, down, open) = (p.requests.clone(), p.down.clone(), p.open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(mut client) = client else { continue };
                let mut server = TcpStream::connect(("127.0.0.1", target)).unwrap();
                open.fetch_add(2, Ordering::SeqCst);
                let mut head = [0u8; 4];
                client.read_exact(&mut head).unwrap();
                let len = usize::from_str_radix(std::str::from_utf8(&head).unwrap(), 16).unwrap();
                let mut req = vec![0u8; len - 4];
                client.read_exact(&mut req).unwrap();
                let mut text = String::from_utf8(req).unwrap();
                requests.lock().unwrap().push(text.replace('\0', " "));
                if v0_only {
                    text = text.replace("version=2\0", "");
                }
                write!(server, "{:04x}{text}", text.len() + 4).unwrap();
                let up = Arc::new(AtomicU64::new(0));
                for (from, to, count) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap(), up),
                    (server, client, down.clone()),
                ] {
                    let open = open.clone();
                    std::thread::spawn(move || {
                        let (mut from, mut to) = (from, to);
                        let mut buf = [0u8; 16 * 1024];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0 || to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                            count.fetch_add(n as u64, Ordering::SeqCst);
                        }
                        let _ = to.shutdown(Shutdown::Write);
                        open.fetch_sub(1, Ordering::SeqCst);
                    });
                }
            }
        });
        p
    }

    /// The requests and the bytes down since the last call, once every connection closed.
    fn take(&self) -> (Vec<String>, u64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self.open.load(Ordering::SeqCst) != 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        (
            std::mem::take(&mut *self.requests.lock().unwrap()),
            self.down.swap(0, Ordering::SeqCst),
        )
    }

    fn url(&self) -> String {
        format!("git://127.0.0.1:{}/fleet", self.port)
    }
}

fn v2(requests: &[String]) -> Vec<bool> {
    requests.iter().map(|r| r.contains("version=2")).collect()
}

/// A status note on HEAD under `refs/notes/rota/<cluster>` (a new notes commit each call).
fn note(work: &Path, cluster: &str, text: &str) -> String {
    git(
        work,
        &[
            "notes",
            "--ref",
            &format!("rota/{cluster}"),
            "add",
            "-f",
            "-m",
            text,
            "HEAD",
        ],
    );
    git(work, &["rev-parse", &format!("refs/notes/rota/{cluster}")])
}

/// The served repo: a branch, notes of `c1` (the agent's own), of `c10` (a name the own
/// one prefixes), and of 300 other clusters, so that the v0 advertisement is about 20 KB.
fn served(root: &Path) -> std::path::PathBuf {
    let work = root.join("served").join("fleet");
    init_repo(&work);
    note(&work, "c1", "c1 ok");
    let other = note(&work, "c10", "c10 ok");
    let mut refs = String::new();
    for i in 0..300 {
        refs.push_str(&format!("create refs/notes/rota/x{i:03} {other}\n"));
    }
    crate::support::git::git_stdin(&work, &["update-ref", "--stdin"], refs.as_bytes());
    work
}

fn source(url: String, auth: Auth, mirror: &Path) -> GitSource {
    let s = GitSource::open(
        SourceConfig {
            url,
            branch: "main".into(),
            auth,
            depth: None,
        },
        mirror,
    )
    .unwrap();
    s.set_notes_clusters(["c1".to_string()]);
    s
}

fn mirrored(src: &GitSource, name: &str) -> Option<String> {
    src.repository()
        .unwrap()
        .refname_to_id(name)
        .ok()
        .map(|o| o.to_string())
}

#[test]
fn an_idle_poll_over_git_daemon_is_one_ls_refs_and_what_moved_is_still_fetched() {
    let t = tmp();
    let work = served(t.path());
    let daemon = GitDaemon::start(&t.path().join("served"));
    let proxy = Proxy::start(daemon.port, false);
    let src = source(proxy.url(), Auth::None, &t.path().join("mirror"));

    // First poll: nothing mirrored, so the probe sees the branch and c1 as moved.
    let first = src.fetch().unwrap();
    let (reqs, _) = proxy.take();
    assert_eq!(v2(&reqs), [true, false], "probe, then libgit2: {reqs:?}");
    assert!(reqs[0].contains("host=127.0.0.1:"), "{reqs:?}");
    let own = mirrored(&src, "refs/rota/remote-notes/c1");
    assert!(own.is_some());
    assert_eq!(mirrored(&src, "refs/rota/remote-notes/c10"), None);

    // What the whole v0 advertisement costs, for scale.
    let v0 = git(
        t.path(),
        &["-c", "protocol.version=0", "ls-remote", &proxy.url()],
    );
    let (_, v0_bytes) = proxy.take();
    assert!(v0.lines().count() > 300 && v0_bytes > 20_000, "{v0_bytes}");

    // Idle: one connection, the probe's, a few hundred bytes; no libgit2 connection.
    let idle = src.fetch().unwrap();
    assert_eq!((idle.commit, idle.changed()), (first.commit, false));
    let (reqs, down) = proxy.take();
    assert_eq!(v2(&reqs), [true], "{reqs:?}");
    assert!(
        down < 1_000,
        "{down} bytes down (the advertisement: {v0_bytes})"
    );
    assert_eq!(
        src.poll_counts(),
        PollCounts {
            by_probe: 1,
            by_libgit2: 1
        }
    );

    // Another cluster's notes moved, one whose name the own one prefixes: still idle.
    note(&work, "c10", "c10 again");
    src.fetch().unwrap();
    assert_eq!(v2(&proxy.take().0), [true]);
    assert_eq!(mirrored(&src, "refs/rota/remote-notes/c10"), None);
    // The guard's notes fetch (no branch) is probed the same way.
    src.fetch_notes().unwrap();
    assert_eq!(v2(&proxy.take().0), [true]);

    // The own notes ref moved: fetched.
    let moved = note(&work, "c1", "c1 moved");
    src.fetch().unwrap();
    assert_eq!(v2(&proxy.take().0), [true, false]);
    assert_eq!(mirrored(&src, "refs/rota/remote-notes/c1"), Some(moved));
    // The branch moved: fetched and seen.
    let next = commit_file(&work, "fleet.yaml", "kind: Fleet\n# 2\n", "two");
    let f = src.fetch().unwrap();
    assert_eq!(v2(&proxy.take().0), [true, false]);
    assert_eq!((f.commit.to_string(), f.changed()), (next, true));
    src.fetch().unwrap();
    assert_eq!(v2(&proxy.take().0), [true]);
    assert_eq!(
        src.poll_counts(),
        PollCounts {
            by_probe: 4,
            by_libgit2: 3
        }
    );

    // Before the fleet is known (no cluster set), no names to ask: libgit2 alone.
    let unscoped = GitSource::open(
        SourceConfig {
            url: proxy.url(),
            branch: "main".into(),
            auth: Auth::None,
            depth: None,
        },
        &t.path().join("unscoped"),
    )
    .unwrap();
    unscoped.fetch().unwrap();
    unscoped.fetch().unwrap();
    assert_eq!(v2(&proxy.take().0), [false, false]);
}

#[test]
fn a_server_that_answers_v0_is_probed_once_then_left_alone() {
    let t = tmp();
    let work = served(t.path());
    let daemon = GitDaemon::start(&t.path().join("served"));
    let proxy = Proxy::start(daemon.port, true);
    let src = source(proxy.url(), Auth::None, &t.path().join("mirror"));
    let first = src.fetch().unwrap();
    // The probe's connection got a v0 advertisement: the poll went on with libgit2.
    assert_eq!(proxy.take().0.len(), 2);
    let next = commit_file(&work, "fleet.yaml", "kind: Fleet\n# 2\n", "two");
    let f = src.fetch().unwrap();
    assert_eq!(f.previous, Some(first.commit));
    assert_eq!(f.commit.to_string(), next);
    src.fetch().unwrap();
    assert_eq!(proxy.take().0.len(), 2, "no probe after the v0 answer");
    assert_eq!(
        src.poll_counts(),
        PollCounts {
            by_probe: 0,
            by_libgit2: 3
        }
    );
}

#[tokio::test]
async fn an_idle_poll_over_smart_http_is_one_ls_refs_with_the_token() {
    let t = tmp();
    let work = served(t.path());
    let basic = base64::engine::general_purpose::STANDARD.encode("x-access-token:ghs_GOOD");
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let addr = super::source::serve_http_backend(
        t.path().join("served"),
        format!("Basic {basic}"),
        Arc::clone(&log),
    )
    .await;
    let src = Arc::new(source(
        format!("http://{addr}/fleet"),
        Auth::HttpsToken {
            username: "x-access-token".into(),
            token: Secret::new("ghs_GOOD"),
        },
        &t.path().join("mirror"),
    ));
    let poll = || {
        let src = Arc::clone(&src);
        async move {
            tokio::task::spawn_blocking(move || src.fetch().unwrap())
                .await
                .unwrap()
        }
    };
    let take = || std::mem::take(&mut *log.lock().unwrap());
    poll().await;
    let first = take();
    assert_eq!(
        &first[..2],
        [
            "GET /fleet/info/refs version=2",
            "POST /fleet/git-upload-pack version=2"
        ],
        "{first:?}"
    );
    assert!(
        first[2..].iter().all(|r| r.ends_with(" -")),
        "then libgit2: {first:?}"
    );
    let idle = poll().await;
    assert!(!idle.changed());
    assert_eq!(
        take(),
        [
            "GET /fleet/info/refs version=2",
            "POST /fleet/git-upload-pack version=2"
        ]
    );
    let moved = note(&work, "c1", "c1 moved");
    poll().await;
    let reqs = take();
    assert!(
        reqs.len() > 2 && reqs[2..].iter().all(|r| r.ends_with(" -")),
        "{reqs:?}"
    );
    assert_eq!(mirrored(&src, "refs/rota/remote-notes/c1"), Some(moved));
    assert_eq!(src.poll_counts().by_probe, 1);
}
