//! `rota promote --wave NAME` writing the promotion commit, with real git: the guard's records
//! are git notes written by the same store the agents use; the command is the real binary.
//! `rota images discover` on the simulated clouds, proposing versions as commits.

use crate::support::api_schemas::{Api, Exchange, check_on_drop};
use crate::support::git::{git, rota};

use std::path::Path;
use std::process::Command;

use chrono::Utc;
use rota::report::GitNotesStore;
use rota::waves::PoolRecord;

const FLEET: &str = r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {name: acme}
spec:
  images:
    general:
      versions:
        "2026.11.1": {aws: ami-0a1b2c3d4e5f60718}
        "2026.11.2": {aws: ami-0f9e8d7c6b5a40312}
  waves:
    - name: canary
      clusters: [canary-1]
      images: {general: "2026.11.2"}   # bumped last week
      soak: 30m
    - name: main
      clusters: [main-1]
      images:
        general: "2026.11.1"   # the one to promote
---
apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {name: canary-1}
spec:
  cloud: {aws: {region: us-east-1}}
  pools:
    - {name: general, channel: general, nodeSelector: {pool: general}, group: {autoScalingGroup: c-general}}
---
apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {name: main-1}
spec:
  cloud: {aws: {region: us-east-1}}
  pools:
    - {name: general, channel: general, nodeSelector: {pool: general}, group: {autoScalingGroup: m-general}}
"#;

/// A repo at FLEET whose canary completed 2026.11.2 `ago` minutes ago (a git note of
/// canary-1, as its agent writes it).
async fn repo(ago: i64) -> (tempfile::TempDir, std::path::PathBuf, String) {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("fleet.yaml"), FLEET).unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "canary: general 2026.11.2"]);
    let head = git(&work, &["rev-parse", "HEAD"]);
    let notes = GitNotesStore::new(&work, Some("canary-1"), None);
    let done = Utc::now() - chrono::Duration::minutes(ago);
    notes
        .set_pool_records(
            &head,
            vec![PoolRecord::new("canary-1", "general").completed("general", "2026.11.2", done)],
        )
        .await
        .unwrap();
    (tmp, work, head)
}

/// A finished command's exit code, stdout and stderr.
fn outcome(out: &std::process::Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn promote(work: &Path, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(rota())
        .args(["promote", "--wave", "main", "--repo"])
        .arg(work)
        .args(extra)
        .output()
        .unwrap();
    outcome(&out)
}

#[tokio::test]
async fn when_the_guard_allows_the_promotion_commit_is_written_with_its_evidence() {
    let (_tmp, work, head) = repo(45).await;
    let (code, out, err) = promote(&work, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("✓ wave main: general 2026.11.1 → 2026.11.2: allowed"),
        "{out}"
    );
    assert!(
        out.contains("promote wave main: general 2026.11.1 → 2026.11.2"),
        "{out}"
    );

    // A commit on main, on top of the old head, that changes only the pin's scalar.
    assert_eq!(git(&work, &["rev-parse", "HEAD~1"]), head);
    assert_eq!(
        git(&work, &["log", "-1", "--format=%s"]),
        "promote wave main: general 2026.11.1 → 2026.11.2"
    );
    let body = git(&work, &["log", "-1", "--format=%b"]);
    assert!(
        body.contains("- canary-1/general (wave canary) completed general@2026.11.2 at "),
        "{body}"
    );
    assert!(body.contains("- wave canary soaked 30m"), "{body}");
    let diff = git(&work, &["diff", "HEAD~1", "HEAD"]);
    assert!(
        diff.contains("-        general: \"2026.11.1\"   # the one to promote\n+        general: \"2026.11.2\"   # the one to promote"),
        "{diff}"
    );
    assert_eq!(
        diff.matches("\n+ ").count() + diff.matches("\n+\t").count(),
        1,
        "{diff}"
    );
    // The work tree follows, and the result is a valid fleet.
    assert_eq!(git(&work, &["status", "--porcelain"]), "");
    let fleet = rota::fleet::load_dir(&work).unwrap();
    assert_eq!(fleet.waves()[1].images["general"], "2026.11.2");

    // Nothing left to promote now.
    let (code, out, _) = promote(&work, &[]);
    assert_eq!(code, 0);
    assert!(out.contains("nothing to promote"), "{out}");
}

#[tokio::test]
async fn during_the_soak_nothing_is_written_and_the_reason_is_given() {
    let (_tmp, work, head) = repo(10).await;
    let (code, out, _) = promote(&work, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("waiting for wave canary to soak general@2026.11.2: 20m left"),
        "{out}"
    );
    assert!(out.contains("nothing written"), "{out}");
    assert_eq!(git(&work, &["rev-parse", "HEAD"]), head);
}

#[tokio::test]
async fn a_branch_for_a_pull_request_and_refusals() {
    let (_tmp, work, head) = repo(45).await;
    let (code, out, err) = promote(&work, &["--branch", "promote/main"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("git push origin promote/main"), "{out}");
    assert_eq!(
        git(&work, &["rev-parse", "HEAD"]),
        head,
        "main stays where it was"
    );
    assert_eq!(git(&work, &["rev-parse", "promote/main~1"]), head);
    // The same branch again: refused, exit 2.
    let (code, _, err) = promote(&work, &["--branch", "promote/main"]);
    assert_eq!(code, 2);
    assert!(err.contains("branch promote/main already exists"), "{err}");
    // Local changes to the file: refused, nothing committed.
    std::fs::write(work.join("fleet.yaml"), format!("{FLEET}# wip\n")).unwrap();
    let (code, _, err) = promote(&work, &[]);
    assert_eq!(code, 2);
    assert!(err.contains("fleet.yaml has uncommitted changes"), "{err}");
    assert_eq!(git(&work, &["rev-parse", "HEAD"]), head);
    // --dry-run only answers.
    git(&work, &["checkout", "-q", "fleet.yaml"]);
    let (code, out, _) = promote(&work, &["--dry-run"]);
    assert_eq!(code, 0);
    assert!(out.contains("allowed"), "{out}");
    assert_eq!(git(&work, &["rev-parse", "HEAD"]), head);
}

// ---- `rota images discover`: the clouds' newest build proposed as a version ------------

use std::sync::Arc;

use rota::cloud::Arch;
use rota::sim::cloud::SimCloud;
use rota::sim::faults::FaultProfile;
use rota::sim::images::SimImage;

const GALLERY: &str = "/subscriptions/1b2c3d4e-0000-4000-8000-000000000001/resourceGroups/images/providers/Microsoft.Compute/galleries/acme/images/general";

/// Publishes general's build `v` (`2026.11.3`) `age` ago in `aws_regions`, on GCP (family
/// acme-general) and in the Azure gallery, each named as its cloud names it.
fn publish(cloud: &SimCloud, v: &str, age: chrono::Duration, aws_regions: &[&str]) {
    let created = Utc::now() - age;
    let dashed = v.replace('.', "-");
    for (i, region) in aws_regions.iter().enumerate() {
        // 17 hex digits: the build's number, then the region's index.
        let n: u64 = v.replace('.', "").parse().unwrap();
        let id = format!("ami-{n:016x}{i}");
        cloud.publish_image(
            SimImage::new(id, &[region], Arch::X86_64)
                .named(format!("acme-general-{dashed}"), created),
        );
    }
    let mut gcp = SimImage::new(
        format!("projects/acme-images/global/images/general-{dashed}"),
        &[],
        Arch::X86_64,
    )
    .named(format!("general-{dashed}"), created);
    gcp.family = Some("acme-general".into());
    cloud.publish_image(gcp);
    cloud.publish_image(
        SimImage::new(format!("{GALLERY}/versions/{v}"), &[], Arch::X86_64).named(v, created),
    );
}

/// The example fleet repo in a fresh git repo.
fn example_repo() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("fleet");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo");
    let status = Command::new("cp")
        .arg("-r")
        .arg(&src)
        .arg(&work)
        .status()
        .unwrap();
    assert!(status.success());
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "the fleet"]);
    (tmp, work)
}

