//! A promotion at fleet size opens its pull request on a GitHub double that refuses what
//! GitHub refuses: a body over 65,536 characters gets `422 Validation Failed`, `body is too
//! long (maximum is 65536 characters)`, as GitHub answers. The 400-cluster fleet of
//! `tests/support/big_fleet.rs` promotes wave `main` (1,264 pools): the body leads with the
//! summary and fits; the per-pool table is committed on the branch and linked.

use crate::support::git::{git, rota};

use crate::support::big_fleet;
use crate::support::loopback::Loopback;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

/// GitHub's limit on a pull request body, in characters.
const GITHUB_BODY_MAX: usize = 65_536;

#[derive(Default)]
struct Pulls {
    /// (head, base, title, body) of each pull request opened.
    opened: Vec<(String, String, String, String)>,
    /// Bodies refused as too long.
    refused: usize,
}

/// GitHub's answer to `method path` with `body`: list open pull requests (none before one is
/// opened), open one (refused past the body limit).
fn answer(s: &mut Pulls, method: &str, path: &str, body: &serde_json::Value) -> (u16, String) {
    match (method, path) {
        ("GET", "/repos/acme/fleet/pulls") => {
            let open: Vec<_> = s
                .opened
                .iter()
                .enumerate()
                .map(|(i, p)| pr(i as u64 + 1, p))
                .collect();
            (200, serde_json::Value::Array(open).to_string())
        }
        ("POST", "/repos/acme/fleet/pulls") => {
            let text = body["body"].as_str().unwrap_or("");
            if text.chars().count() > GITHUB_BODY_MAX {
                s.refused += 1;
                return (
                    422,
                    serde_json::json!({
                        "message": "Validation Failed",
                        "errors": [{"resource": "Issue", "code": "custom", "field": "body",
                            "message": "body is too long (maximum is 65536 characters)"}],
                        "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
                        "status": "422"
                    })
                    .to_string(),
                );
            }
            let p = (
                body["head"].as_str().unwrap_or("").to_string(),
                body["base"].as_str().unwrap_or("").to_string(),
                body["title"].as_str().unwrap_or("").to_string(),
                text.to_string(),
            );
            s.opened.push(p.clone());
            (201, pr(s.opened.len() as u64, &p).to_string())
        }
        _ => (404, r#"{"message":"Not Found"}"#.to_string()),
    }
}

fn pr(n: u64, p: &(String, String, String, String)) -> serde_json::Value {
    serde_json::json!({
        "number": n,
        "html_url": format!("https://github.com/acme/fleet/pull/{n}"),
        "state": "open",
        "title": p.2,
        "body": p.3,
        "head": {"ref": p.0, "label": format!("acme:{}", p.0)},
        "base": {"ref": p.1},
    })
}

async fn serve(state: Arc<Mutex<Pulls>>) -> Loopback {
    use http_body_util::BodyExt;
    Loopback::serve(move |req: hyper::Request<hyper::body::Incoming>| {
        let st = state.clone();
        async move {
            let method = req.method().to_string();
            let path = req.uri().path().to_string();
            let bytes = req.into_body().collect().await.unwrap().to_bytes();
            let body = serde_json::from_slice(&bytes).unwrap_or_default();
            let (status, text) = answer(&mut st.lock().unwrap(), &method, &path, &body);
            hyper::Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(http_body_util::Full::new(bytes::Bytes::from(text)))
                .unwrap()
        }
    })
    .await
}

/// The 400-cluster fleet, its guard off (the promotion is what is tested, not the guard),
/// with a bare origin to push proposals to.
fn big_repo(dir: &Path) -> std::path::PathBuf {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    big_fleet::generate(&work, 400, chrono::Utc::now());
    let fleet = std::fs::read_to_string(work.join("fleet.yaml")).unwrap();
    let off = fleet.replace("promotion: {guard: true}", "promotion: {guard: false}");
    assert_ne!(fleet, off);
    std::fs::write(work.join("fleet.yaml"), off).unwrap();
    git(&work, &["commit", "-q", "-am", "guard off"]);
    let origin = dir.join("origin.git");
    git(
        dir,
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            origin.to_str().unwrap(),
        ],
    );
    git(
        &work,
        &["remote", "add", "origin", origin.to_str().unwrap()],
    );
    git(&work, &["push", "-q", "origin", "main"]);
    origin
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_400_cluster_promotion_opens_a_pull_request_within_githubs_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let origin = big_repo(tmp.path());
    let work = tmp.path().join("work");
    let state: Arc<Mutex<Pulls>> = Default::default();
    let server = serve(state.clone()).await;
    let url = server.url.clone();
    let out = Command::new(rota())
        .args(["promote", "--wave", "main", "--open-pr", "--repo"])
        .arg(&work)
        .args(["--github-repo", "acme/fleet", "--github-api-url", &url])
        .env("ROTA_GITHUB_TOKEN", "t0ken")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("opened pull request #1 "), "{stdout}");
    let s = state.lock().unwrap();
    assert_eq!(s.refused, 0);
    let (head, base, _title, body) = &s.opened[0];
    assert_eq!(
        (head.as_str(), base.as_str()),
        ("rota/promote/main", "main")
    );
    assert!(body.chars().count() <= GITHUB_BODY_MAX, "{}", body.len());
    // It leads with the whole change, counted.
    let main_clusters = (0..400).filter(|&i| big_fleet::wave_of(i) == 2).count();
    let pools = main_clusters * 4;
    let summary = format!(
        "- **wave main**: {} pools in {main_clusters} clusters: general 2026.11.1 → 2026.11.2; AWS 1 region",
        rota::fleet::proposal::count(pools)
    );
    assert!(body.starts_with("### Summary\n\n"), "{body}");
    assert!(body.contains(&summary), "{summary}\n{body}");
    assert!(body.contains("### What to watch once merged"), "{body}");
    // The double's address stands for GitHub Enterprise's (`HOST/api/v3` → `HOST`).
    let link =
        format!("{url}/acme/fleet/blob/rota/promote/main/.rota/proposals/rota-promote-main.md");
    assert!(body.contains(&link), "{body}");
    // The full table is on the branch, one row per pool, and it is past the limit.
    let file = git(
        &origin,
        &[
            "show",
            "rota/promote/main:.rota/proposals/rota-promote-main.md",
        ],
    );
    assert!(file.chars().count() > GITHUB_BODY_MAX, "{}", file.len());
    let rows = file.lines().filter(|l| l.contains(" | changed | ")).count();
    assert_eq!(rows, pools);
    // The fleet reader skips the file: the branch reads as the promotion alone.
    let promoted = rota::source::read::load_git_at(&origin, "rota/promote/main", None).unwrap();
    let pin = promoted.waves().iter().find(|w| w.name == "main").unwrap();
    assert_eq!(pin.images["general"], "2026.11.2");
    assert_eq!(promoted.clusters.len(), 400);
}
