//! The git source against real repositories: file://, a plain path, `git daemon` (git://)
//! with shallow fetches, and an HTTP remote that demands a token.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use rota::source::{Auth, GitSource, Secret, SourceConfig, SourceError};

use super::support::{GitDaemon, commit_file, git, init_repo, tmp};

fn config(url: &str) -> SourceConfig {
    SourceConfig {
        url: url.to_string(),
        branch: "main".into(),
        auth: Auth::None,
        depth: None,
    }
}

#[test]
fn file_url_fetch_follows_the_branch_and_reads_the_tree() {
    let t = tmp();
    let work = t.path().join("work");
    let first = init_repo(&work);
    commit_file(
        &work,
        "clusters/prod-use1.yaml",
        "kind: Cluster\n",
        "add prod",
    );
    commit_file(&work, ".github/workflows/ci.yaml", "on: push\n", "ci");
    std::os::unix::fs::symlink("fleet.yaml", work.join("link.yaml")).unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "symlink"]);
    let head = git(&work, &["rev-parse", "HEAD"]);
    assert_ne!(head, first);

    let src = GitSource::open(
        config(&format!("file://{}", work.display())),
        &t.path().join("mirror"),
    )
    .unwrap();
    assert_eq!(src.current().unwrap(), None);
    let f = src.fetch().unwrap();
    assert_eq!(f.commit.to_string(), head);
    assert_eq!(f.previous, None);
    assert!(f.changed());

    let all = src
        .read_files(f.commit, "", |p| p.ends_with(".yaml"))
        .unwrap();
    let paths: Vec<&str> = all.iter().map(|f| f.path.as_str()).collect();
    // Symlinks are skipped; filtering hidden folders is the fleet loader's business.
    assert_eq!(
        paths,
        [
            ".github/workflows/ci.yaml",
            "clusters/prod-use1.yaml",
            "fleet.yaml"
        ]
    );
    assert_eq!(all[2].data, b"kind: Fleet\n");
    let sub = src.read_files(f.commit, "clusters", |_| true).unwrap();
    assert_eq!(sub.len(), 1);
    assert_eq!(sub[0].path, "prod-use1.yaml");
    let missing = src.read_files(f.commit, "nope", |_| true).unwrap_err();
    assert!(
        missing.to_string().contains("no directory nope"),
        "{missing}"
    );

    // Nothing new: same commit, not changed. A new commit: seen, with its predecessor.
    let again = src.fetch().unwrap();
    assert!(!again.changed());
    let next = commit_file(&work, "fleet.yaml", "kind: Fleet\n# bump\n", "bump");
    let moved = src.fetch().unwrap();
    assert_eq!(moved.commit.to_string(), next);
    assert_eq!(moved.previous.map(|p| p.to_string()), Some(head.clone()));
    // Reading an older commit still works: the mirror keeps history.
    assert_eq!(
        src.read_files(git2::Oid::from_str(&first).unwrap(), "", |_| true)
            .unwrap()
            .len(),
        1
    );

    // A force-push that rewinds the branch is followed too (a revert by reset).
    git(&work, &["reset", "-q", "--hard", &head]);
    let rewound = src.fetch().unwrap();
    assert_eq!(rewound.commit.to_string(), head);
}

#[test]
fn a_plain_path_is_a_file_url_and_a_missing_branch_is_named() {
    let t = tmp();
    let work = t.path().join("work");
    init_repo(&work);
    let mut c = config(work.to_str().unwrap());
    c.branch = "release".into();
    let src = GitSource::open(c, &t.path().join("mirror")).unwrap();
    let err = src.fetch().unwrap_err();
    assert_eq!(err.reason(), "BranchNotFound");
    assert_eq!(
        err.to_string(),
        format!("branch release not found at {}", work.display())
    );

    let ok = GitSource::open(config(work.to_str().unwrap()), &t.path().join("mirror")).unwrap();
    ok.fetch().unwrap();
}

/// The forward-only check needs ancestry, which a shallow mirror hides: `unshallow` makes
/// the mirror whole, and a new head is then seen to descend from the one before.
#[test]
fn a_shallow_mirror_is_made_whole_to_show_ancestry() {
    use rota::source::history::descends;
    let t = tmp();
    let served = t.path().join("served");
    let work = served.join("fleet");
    let first = init_repo(&work);
    let daemon = GitDaemon::start(&served);
    let mut c = config(&daemon.url("fleet"));
    c.depth = Some(1);
    let src = GitSource::open(c, &t.path().join("mirror")).unwrap();
    src.fetch().unwrap();
    // Two commits between fetches: at depth 1 the one in between is not fetched, so the
    // new head's history ends at a shallow boundary before `first`.
    commit_file(&work, "fleet.yaml", "kind: Fleet\n# 2\n", "two");
    let third = commit_file(&work, "fleet.yaml", "kind: Fleet\n# 3\n", "three");
    src.fetch().unwrap();
    let (new, old) = (
        git2::Oid::from_str(&third).unwrap(),
        git2::Oid::from_str(&first).unwrap(),
    );
    let repo = src.repository().unwrap();
    assert!(repo.is_shallow());
    assert!(!descends(&repo, new, old), "hidden by the shallow boundary");
    src.unshallow().unwrap();
    let repo = src.repository().unwrap();
    assert!(!repo.is_shallow());
    assert!(descends(&repo, new, old));
}