fn discover(work: &Path, url: &str, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(rota())
        .args(["images", "discover", "--repo"])
        .arg(work)
        .args(["--cloud-endpoint", url])
        .args(extra)
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .unwrap();
    outcome(&out)
}

// Multi-threaded: the simulated cloud answers on this runtime while the test waits for the
// rota process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_proposes_the_newest_build_once_baked_pins_the_first_wave_and_is_idempotent() {
    let (cloud, served) = baked_build().await;
    // An older build too: the newest is proposed.
    publish(
        &cloud,
        "2026.11.2",
        chrono::Duration::days(9),
        &["us-east-1", "us-west-2"],
    );
    let (_tmp, work) = example_repo();
    let before = git(&work, &["rev-parse", "HEAD"]);

    // Without --write: said, nothing written.
    let (code, out, err) = discover(&work, &served.url, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("general: new version 2026.11.3 (released "),
        "{out}"
    );
    assert!(out.contains("nothing written"), "{out}");
    assert_eq!(git(&work, &["rev-parse", "HEAD"]), before);

    // --write: one commit that adds the version and pins it on the canary wave, nothing else.
    let (code, out, err) = discover(&work, &served.url, &["--write"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("images: general 2026.11.3 on wave canary"),
        "{out}"
    );
    assert_eq!(
        git(&work, &["status", "--porcelain"]),
        "",
        "the work tree is checked out"
    );
    let diff = git(&work, &["diff", "-U0", "HEAD~1", "--", "fleet.yaml"]);
    let removed: Vec<&str> = diff
        .lines()
        .filter(|l| l.starts_with('-') && !l.starts_with("---"))
        .collect();
    assert_eq!(
        removed,
        [r#"-      images: {general: "2026.11.2", gpu: "2026.11.1"}"#],
        "{diff}"
    );
    assert!(
        diff.contains(r#"+      images: {general: "2026.11.3", gpu: "2026.11.1"}"#),
        "{diff}"
    );
    assert!(
        diff.contains("+        \"2026.11.3\":\n+          released: \""),
        "{diff}"
    );
    assert!(diff.contains("+            us-west-2: ami-0"), "{diff}");
    assert!(
        diff.contains("+          gcp: projects/acme-images/global/images/general-2026-11-3"),
        "{diff}"
    );
    let out = Command::new(rota())
        .args(["validate"])
        .arg(&work)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Again: nothing to do, nothing written.
    let head = git(&work, &["rev-parse", "HEAD"]);
    let (code, out, _) = discover(&work, &served.url, &["--write"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("general: up to date: version 2026.11.3"),
        "{out}"
    );
    assert_eq!(git(&work, &["rev-parse", "HEAD"]), head);

    // A build an hour old bakes (minAge 72h): said, exit 1, nothing written; --security
    // proposes it and the commit says why.
    publish(
        &cloud,
        "2026.11.4",
        chrono::Duration::hours(1),
        &["us-east-1", "us-west-2"],
    );
    let (code, out, _) = discover(&work, &served.url, &["--write"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("general: 2026.11.4 (released ")
            && out.contains("is baking: proposable from "),
        "{out}"
    );
    assert_eq!(git(&work, &["rev-parse", "HEAD"]), head);
    let (code, out, err) = discover(
        &work,
        &served.url,
        &[
            "--write",
            "--security",
            "CVE-2026-4242",
            "--branch",
            "images/general",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        git(&work, &["rev-parse", "HEAD"]),
        head,
        "a --branch leaves the current one"
    );
    let msg = git(&work, &["log", "-1", "--format=%B", "images/general"]);
    assert!(msg.contains("skipped for security: CVE-2026-4242"), "{msg}");

    // A build that has reached us-east-1 only: the proposal waits, naming the region.
    publish(
        &cloud,
        "2026.11.5",
        chrono::Duration::minutes(30),
        &["us-east-1"],
    );
    let (code, out, _) = discover(&work, &served.url, &["--write"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("general: waiting: the newest build differs"),
        "{out}"
    );
    assert!(
        out.contains("aws us-west-2 x86_64 (acme-general-2026-11-4)"),
        "{out}"
    );

    // A channel with no source, asked by name: an error, nothing written.
    let (code, out, err) = discover(&work, &served.url, &["--channel", "gpu"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        out.contains("gpu: cannot tell: channel gpu has no source"),
        "{out}"
    );
    assert!(err.contains("nothing written"), "{err}");
    assert_eq!(git(&work, &["rev-parse", "HEAD"]), head);
}

/// A newer image whose name carries a newline, markdown, a mention and a terminal escape (its
/// publisher typed it): nothing of it reaches the terminal raw, a file, a commit or a pull
/// request; the channel stops with an error that says which character, and nothing is
/// written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_image_name_is_refused_by_kind_and_nothing_is_written() {
    let (cloud, served) = baked_build().await;
    let hostile = "acme-general-2026-11-9\n\n## Approved @octocat [merge](https://evil.example) \x1b]52;c;eA==\x07";
    cloud.publish_image(
        SimImage::new(
            "ami-0fffffffffffffff0".to_string(),
            &["us-east-1"],
            Arch::X86_64,
        )
        .named(hostile.to_string(), Utc::now() - chrono::Duration::days(3)),
    );
    let (_tmp, work) = example_repo();
    let before = git(&work, &["rev-parse", "HEAD"]);
    let (code, out, err) = discover(&work, &served.url, &["--write"]);
    assert_ne!(code, 0, "{out}{err}");
    let all = format!("{out}{err}");
    assert!(
        all.contains("image ami-0fffffffffffffff0 is named in a way rota does not copy")
            && all.contains("character 23 is '\\n'"),
        "{all}"
    );
    for raw in ["octocat", "evil.example", "\x1b", "\x07", "## Approved"] {
        assert!(!all.contains(raw), "{raw:?} shown: {all}");
    }
    assert_eq!(
        git(&work, &["rev-parse", "HEAD"]),
        before,
        "nothing written"
    );
}

/// `--print-policy`: the IAM policy for this fleet, asking no cloud: the example fleet's
/// channel is a name filter, so `ec2:DescribeImages` and no `ssm:GetParameter` at all.
#[test]
fn print_policy_grants_what_the_fleet_names_and_no_more() {
    let (_tmp, work) = example_repo();
    let (code, out, err) = discover(
        &work,
        "http://127.0.0.1:9",
        &["--print-policy", "123456789012"],
    );
    assert_eq!(code, 0, "{out}{err}");
    let policy: serde_json::Value = serde_json::from_str(&out).unwrap();
    let statements = policy["Statement"].as_array().unwrap();
    assert_eq!(statements.len(), 1, "{policy}");
    assert_eq!(statements[0]["Action"], "ec2:DescribeImages");
}

// ---- `--open-pr`: a branch per channel, pushed, and one pull request kept up to date -----

/// The simulated clouds with general's build 2026.11.3 published four days ago in both AWS
/// regions, GCP and Azure, served over HTTP.
async fn baked_build() -> (SimCloud, rota::sim::wire::Served) {
    let cloud = SimCloud::new(7, FaultProfile::default(), 1000.0);
    publish(
        &cloud,
        "2026.11.3",
        chrono::Duration::days(4),
        &["us-east-1", "us-west-2"],
    );
    let served = rota::sim::wire::serve(Arc::new(cloud.clone()))
        .await
        .unwrap();
    (cloud, served)
}

/// A bare `origin` beside `work`, holding its main branch (a loopback remote).
fn with_origin(dir: &Path, work: &Path) -> std::path::PathBuf {
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
    git(work, &["remote", "add", "origin", origin.to_str().unwrap()]);
    git(work, &["push", "-q", "origin", "main"]);
    origin
}

/// `rota images discover --open-pr` on `work`, the forge's token in the environment.
fn discover_open_pr(work: &Path, cloud: &str, flags: &[String]) -> (i32, String, String) {
    let out = Command::new(rota())
        .args(["images", "discover", "--open-pr", "--repo"])
        .arg(work)
        .args(["--cloud-endpoint", cloud])
        .args(flags)
        .env("KUBECONFIG", "/nonexistent")
        .env("ROTA_GITHUB_TOKEN", "t0ken")
        .env("ROTA_GITLAB_TOKEN", "t0ken")
        .env("ROTA_GITEA_TOKEN", "t0ken")
        .output()
        .unwrap();
    outcome(&out)
}

/// A GitHub double of the three pull-request calls rota makes (list open by head, open,
/// update), as GitHub's REST reference describes them; Gitea's under `/api/v1` and GitLab's
/// merge requests under `/api/v4` too. Every exchange is recorded, and when the double is
/// dropped the GitHub and Gitea ones are held to the forges' published descriptions
/// (`tests/support/api_schemas.rs`): rota's requests and the double's answers alike.
struct GitHubPulls {
    url: String,
    state: Arc<std::sync::Mutex<PullsState>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct PullsState {
    /// (number, head, base, title, body)
    pulls: Vec<(u64, String, String, String, String)>,
    /// The pull requests a person closed: (number, closed_at).
    closed: Vec<(u64, String)>,
    /// The pull requests someone else opened: (number, head repository, author). Every other
    /// one is rota's own: from `acme/fleet`, by `rota-bot` (the token's user).
    foreign: Vec<(u64, String, String)>,
    /// A hostile forge: every `number` (GitLab: `iid`) it answers is a string.
    numbers_as_strings: bool,
    /// A hostile forge: the web addresses it answers carry terminal escape sequences.
    hostile_urls: bool,
    requests: Vec<String>,
    exchanges: Vec<Exchange>,
}

/// The user the double's token acts as (`GET /user`).
const ROTA_USER: &str = "rota-bot";

impl PullsState {
    /// Pull request `n`'s head repository and author.
    fn origin_of(&self, n: u64) -> (String, String) {
        match self.foreign.iter().find(|f| f.0 == n) {
            Some((_, repo, author)) => (repo.clone(), author.clone()),
            None => ("acme/fleet".into(), ROTA_USER.into()),
        }
    }

    /// Someone else's pull request of `head` into main, from `repo`, by `author`: its number.
    fn seed_foreign(&mut self, head: &str, repo: &str, author: &str, body: &str) -> u64 {
        let n = self.pulls.len() as u64 + 1;
        self.pulls.push((
            n,
            head.into(),
            "main".into(),
            "a pull request".into(),
            body.into(),
        ));
        self.foreign.push((n, repo.into(), author.into()));
        n
    }

    /// When pull request `n` was closed (`None`: open).
    fn closed_at(&self, n: u64) -> Option<String> {
        self.closed.iter().find(|c| c.0 == n).map(|c| c.1.clone())
    }

    /// The pull requests a list asks for by its `state` (`open`/`opened`, `closed`, `all`).
    fn in_state(&self, query: &str) -> Vec<(u64, String, String, String, String)> {
        let state = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("state="))
            .unwrap_or("open");
        self.pulls
            .iter()
            .filter(|p| match state {
                "closed" => self.closed_at(p.0).is_some(),
                "all" => true,
                _ => self.closed_at(p.0).is_none(),
            })
            .cloned()
            .collect()
    }
}

impl Drop for GitHubPulls {
    fn drop(&mut self) {
        self.task.abort();
        if self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .numbers_as_strings
        {
            // Off the descriptions on purpose: a hostile forge's answers.
            return;
        }
        let exchanges = std::mem::take(
            &mut self
                .state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .exchanges,
        );
        let (mut github, mut gitea) = (Vec::new(), Vec::new());
        for mut x in exchanges {
            if let Some(rest) = x.path.strip_prefix("/api/v1") {
                // Gitea's description names its paths relative to /api/v1.
                x.path = rest.to_string();
                gitea.push(x);
            } else if !x.path.starts_with("/api/v4") {
                github.push(x);
            }
            // GitLab's merge requests (/api/v4) are not checked: no registry package ships
            // GitLab's API description.
        }
        check_on_drop(Api::GitHub, github);
        check_on_drop(Api::Gitea, gitea);
    }
}

impl GitHubPulls {
    async fn start() -> GitHubPulls {
        use http_body_util::BodyExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state: Arc<std::sync::Mutex<PullsState>> = Default::default();
        let (st, base) = (state.clone(), url.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (st, base) = (st.clone(), base.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let (st, base) = (st.clone(), base.clone());
                            async move {
                                let method = req.method().to_string();
                                let path = req.uri().path().to_string();
                                let query = req.uri().query().unwrap_or("").to_string();
                                let header = |h: &str| {
                                    req.headers()
                                        .get(h)
                                        .and_then(|v| v.to_str().ok())
                                        .unwrap_or("")
                                        .to_string()
                                };
                                // GitHub: Bearer; Gitea: token; GitLab: PRIVATE-TOKEN.
                                let auth = match header("authorization").as_str() {
                                    "Bearer t0ken" | "token t0ken" => "Bearer t0ken".to_string(),
                                    _ if header("private-token") == "t0ken" => {
                                        "Bearer t0ken".to_string()
                                    }
                                    a => a.to_string(),
                                };
                                let body = req.into_body().collect().await.unwrap().to_bytes();
                                let body: serde_json::Value =
                                    serde_json::from_slice(&body).unwrap_or_default();
                                let mut s = st.lock().unwrap();
                                s.requests.push(format!("{method} {path}"));
                                let (status, answer) = if auth != "Bearer t0ken" {
                                    (401, forge_error(&path, 401, "Bad credentials"))
                                } else {
                                    github_pulls(&mut s, &base, &method, &path, &query, &body)
                                };
                                s.exchanges.push(Exchange {
                                    method: method.clone(),
                                    path: match query.as_str() {
                                        "" => path.clone(),
                                        q => format!("{path}?{q}"),
                                    },
                                    status,
                                    request: body.clone(),
                                    response: answer.clone(),
                                    headers: Vec::new(),
                                });
                                Ok::<_, std::convert::Infallible>(
                                    hyper::Response::builder()
                                        .status(status)
                                        .header("content-type", "application/json")
                                        .body(http_body_util::Full::new(bytes::Bytes::from(
                                            answer.to_string(),
                                        )))
                                        .unwrap(),
                                )
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        GitHubPulls { url, state, task }
    }
}

/// Pull request `n` with the title and the text (`text_key`: `body`, GitLab's
/// `description`) the request sets; `None` if there is no such pull request.
fn update_pull(
    s: &mut PullsState,
    n: u64,
    body: &serde_json::Value,
    text_key: &str,
) -> Option<(u64, String, String, String, String)> {
    let p = s.pulls.iter_mut().find(|x| x.0 == n)?;
    if let Some(t) = body["title"].as_str() {
        p.3 = t.into();
    }
    if let Some(d) = body[text_key].as_str() {
        p.4 = d.into();
    }
    Some(p.clone())
}

/// An error answer in the forge's dialect, for a request to `path`: GitHub's `basic-error`
/// (with the documentation it points to and the status), Gitea's `APIError` (under `/api/v1`),
/// GitLab's `{"message"}` (under `/api/v4`).
fn forge_error(path: &str, status: u16, message: &str) -> serde_json::Value {
    if path.starts_with("/api/v1") {
        serde_json::json!({"message": message, "url": "https://gitea.example/api/swagger"})
    } else if path.starts_with("/api/v4") {
        serde_json::json!({"message": message})
    } else {
        serde_json::json!({
            "message": message,
            "documentation_url": "https://docs.github.com/rest",
            "status": status.to_string(),
        })
    }
}

fn github_pulls(
    s: &mut PullsState,
    base: &str,
    method: &str,
    path: &str,
    query: &str,
    body: &serde_json::Value,
) -> (u16, serde_json::Value) {
    let closed: Vec<(u64, String)> = s.closed.clone();
    let closed_at = |n: u64| closed.iter().find(|c| c.0 == n).map(|c| c.1.clone());
    let origins: Vec<(u64, (String, String))> =
        s.pulls.iter().map(|p| (p.0, s.origin_of(p.0))).collect();
    let origin = |n: u64| {
        origins
            .iter()
            .find(|o| o.0 == n)
            .map(|o| o.1.clone())
            .unwrap_or_else(|| ("acme/fleet".into(), ROTA_USER.into()))
    };
    let strings = s.numbers_as_strings;
    let number = |n: u64| {
        if strings {
            serde_json::json!(n.to_string())
        } else {
            serde_json::json!(n)
        }
    };
    let hostile = s.hostile_urls;
    let html_url = |n: u64| {
        if hostile {
            format!(
                "{base}/acme/fleet/pull/{n}\x1b]8;;https://evil.example\x07here\x1b]8;;\x07\x07\r"
            )
        } else {
            format!("{base}/acme/fleet/pull/{n}")
        }
    };
    let pr = |p: &(u64, String, String, String, String)| {
        let (repo, author) = origin(p.0);
        serde_json::json!({
            "number": number(p.0),
            "html_url": html_url(p.0),
            "state": if closed_at(p.0).is_some() { "closed" } else { "open" },
            "closed_at": closed_at(p.0),
            "title": p.3,
            "body": p.4,
            "user": {"login": author},
            "head": {
                "ref": p.1,
                "label": format!("{}:{}", repo.split('/').next().unwrap_or_default(), p.1),
                "repo": {"full_name": repo},
            },
            "base": {"ref": p.2},
        })
    };
    // Who the token is: GitHub's and Gitea's `login`, GitLab's `username`.
    match (method, path) {
        ("GET", "/user") | ("GET", "/api/v1/user") => {
            return (200, serde_json::json!({"login": ROTA_USER}));
        }
        ("GET", "/api/v4/user") => return (200, serde_json::json!({"username": ROTA_USER})),
        _ => {}
    }
    // GitLab's merge requests speak another dialect: iid, web_url, source/target branch,
    // description; translated to the same store.
    if let Some(rest) = path.strip_prefix("/api/v4/projects/acme%2Ffleet/merge_requests") {
        let mr = |p: &(u64, String, String, String, String)| {
            let (repo, author) = origin(p.0);
            serde_json::json!({
                "iid": number(p.0),
                // A fork is another project: its merge requests' source differs.
                "source_project_id": if repo == "acme/fleet" { 7 } else { 99 },
                "target_project_id": 7,
                "author": {"username": author},
                "web_url": format!("{base}/acme/fleet/-/merge_requests/{}", p.0),
                "state": if closed_at(p.0).is_some() { "closed" } else { "opened" },
                "closed_at": closed_at(p.0),
                "title": p.3,
                "description": p.4,
                "source_branch": p.1,
                "target_branch": p.2,
            })
        };
        return match (method, rest) {
            ("GET", "") => {
                let source = query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("source_branch="))
                    .map(|h| h.replace("%2F", "/"))
                    .unwrap_or_default();
                let open: Vec<_> = s
                    .in_state(query)
                    .iter()
                    .filter(|p| p.1 == source)
                    .map(mr)
                    .collect();
                (200, serde_json::Value::Array(open))
            }
            ("POST", "") => {
                let (Some(head), Some(b), Some(title)) = (
                    body["source_branch"].as_str(),
                    body["target_branch"].as_str(),
                    body["title"].as_str(),
                ) else {
                    return (
                        400,
                        serde_json::json!({"message": "source_branch, target_branch, title are missing"}),
                    );
                };
                if s.in_state("")
                    .iter()
                    .any(|p| p.1 == head && s.origin_of(p.0).0 == "acme/fleet")
                {
                    return (
                        409,
                        serde_json::json!({"message": ["Another open merge request already exists for this source branch"]}),
                    );
                }
                let n = s.pulls.len() as u64 + 1;
                let description = body["description"].as_str().unwrap_or("");
                let p = (n, head.into(), b.into(), title.into(), description.into());
                s.pulls.push(p.clone());
                (201, mr(&p))
            }
            ("PUT", iid) => {
                let n: u64 = iid.trim_start_matches('/').parse().unwrap_or(0);
                match update_pull(s, n, body, "description") {
                    Some(p) => (200, mr(&p)),
                    None => (404, serde_json::json!({"message": "404 Not found"})),
                }
            }
            _ => (404, serde_json::json!({"message": "404 Not found"})),
        };
    }
    // Gitea (under /api/v1) lists every open pull request, answers an edit with 201 and a
    // second pull request for a head with 409; otherwise it looks like GitHub.
    let full = path;
    let gitea = path.starts_with("/api/v1");
    let path = path.strip_prefix("/api/v1").unwrap_or(path);
    // A refused creation: GitHub's 422 `validation-error` whatever the reason; Gitea's
    // APIError with the status it answers (422 invalid, 409 a duplicate).
    let invalid = |status: u16, message: &str| {
        if gitea {
            (status, forge_error(full, status, message))
        } else {
            (
                422,
                serde_json::json!({
                    "message": "Validation Failed",
                    "errors": [{"resource": "PullRequest", "code": "custom", "message": message}],
                    "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
                    "status": "422",
                }),
            )
        }
    };
    match (method, path) {
        ("GET", "/repos/acme/fleet/pulls") => {
            let head = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("head="))
                .map(|h| h.replace("%2F", "/"))
                .unwrap_or_default();
            let open: Vec<_> = s
                .in_state(query)
                .iter()
                .filter(|p| {
                    // GitHub's `head` filter is `user:ref`: the head repository's owner.
                    let owner = s
                        .origin_of(p.0)
                        .0
                        .split('/')
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    head.is_empty() || gitea || format!("{owner}:{}", p.1) == head
                })
                .map(pr)
                .collect();
            (200, serde_json::Value::Array(open))
        }
        ("POST", "/repos/acme/fleet/pulls") => {
            // GitHub requires head and base; title or an issue.
            let (Some(head), Some(b), Some(title)) = (
                body["head"].as_str(),
                body["base"].as_str(),
                body["title"].as_str(),
            ) else {
                return invalid(422, "head, base and title are required");
            };
            if s.in_state("")
                .iter()
                .any(|p| p.1 == head && s.origin_of(p.0).0 == "acme/fleet")
            {
                return invalid(
                    409,
                    &format!("A pull request already exists for acme:{head}."),
                );
            }
            let n = s.pulls.len() as u64 + 1;
            let p = (
                n,
                head.into(),
                b.into(),
                title.into(),
                body["body"].as_str().unwrap_or("").into(),
            );
            s.pulls.push(p.clone());
            (201, pr(&p))
        }
        ("PATCH", p) if p.starts_with("/repos/acme/fleet/pulls/") => {
            let n: u64 = p.rsplit('/').next().unwrap().parse().unwrap();
            match update_pull(s, n, body, "body") {
                Some(p) => (if gitea { 201 } else { 200 }, pr(&p)),
                None => (404, forge_error(full, 404, "Not Found")),
            }
        }
        _ => (404, forge_error(full, 404, "Not Found")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_pr_pushes_a_branch_per_channel_and_keeps_one_pull_request_up_to_date() {
    let (_cloud, served) = baked_build().await;
    let (tmp, work) = example_repo();
    let origin = with_origin(tmp.path(), &work);
    let head = git(&work, &["rev-parse", "HEAD"]);
    let gh = GitHubPulls::start().await;
    let run = |extra: &[&str]| {
        let flags: Vec<String> = extra.iter().map(|f| f.to_string()).collect();
        discover_open_pr(&work, &served.url, &flags)
    };
    let forge = ["--github-repo", "acme/fleet", "--github-api-url", &gh.url];
    let (code, out, err) = run(&forge);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("general: opened pull request #1 "), "{out}");
    // The branch is on the remote, one commit on main; main itself did not move.
    assert_eq!(git(&work, &["rev-parse", "HEAD"]), head);
    let pushed = git(&origin, &["rev-parse", "refs/heads/rota/images/general^"]);
    assert_eq!(pushed, head);
    {
        let s = gh.state.lock().unwrap();
        assert_eq!(s.pulls.len(), 1);
        let (_, h, b, title, body) = &s.pulls[0];
        assert_eq!((h.as_str(), b.as_str()), ("rota/images/general", "main"));
        assert_eq!(title, "images: general 2026.11.3 on wave canary");
        assert!(body.contains("proposes general@2026.11.3"), "{body}");
        assert!(
            body.contains("2026.11.2") && body.contains("| "),
            "the diff's tables: {body}"
        );
    }
    // Again: the same branch rewritten and force-pushed, the open pull request updated.
    let (code, out, err) = run(&forge);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("general: updated pull request #1 "), "{out}");
    {
        let s = gh.state.lock().unwrap();
        assert_eq!(
            s.pulls.len(),
            1,
            "never a second pull request for a channel"
        );
        assert_eq!(
            s.requests.iter().filter(|r| r.starts_with("POST")).count(),
            1,
            "{:?}",
            s.requests
        );
        assert!(
            s.requests
                .iter()
                .any(|r| r == "PATCH /repos/acme/fleet/pulls/1")
        );
    }
    // Git alone: the branch, and a line that says so.
    let (code, out, err) = run(&[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("general: pushed rota/images/general to origin; no forge configured"),
        "{out}"
    );
    // A forge that refuses: the error names the branch already pushed.
    let (code, out, err) = run(&["--github-repo", "acme/other", "--github-api-url", &gh.url]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("the branch rota/images/general is pushed, the pull request failed"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_open_pr_proposes_the_promotion_once_and_updates_it() {
    let (tmp, work, head) = repo(60).await;
    let origin = with_origin(tmp.path(), &work);
    let gh = GitHubPulls::start().await;
    let run = || {
        let out = Command::new(rota())
            .args(["promote", "--wave", "main", "--open-pr", "--repo"])
            .arg(&work)
            .args(["--github-repo", "acme/fleet", "--github-api-url", &gh.url])
            .env("ROTA_GITHUB_TOKEN", "t0ken")
            .output()
            .unwrap();
        outcome(&out)
    };
    let (code, out, err) = run();
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("opened pull request #1 "), "{out}");
    assert_eq!(
        git(&work, &["rev-parse", "HEAD"]),
        head,
        "main does not move"
    );
    assert_eq!(
        git(&origin, &["rev-parse", "refs/heads/rota/promote/main^"]),
        head
    );
    {
        let s = gh.state.lock().unwrap();
        let (_, h, b, title, body) = &s.pulls[0];
        assert_eq!((h.as_str(), b.as_str()), ("rota/promote/main", "main"));
        assert_eq!(title, "promote wave main: general 2026.11.1 → 2026.11.2");
        assert!(body.contains("allowed"), "the guard's answer: {body}");
    }
    let (code, out, err) = run();
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("updated pull request #1 "), "{out}");
    assert_eq!(gh.state.lock().unwrap().pulls.len(), 1);
}

/// The same proposal through GitLab's and Gitea's dialects: opened once, then updated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_pr_speaks_gitlab_and_gitea_too() {
    let (_cloud, served) = baked_build().await;
    for forge in ["gitlab", "gitea"] {
        let (tmp, work) = example_repo();
        with_origin(tmp.path(), &work);
        let double = GitHubPulls::start().await;
        let flags: Vec<String> = match forge {
            "gitlab" => vec![
                "--gitlab-project".into(),
                "acme/fleet".into(),
                "--gitlab-api-url".into(),
                format!("{}/api/v4", double.url),
            ],
            _ => vec![
                "--gitea-repo".into(),
                "acme/fleet".into(),
                "--gitea-api-url".into(),
                format!("{}/api/v1", double.url),
            ],
        };
        let run = || discover_open_pr(&work, &served.url, &flags);
        let (code, out, err) = run();
        assert_eq!(code, 0, "{forge}: {out}{err}");
        assert!(
            out.contains("general: opened pull request #1 "),
            "{forge}: {out}"
        );
        let (code, out, err) = run();
        assert_eq!(code, 0, "{forge}: {out}{err}");
        assert!(
            out.contains("general: updated pull request #1 "),
            "{forge}: {out}"
        );
        let s = double.state.lock().unwrap();
        assert_eq!(s.pulls.len(), 1, "{forge}: {:?}", s.requests);
        assert_eq!(
            (s.pulls[0].1.as_str(), s.pulls[0].2.as_str()),
            ("rota/images/general", "main")
        );
        assert!(
            s.pulls[0].4.contains("proposes general@2026.11.3"),
            "{forge}"
        );
    }
}

// ---- hostile forges: whose pull request it is, what the forge answers -------------------

/// The flags that point a command at `double` as `forge`.
fn forge_flags(forge: &str, double: &GitHubPulls) -> Vec<String> {
    let (repo_flag, api_flag, api) = match forge {
        "github" => ("--github-repo", "--github-api-url", double.url.clone()),
        "gitlab" => (
            "--gitlab-project",
            "--gitlab-api-url",
            format!("{}/api/v4", double.url),
        ),
        _ => (
            "--gitea-repo",
            "--gitea-api-url",
            format!("{}/api/v1", double.url),
        ),
    };
    [repo_flag, "acme/fleet", api_flag, &api]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// A fork's pull request from a branch named like rota's is someone else's: never rewritten,
/// on any forge; rota opens its own beside it. GitHub's `head=owner:branch` filter already
/// leaves forks out, so there the attack is a pull request of rota's branch by another user.
/// One from the repository's own branch by someone else is not rewritten either: an error
/// names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_request_of_rotas_branch_by_someone_else_is_never_rewritten() {
    let (_cloud, served) = baked_build().await;
    for forge in ["github", "gitlab", "gitea"] {
        let (tmp, work) = example_repo();
        with_origin(tmp.path(), &work);
        let double = GitHubPulls::start().await;
        let flags = forge_flags(forge, &double);
        if forge != "github" {
            let theirs = double.state.lock().unwrap().seed_foreign(
                "rota/images/general",
                "mallory/fleet",
                "mallory",
                "merge me: the attacker's commits",
            );
            let (code, out, err) = discover_open_pr(&work, &served.url, &flags);
            assert_eq!(code, 0, "{forge}: {out}{err}");
            assert!(
                out.contains("general: opened pull request #2 "),
                "{forge}: rota opens its own beside the fork's: {out}"
            );
            let (code, out, err) = discover_open_pr(&work, &served.url, &flags);
            assert_eq!(code, 0, "{forge}: {out}{err}");
            assert!(
                out.contains("general: updated pull request #2 "),
                "{forge}: {out}"
            );
            let s = double.state.lock().unwrap();
            let fork = s.pulls.iter().find(|p| p.0 == theirs).unwrap();
            assert_eq!(
                fork.3, "a pull request",
                "{forge}: the fork's title is untouched"
            );
            assert_eq!(fork.4, "merge me: the attacker's commits", "{forge}");
            assert!(
                !s.requests
                    .iter()
                    .any(|r| r.ends_with(&format!("/{theirs}"))),
                "{forge}: no request to the fork's pull request: {:?}",
                s.requests
            );
        }
        // The repository's own branch, someone else's pull request: refused, named.
        let (tmp, work) = example_repo();
        with_origin(tmp.path(), &work);
        let double = GitHubPulls::start().await;
        let flags = forge_flags(forge, &double);
        double.state.lock().unwrap().seed_foreign(
            "rota/images/general",
            "acme/fleet",
            "mallory",
            "theirs",
        );
        let (code, out, err) = discover_open_pr(&work, &served.url, &flags);
        assert_eq!(code, 2, "{forge}: {out}{err}");
        assert!(
            err.contains("of branch rota/images/general was opened by mallory, not by rota's user rota-bot: rota does not rewrite it"),
            "{forge}: {err}"
        );
        let s = double.state.lock().unwrap();
        assert_eq!(s.pulls[0].4, "theirs", "{forge}");
        assert!(
            s.requests.iter().all(|r| r.starts_with("GET")),
            "{forge}: only looked: {:?}",
            s.requests
        );
    }
}

/// Someone else's closed pull request of the revert branch (a fork's on GitLab and Gitea,
/// another user's on GitHub) is no person's answer to rota's proposal: the revert of the
/// failing wave is still proposed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn someone_elses_closed_pull_request_does_not_decline_a_revert() {
    for forge in ["github", "gitlab", "gitea"] {
        let (tmp, _work, origin, _head) = failed_canary().await;
        let state = tmp.path().join("state");
        let double = GitHubPulls::start().await;
        let (repo, who) = match forge {
            "github" => ("acme/fleet", "mallory"),
            _ => ("mallory/fleet", "mallory"),
        };
        {
            let mut s = double.state.lock().unwrap();
            let n = s.seed_foreign(REVERT_BRANCH, repo, who, "closed by its author");
            s.closed.push((
                n,
                (Utc::now() + chrono::Duration::seconds(2))
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            ));
        }
        let flags = forge_flags(forge, &double);
        let (code, out, err) = propose_on(&origin, &state, &flags, &["--no-promotions"]);
        assert_eq!(code, 0, "{forge}: {out}{err}");
        assert!(
            out.contains("revert wave canary general: opened pull request #2 "),
            "{forge}: {out}"
        );
    }
}

/// A forge that answers `number` (GitLab: `iid`) as a string: an error naming the field,
/// never "no pull request found" and a second one opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_request_number_that_is_not_a_number_is_an_error_naming_the_field() {
    let (_cloud, served) = baked_build().await;
    for (forge, field) in [
        ("github", "[0].number"),
        ("gitlab", "[0].iid"),
        ("gitea", "[0].number"),
    ] {
        let (tmp, work) = example_repo();
        with_origin(tmp.path(), &work);
        let double = GitHubPulls::start().await;
        let flags = forge_flags(forge, &double);
        let (code, out, err) = discover_open_pr(&work, &served.url, &flags);
        assert_eq!(code, 0, "{forge}: {out}{err}");
        double.state.lock().unwrap().numbers_as_strings = true;
        let asked = double.state.lock().unwrap().requests.len();
        let (code, out, err) = discover_open_pr(&work, &served.url, &flags);
        assert_eq!(code, 2, "{forge}: {out}{err}");
        assert!(
            err.contains(&format!("{field} is a string, not a pull request number")),
            "{forge}: {err}"
        );
        let s = double.state.lock().unwrap();
        assert_eq!(s.pulls.len(), 1, "{forge}: never a second pull request");
        assert!(
            s.requests[asked..].iter().all(|r| r.starts_with("GET")),
            "{forge}: {:?}",
            &s.requests[asked..]
        );
    }
}

/// What the forge and the git server say reaches the terminal escaped: the pull request's
/// address (an OSC 8 link, a bell, a carriage return) and a pre-receive hook's lines (OSC 52
/// clipboard write, a screen erase).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_and_git_server_text_reaches_the_terminal_escaped() {
    let (_cloud, served) = baked_build().await;
    let (tmp, work) = example_repo();
    let origin = with_origin(tmp.path(), &work);
    let double = GitHubPulls::start().await;
    double.state.lock().unwrap().hostile_urls = true;
    let flags = forge_flags("github", &double);
    let (code, out, err) = discover_open_pr(&work, &served.url, &flags);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("general: opened pull request #1 "), "{out}");
    for c in ['\x1b', '\x07', '\r'] {
        assert!(
            !out.contains(c) && !err.contains(c),
            "{c:?} printed raw: {out:?}{err:?}"
        );
    }
    assert!(out.contains("\\u{1b}]8;;"), "shown escaped: {out}");

    let hook = origin.join("hooks/pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\nprintf 'denied \\033]52;c;cm0gLXJmIH4=\\007 \\033[2J\\r done\\n' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // The branch is gone from the server, so the push has something to update (and the hook
    // runs).
    git(
        &origin,
        &["update-ref", "-d", "refs/heads/rota/images/general"],
    );
    let (code, out, err) = discover_open_pr(&work, &served.url, &flags);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("denied \\u{1b}]52;c;"),
        "the hook's line, escaped: {err}"
    );
    for c in ['\x1b', '\x07', '\r'] {
        assert!(!err.contains(c), "{c:?} printed raw: {err:?}");
    }
}

// ---- `rota propose`: the scheduled pass, by URL ------------------------------------------

/// `rota propose` on `origin` by URL (no clone, no git remote: it mirrors and pushes with
/// libgit2), the forge `gh`, the clouds at `cloud`.
fn propose(
    origin: &Path,
    state: &Path,
    cloud: &str,
    gh: &GitHubPulls,
    extra: &[&str],
) -> (i32, String, String) {
    let out = Command::new(rota())
        .args(["propose", "--repo"])
        .arg(format!("file://{}", origin.display()))
        .arg("--state-dir")
        .arg(state)
        .args(["--cloud-endpoint", cloud])
        .args(["--github-repo", "acme/fleet", "--github-api-url", &gh.url])
        .args(extra)
        .env("KUBECONFIG", "/nonexistent")
        .env("ROTA_GITHUB_TOKEN", "t0ken")
        .output()
        .unwrap();
    outcome(&out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn propose_opens_the_image_and_promotion_pull_requests_once_and_updates_them() {
    let (_cloud, served) = baked_build().await;
    let gh = GitHubPulls::start().await;
    // The example fleet and a baked build: the image is proposed; no agent has reported, so
    // every later wave waits, and says for what.
    let (tmp, work) = example_repo();
    let origin = with_origin(tmp.path(), &work);
    let main = git(&work, &["rev-parse", "HEAD"]);
    let state = tmp.path().join("state");
    let (code, out, err) = propose(&origin, &state, &served.url, &gh, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("images general: opened pull request #1 "),
        "{out}"
    );
    assert!(out.contains("waiting for wave canary"), "{out}");
    assert_eq!(
        git(&origin, &["rev-parse", "refs/heads/rota/images/general^"]),
        main,
        "the proposal is one commit on the branch it goes into"
    );
    assert_eq!(git(&origin, &["rev-parse", "refs/heads/main"]), main);
    // The next pass: the same proposal, its pull request updated, never a second.
    let (code, out, err) = propose(&origin, &state, &served.url, &gh, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("images general: updated pull request #1 "),
        "{out}"
    );
    assert_eq!(gh.state.lock().unwrap().pulls.len(), 1);

    // A fleet whose canary finished an hour ago (its agent's note pushed with the branch):
    // the promotion of wave main is proposed.
    let (tmp, work, head) = repo(60).await;
    let origin = with_origin(tmp.path(), &work);
    git(
        &work,
        &[
            "push",
            "-q",
            "origin",
            "refs/notes/rota/*:refs/notes/rota/*",
        ],
    );
    let state = tmp.path().join("state");
    let (code, out, err) = propose(&origin, &state, &served.url, &gh, &["--no-images"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("wave main: general 2026.11.1 → 2026.11.2: allowed"),
        "{out}"
    );
    assert!(out.contains("wave main: opened pull request #2 "), "{out}");
    assert_eq!(
        git(&origin, &["rev-parse", "refs/heads/rota/promote/main^"]),
        head
    );
    {
        let s = gh.state.lock().unwrap();
        let (_, h, b, title, _) = &s.pulls[1];
        assert_eq!((h.as_str(), b.as_str()), ("rota/promote/main", "main"));
        assert_eq!(title, "promote wave main: general 2026.11.1 → 2026.11.2");
    }
    // A push the remote refuses (here its ref is locked, as by a concurrent push) is a
    // failure of the pass, named (exit 2), and the pull request is left alone.
    std::fs::write(origin.join("refs/heads/rota/promote/main.lock"), "").unwrap();
    let asked = gh.state.lock().unwrap().requests.len();
    let (code, out, err) = propose(&origin, &state, &served.url, &gh, &["--no-images"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("wave main: pushing rota/promote/main to file://"),
        "{err}"
    );
    assert_eq!(
        gh.state.lock().unwrap().requests.len(),
        asked,
        "no pull request call for an unpushed branch"
    );
}

// ---- reverts: a wave pinned back after a failure on its version ---------------------------

/// A repo whose canary pinned general 2026.11.1, then (the head) 2026.11.2, and canary-1's
/// note on the head as its agent writes it: its pool failed gate error-rate on 2026.11.2 (and
/// rolled back). A bare `origin` holds the branch and the notes. Returns the temporary
/// directory, the clone, the origin and the head.
async fn failed_canary() -> (
    tempfile::TempDir,
    std::path::PathBuf,
    std::path::PathBuf,
    String,
) {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    let before = FLEET.replace(
        r#"images: {general: "2026.11.2"}   # bumped last week"#,
        r#"images: {general: "2026.11.1"}   # bumped last week"#,
    );
    assert_ne!(before, FLEET);
    std::fs::write(work.join("fleet.yaml"), before).unwrap();
    git(&work, &["add", "-A"]);
    git(
        &work,
        &["commit", "-q", "-m", "the fleet on general 2026.11.1"],
    );
    std::fs::write(work.join("fleet.yaml"), FLEET).unwrap();
    git(&work, &["commit", "-q", "-am", "canary: general 2026.11.2"]);
    let head = git(&work, &["rev-parse", "HEAD"]);
    // After the commit, to the second: the failure follows the pin.
    let failed = Utc::now() + chrono::Duration::seconds(1);
    GitNotesStore::new(&work, Some("canary-1"), None)
        .set_pool_records(
            &head,
            vec![PoolRecord::new("canary-1", "general").gate_failed(
                "general",
                "2026.11.2",
                "error-rate",
                failed,
            )],
        )
        .await
        .unwrap();
    let origin = with_origin(tmp.path(), &work);
    git(
        &work,
        &[
            "push",
            "-q",
            "origin",
            "refs/notes/rota/*:refs/notes/rota/*",
        ],
    );
    (tmp, work, origin, head)
}

/// `rota propose` on `origin` by URL with these forge flags (none: git alone); images are not
/// looked for.
fn propose_on(
    origin: &Path,
    state: &Path,
    forge: &[String],
    extra: &[&str],
) -> (i32, String, String) {
    let out = Command::new(rota())
        .args(["propose", "--no-images", "--repo"])
        .arg(format!("file://{}", origin.display()))
        .arg("--state-dir")
        .arg(state)
        .args(forge)
        .args(extra)
        .env("KUBECONFIG", "/nonexistent")
        .env("ROTA_GITHUB_TOKEN", "t0ken")
        .env("ROTA_GITLAB_TOKEN", "t0ken")
        .env("ROTA_GITEA_TOKEN", "t0ken")
        .output()
        .unwrap();
    outcome(&out)
}

const REVERT_BRANCH: &str = "rota/revert/canary/general-2026.11.2";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn propose_reverts_a_failed_canary_once_per_wave_and_version_on_every_forge() {
    for forge in ["github", "gitlab", "gitea"] {
        let (tmp, _work, origin, head) = failed_canary().await;
        let state = tmp.path().join("state");
        let double = GitHubPulls::start().await;
        let flags: Vec<String> = match forge {
            "github" => vec![
                "--github-repo".into(),
                "acme/fleet".into(),
                "--github-api-url".into(),
                double.url.clone(),
            ],
            "gitlab" => vec![
                "--gitlab-project".into(),
                "acme/fleet".into(),
                "--gitlab-api-url".into(),
                format!("{}/api/v4", double.url),
            ],
            _ => vec![
                "--gitea-repo".into(),
                "acme/fleet".into(),
                "--gitea-api-url".into(),
                format!("{}/api/v1", double.url),
            ],
        };
        let (code, out, err) = propose_on(&origin, &state, &flags, &[]);
        assert_eq!(code, 0, "{forge}: {out}{err}");
        assert!(
            out.contains(
                "↩ wave canary: general 2026.11.2 → 2026.11.1: revert (canary-1/general: gate error-rate failed at "
            ),
            "{forge}: {out}"
        );
        assert!(
            out.contains("revert wave canary general: opened pull request #1 "),
            "{forge}: {out}"
        );
        // The guard holds main, and says why.
        assert!(
            out.contains(
                "… wave main: general 2026.11.1 → 2026.11.2: waiting: gate error-rate failed on canary-1/general (wave canary) for general@2026.11.2"
            ),
            "{forge}: {out}"
        );
        assert!(
            out.contains("· wave main: general@2026.11.1: no revert: no pool of wave main recorded a failure on general@2026.11.1"),
            "{forge}: {out}"
        );
        // One commit on the head, pinning canary back; main did not move.
        assert_eq!(
            git(
                &origin,
                &["rev-parse", &format!("refs/heads/{REVERT_BRANCH}^")]
            ),
            head
        );
        assert_eq!(git(&origin, &["rev-parse", "refs/heads/main"]), head);
        let diff = git(
            &origin,
            &["diff", &head, &format!("refs/heads/{REVERT_BRANCH}")],
        );
        assert!(
            diff.contains("-      images: {general: \"2026.11.2\"}   # bumped last week\n+      images: {general: \"2026.11.1\"}   # bumped last week"),
            "{forge}: {diff}"
        );
        assert_eq!(diff.matches("\n+ ").count(), 1, "{forge}: {diff}");
        {
            let s = double.state.lock().unwrap();
            assert_eq!(s.pulls.len(), 1, "{forge}: {:?}", s.requests);
            let (_, h, b, title, body) = &s.pulls[0];
            assert_eq!((h.as_str(), b.as_str()), (REVERT_BRANCH, "main"), "{forge}");
            assert_eq!(
                title,
                "Revert wave canary to general@2026.11.1 (gate error-rate failed on general@2026.11.2)",
                "{forge}"
            );
            assert!(
                body.contains("- `canary-1/general`: gate `error-rate` failed at "),
                "{forge}: {body}"
            );
            assert!(body.contains("| "), "{forge}: the diff's tables: {body}");
        }

        // The next pass: the same branch rewritten, its pull request updated, never a second.
        let (code, out, err) = propose_on(&origin, &state, &flags, &[]);
        assert_eq!(code, 0, "{forge}: {out}{err}");
        assert!(
            out.contains("revert wave canary general: updated pull request #1 "),
            "{forge}: {out}"
        );
        {
            let s = double.state.lock().unwrap();
            assert_eq!(s.pulls.len(), 1, "{forge}: {:?}", s.requests);
            assert_eq!(
                s.requests.iter().filter(|r| r.starts_with("POST")).count(),
                1,
                "{forge}: {:?}",
                s.requests
            );
        }

        // A person closes it: declined, and never proposed again for this wave and version.
        double.state.lock().unwrap().closed.push((
            1,
            (Utc::now() + chrono::Duration::seconds(2))
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        ));
        let asked = double.state.lock().unwrap().requests.len();
        let (code, out, err) = propose_on(&origin, &state, &flags, &[]);
        assert_eq!(code, 0, "{forge}: {out}{err}");
        assert!(
            out.contains("revert wave canary general: not proposed again: pull request #1 ")
                && out.contains(&format!("of {REVERT_BRANCH} was closed at ")),
            "{forge}: {out}"
        );
        {
            let s = double.state.lock().unwrap();
            assert_eq!(s.pulls.len(), 1, "{forge}");
            assert!(
                s.requests[asked..].iter().all(|r| r.starts_with("GET")),
                "{forge}: only looked: {:?}",
                &s.requests[asked..]
            );
        }

        // --no-reverts: not even looked at.
        let (code, out, err) = propose_on(&origin, &state, &flags, &["--no-reverts"]);
        assert_eq!(code, 0, "{forge}: {out}{err}");
        assert!(!out.contains("revert"), "{forge}: {out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_git_alone_the_revert_is_a_branch_and_by_hand_a_commit() {
    let (tmp, work, origin, head) = failed_canary().await;
    let state = tmp.path().join("state");
    let (code, out, err) = propose_on(&origin, &state, &[], &["--no-promotions"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!(
            "revert wave canary general: pushed {REVERT_BRANCH} to file://"
        )) && out.contains("no forge configured: open the pull request from it"),
        "{out}"
    );
    assert_eq!(
        git(
            &origin,
            &["rev-parse", &format!("refs/heads/{REVERT_BRANCH}^")]
        ),
        head
    );
    let message = git(
        &origin,
        &[
            "log",
            "-1",
            "--format=%B",
            &format!("refs/heads/{REVERT_BRANCH}"),
        ],
    );
    assert!(
        message.starts_with(
            "Revert wave canary to general@2026.11.1 (gate error-rate failed on general@2026.11.2)\n"
        ),
        "{message}"
    );
    assert!(
        message.contains("- `canary-1/general`: gate `error-rate` failed at "),
        "{message}"
    );
    // Again: the same branch, pushed again; nothing else.
    let (code, out, err) = propose_on(&origin, &state, &[], &["--no-promotions"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("pushed {REVERT_BRANCH}")), "{out}");
    let branches = git(&origin, &["branch", "--list", "rota/*"]);
    assert_eq!(branches.lines().count(), 1, "{branches}");

    // By hand, in the clone: --dry-run only says; then the commit on the current branch.
    let revert = |extra: &[&str]| {
        let out = Command::new(rota())
            .args(["promote", "--revert", "--wave", "canary", "--repo"])
            .arg(&work)
            .args(extra)
            .output()
            .unwrap();
        outcome(&out)
    };
    let (code, out, err) = revert(&["--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("↩ wave canary: general 2026.11.2 → 2026.11.1: revert"),
        "{out}"
    );
    assert_eq!(git(&work, &["rev-parse", "HEAD"]), head);
    let (code, out, err) = revert(&[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(
            "Revert wave canary to general@2026.11.1 (gate error-rate failed on general@2026.11.2)"
        ),
        "{out}"
    );
    assert_eq!(git(&work, &["rev-parse", "HEAD~1"]), head);
    let fleet = rota::fleet::load_dir(&work).unwrap();
    assert_eq!(fleet.waves()[0].images["general"], "2026.11.1");
    // Reverted: the pin moved back, the failure was on the version no longer pinned.
    let (code, out, _) = revert(&[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("· wave canary: general@2026.11.1: no revert")
            && out.contains("nothing to revert"),
        "{out}"
    );
}

/// `rota promote --revert --wave canary --dry-run` in `work`.
fn revert_dry_run(work: &Path) -> (i32, String, String) {
    let out = Command::new(rota())
        .args([
            "promote",
            "--revert",
            "--wave",
            "canary",
            "--dry-run",
            "--repo",
        ])
        .arg(work)
        .output()
        .unwrap();
    outcome(&out)
}

/// The commit that moved the canary's pin was dated a day ahead by whoever pushed it
/// (`GIT_COMMITTER_DATE`): the failure canary-1 recorded today after the move looked
/// "recorded before" it, and no revert was proposed. Now the evidence is ordered by the
/// agents' notes and the first-parent history, not by dates: a failure already in a note on a
/// commit before the move is old (the pin was moved back to a version known bad, by a
/// person), one that is not is new, whatever the dates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_future_dated_pin_move_does_not_hide_a_failure_recorded_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    let on_1 = FLEET.replace(
        r#"images: {general: "2026.11.2"}   # bumped last week"#,
        r#"images: {general: "2026.11.1"}   # bumped last week"#,
    );
    std::fs::write(work.join("fleet.yaml"), &on_1).unwrap();
    git(&work, &["add", "-A"]);
    git(
        &work,
        &["commit", "-q", "-m", "the fleet on general 2026.11.1"],
    );
    let before = git(&work, &["rev-parse", "HEAD"]);
    let notes = GitNotesStore::new(&work, Some("canary-1"), None);
    notes
        .set_pool_records(&before, vec![PoolRecord::new("canary-1", "general")])
        .await
        .unwrap();
    std::fs::write(work.join("fleet.yaml"), FLEET).unwrap();
    let tomorrow = (Utc::now() + chrono::Duration::days(1)).to_rfc3339();
    let out = Command::new("git")
        .args(["-c", "commit.gpgsign=false", "commit", "-q", "-am"])
        .arg("canary: general 2026.11.2")
        .current_dir(&work)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_AUTHOR_DATE", &tomorrow)
        .env("GIT_COMMITTER_DATE", &tomorrow)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let moved = git(&work, &["rev-parse", "HEAD"]);
    assert!(
        git(&work, &["log", "-1", "--format=%cI"]).starts_with(&tomorrow[..10]),
        "the move is dated tomorrow"
    );
    let failed = Utc::now();
    let failing = PoolRecord::new("canary-1", "general").gate_failed(
        "general",
        "2026.11.2",
        "error-rate",
        failed,
    );
    notes
        .set_pool_records(&moved, vec![failing.clone()])
        .await
        .unwrap();
    let (code, out, err) = revert_dry_run(&work);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("↩ wave canary: general 2026.11.2 → 2026.11.1: revert"),
        "{out}{err}"
    );

    // The other way: the same failure was already in canary-1's note before the move (the
    // version failed once, was pinned back, and a person pinned it again): not evidence.
    notes
        .set_pool_records(&before, vec![failing.clone()])
        .await
        .unwrap();
    let (code, out, err) = revert_dry_run(&work);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("· wave canary: general@2026.11.2: no revert: the failures on general@2026.11.2 were recorded before"),
        "{out}{err}"
    );
}