#[test]
fn shallow_fetch_over_git_daemon() {
    let t = tmp();
    let served = t.path().join("served");
    let work = served.join("fleet");
    let first = init_repo(&work);
    let second = commit_file(&work, "fleet.yaml", "kind: Fleet\n# 2\n", "two");
    let third = commit_file(&work, "fleet.yaml", "kind: Fleet\n# 3\n", "three");
    let daemon = GitDaemon::start(&served);

    let mut c = config(&daemon.url("fleet"));
    c.depth = Some(1);
    let src = GitSource::open(c, &t.path().join("mirror")).unwrap();
    let f = src.fetch().unwrap();
    assert_eq!(f.commit.to_string(), third);
    let repo = src.repository().unwrap();
    assert!(repo.is_shallow(), "depth 1 makes a shallow mirror");
    assert!(
        repo.find_commit(git2::Oid::from_str(&second).unwrap())
            .is_err(),
        "history not fetched"
    );
    assert!(
        repo.find_commit(git2::Oid::from_str(&first).unwrap())
            .is_err()
    );

    let fourth = commit_file(&work, "fleet.yaml", "kind: Fleet\n# 4\n", "four");
    let f = src.fetch().unwrap();
    assert_eq!(f.commit.to_string(), fourth);
    assert_eq!(f.previous.map(|p| p.to_string()), Some(third));
    let files = src.read_files(f.commit, "", |_| true).unwrap();
    assert_eq!(files[0].data, b"kind: Fleet\n# 4\n");

    // The same daemon, full depth: the whole history arrives.
    let full = GitSource::open(config(&daemon.url("fleet")), &t.path().join("full")).unwrap();
    full.fetch().unwrap();
    let repo = full.repository().unwrap();
    assert!(!repo.is_shallow());
    assert!(
        repo.find_commit(git2::Oid::from_str(&first).unwrap())
            .is_ok()
    );
}

#[test]
fn an_unreachable_remote_is_a_fetch_error_naming_it() {
    let t = tmp();
    // Port 9 (discard) on loopback: nothing listens there in the test machine.
    let src = GitSource::open(config("git://127.0.0.1:9/fleet"), &t.path().join("mirror")).unwrap();
    let err = src.fetch().unwrap_err();
    assert!(matches!(err, SourceError::Fetch { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("fetching git://127.0.0.1:9/fleet (branch main)"),
        "{err}"
    );
}

#[test]
fn missing_ssh_key_or_known_hosts_fail_at_open() {
    let t = tmp();
    let c = SourceConfig {
        url: "git@git.acme.test:acme/fleet.git".into(),
        branch: "main".into(),
        auth: Auth::SshKey {
            user: None,
            private_key: t.path().join("id_ed25519"),
            public_key: None,
            passphrase: None,
            known_hosts: t.path().join("known_hosts"),
        },
        depth: Some(1),
    };
    let err = GitSource::open(c, &t.path().join("mirror")).unwrap_err();
    assert!(err.to_string().contains("known_hosts"), "{err}");
}

/// An HTTP remote that answers every request with 401 and records the Authorization
/// headers it got: libgit2 must send the token as Basic auth once, then give up with our
/// message, never logging the token.
#[tokio::test]
async fn https_token_is_sent_as_basic_auth_once_and_never_shown() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let seen2 = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let seen = Arc::clone(&seen2);
            tokio::spawn(async move {
                let svc =
                    hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let auth = req
                            .headers()
                            .get("authorization")
                            .map(|v| v.to_str().unwrap().to_string());
                        seen.lock().unwrap().push(auth);
                        async move {
                            let mut r = http::Response::new(Full::new(Bytes::from_static(
                                b"auth required",
                            )));
                            *r.status_mut() = http::StatusCode::UNAUTHORIZED;
                            r.headers_mut().insert(
                                "www-authenticate",
                                "Basic realm=\"fleet\"".parse().unwrap(),
                            );
                            Ok::<_, Infallible>(r)
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });

    let t = tmp();
    let c = SourceConfig {
        url: format!("http://{addr}/acme/fleet.git"),
        branch: "main".into(),
        auth: Auth::HttpsToken {
            username: "x-access-token".into(),
            token: Secret::new("ghs_TOPSECRET123"),
        },
        depth: None,
    };
    let src = GitSource::open(c, &t.path().join("mirror")).unwrap();
    let err = tokio::task::spawn_blocking(move || src.fetch())
        .await
        .unwrap()
        .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(text.contains("rejected the token"), "{text}");
    assert!(!text.contains("TOPSECRET"), "{text}");

    let seen = seen.lock().unwrap().clone();
    let with_auth: Vec<&String> = seen.iter().flatten().collect();
    assert_eq!(with_auth.len(), 1, "the token is tried once: {seen:?}");
    let basic = with_auth[0].strip_prefix("Basic ").unwrap();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(basic)
        .unwrap();
    assert_eq!(decoded, b"x-access-token:ghs_TOPSECRET123");
}

/// Smart HTTP through the real `git http-backend` (CGI) behind a server that demands the
/// token as Basic auth: a full fetch with token credentials, and a wrong token refused.
/// Each request is logged in `log` as `METHOD path git-protocol`.
pub(crate) async fn serve_http_backend(
    root: std::path::PathBuf,
    expected: String,
    log: Arc<Mutex<Vec<String>>>,
) -> std::net::SocketAddr {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let root = root.clone();
            let expected = expected.clone();
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let svc =
                    hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let root = root.clone();
                        let expected = expected.clone();
                        log.lock().unwrap().push(format!(
                            "{} {} {}",
                            req.method(),
                            req.uri().path(),
                            req.headers()
                                .get("git-protocol")
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or("-")
                        ));
                        async move {
                            use http_body_util::BodyExt;
                            let authorized = req
                                .headers()
                                .get("authorization")
                                .and_then(|v| v.to_str().ok())
                                == Some(expected.as_str());
                            if !authorized {
                                let mut r = http::Response::new(Full::new(Bytes::new()));
                                *r.status_mut() = http::StatusCode::UNAUTHORIZED;
                                r.headers_mut().insert(
                                    "www-authenticate",
                                    "Basic realm=\"fleet\"".parse().unwrap(),
                                );
                                return Ok::<_, Infallible>(r);
                            }
                            let (parts, body) = req.into_parts();
                            let body = body.collect().await.unwrap().to_bytes();
                            let header = |n: &str| {
                                parts
                                    .headers
                                    .get(n)
                                    .and_then(|v| v.to_str().ok())
                                    .unwrap_or("")
                                    .to_string()
                            };
                            let mut child = tokio::process::Command::new("git")
                                .arg("http-backend")
                                .env("GIT_PROJECT_ROOT", &root)
                                .env("GIT_HTTP_EXPORT_ALL", "1")
                                .env("PATH_INFO", parts.uri.path())
                                .env("QUERY_STRING", parts.uri.query().unwrap_or(""))
                                .env("REQUEST_METHOD", parts.method.as_str())
                                .env("CONTENT_TYPE", header("content-type"))
                                .env("CONTENT_LENGTH", body.len().to_string())
                                .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
                                .env("GIT_PROTOCOL", header("git-protocol"))
                                .env("REMOTE_USER", "x-access-token")
                                .env("REMOTE_ADDR", "127.0.0.1")
                                .stdin(std::process::Stdio::piped())
                                .stdout(std::process::Stdio::piped())
                                .spawn()
                                .unwrap();
                            let mut stdin = child.stdin.take().unwrap();
                            stdin.write_all(&body).await.unwrap();
                            drop(stdin);
                            let out = child.wait_with_output().await.unwrap().stdout;
                            // CGI answer: headers, a blank line, the body.
                            let split = out
                                .windows(4)
                                .position(|w| w == b"\r\n\r\n")
                                .map(|i| (i, 4))
                                .or_else(|| {
                                    out.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2))
                                })
                                .unwrap();
                            let head = String::from_utf8_lossy(&out[..split.0]).to_string();
                            let mut r = http::Response::new(Full::new(Bytes::copy_from_slice(
                                &out[split.0 + split.1..],
                            )));
                            for line in head.lines() {
                                let (k, v) = line.split_once(':').unwrap();
                                if k.eq_ignore_ascii_case("status") {
                                    let code: u16 = v.trim()[..3].parse().unwrap();
                                    *r.status_mut() = http::StatusCode::from_u16(code).unwrap();
                                } else {
                                    r.headers_mut().insert(
                                        http::HeaderName::from_bytes(k.trim().as_bytes()).unwrap(),
                                        v.trim().parse().unwrap(),
                                    );
                                }
                            }
                            Ok(r)
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn token_fetch_through_git_http_backend() {
    let t = tmp();
    let served = t.path().join("served");
    let head = init_repo(&served.join("fleet"));
    let second = commit_file(
        &served.join("fleet"),
        "fleet.yaml",
        "kind: Fleet\n# 2\n",
        "two",
    );
    let basic = base64::engine::general_purpose::STANDARD.encode("x-access-token:ghs_GOOD");
    let addr = serve_http_backend(served.clone(), format!("Basic {basic}"), Arc::default()).await;

    let token_file = t.path().join("token");
    std::fs::write(&token_file, "ghs_GOOD\n").unwrap();
    let config = |token: Secret, depth| SourceConfig {
        url: format!("http://{addr}/fleet"),
        branch: "main".into(),
        auth: Auth::HttpsToken {
            username: "x-access-token".into(),
            token,
        },
        depth,
    };
    let src = GitSource::open(
        config(Secret::from_file(&token_file).unwrap(), Some(1)),
        &t.path().join("m1"),
    )
    .unwrap();
    let first = git2::Oid::from_str(&head).unwrap();
    let (fetched, shallow, has_first) = tokio::task::spawn_blocking(move || {
        let f = src.fetch().map(|f| f.commit.to_string());
        let repo = src.repository().unwrap();
        (f, repo.is_shallow(), repo.find_commit(first).is_ok())
    })
    .await
    .unwrap();
    assert_eq!(fetched.unwrap(), second);
    assert!(shallow && !has_first, "depth 1 over smart HTTP");

    let bad =
        GitSource::open(config(Secret::new("ghs_STALE"), None), &t.path().join("m2")).unwrap();
    let err = tokio::task::spawn_blocking(move || bad.fetch())
        .await
        .unwrap()
        .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(
        text.contains("rejected the token") && !text.contains("ghs_STALE"),
        "{text}"
    );
}

/// Answers every request on `ip` with `answer(request line, Authorization header)`, and logs
/// each request as `METHOD path auth` (`-` when it carried none).
async fn serve_loopback(
    ip: &str,
    log: Arc<Mutex<Vec<String>>>,
    answer: impl Fn(&http::request::Parts) -> http::Response<Full<Bytes>> + Send + Sync + 'static,
) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind(format!("{ip}:0"))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (log, answer) = (Arc::clone(&log), Arc::clone(&answer));
            tokio::spawn(async move {
                let svc =
                    hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let (parts, _) = req.into_parts();
                        let auth = parts
                            .headers
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("-")
                            .to_string();
                        log.lock().unwrap().push(format!(
                            "{} {} {auth}",
                            parts.method,
                            parts.uri.path()
                        ));
                        let r = answer(&parts);
                        async move { Ok::<_, Infallible>(r) }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

/// The repo's host redirected the first request to another host, which asked for
/// credentials: libgit2 follows a first redirect anywhere and the credential callback never
/// looked at who asked, so the fleet repo's token went to that host as Basic auth. Now the
/// token goes only to the configured host: the fetch fails naming the redirect, and the other
/// host sees no credential at all.
#[tokio::test]
async fn a_redirect_to_another_host_gets_no_token() {
    let thief_log: Arc<Mutex<Vec<String>>> = Arc::default();
    let thief = serve_loopback("127.0.0.2", Arc::clone(&thief_log), |_| {
        let mut r = http::Response::new(Full::new(Bytes::new()));
        *r.status_mut() = http::StatusCode::UNAUTHORIZED;
        r.headers_mut()
            .insert("www-authenticate", "Basic realm=\"x\"".parse().unwrap());
        r
    })
    .await;
    let origin = serve_loopback("127.0.0.1", Arc::default(), move |parts| {
        let mut r = http::Response::new(Full::new(Bytes::new()));
        *r.status_mut() = http::StatusCode::FOUND;
        let query = parts
            .uri
            .query()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        let to = format!("http://{thief}{}{query}", parts.uri.path());
        r.headers_mut().insert("location", to.parse().unwrap());
        r
    })
    .await;
    let t = tmp();
    let src = GitSource::open(
        SourceConfig {
            url: format!("http://{origin}/fleet"),
            branch: "main".into(),
            auth: Auth::HttpsToken {
                username: "x-access-token".into(),
                token: Secret::new("ghs_STOLEN"),
            },
            depth: None,
        },
        &t.path().join("mirror"),
    )
    .unwrap();
    let err = tokio::task::spawn_blocking(move || src.fetch())
        .await
        .unwrap()
        .unwrap_err();
    let text = err.to_string();
    let seen = thief_log.lock().unwrap().clone();
    assert!(!seen.is_empty(), "the redirect was followed: {seen:?}");
    assert!(
        seen.iter().all(|r| r.ends_with(" -")),
        "the other host received credentials: {seen:?}"
    );
    assert!(
        text.contains("redirected to another host") && !text.contains("ghs_STOLEN"),
        "{text}"
    );
}
