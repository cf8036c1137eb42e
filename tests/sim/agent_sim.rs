//! The GitOps agent end to end: a real git repo changed with the git CLI, agents following it
//! (each with its own mirror, statuses in git notes), the rotation controllers and the
//! simulated clusters, all in process with paused tokio time.

use crate::support::git::{git, origin_and_clone};

use std::path::Path;
use std::time::Duration;

use kube::api::{Api, ListParams};
use rota::agent::local::{LocalConfig, LocalFleet};
use rota::kube::crd::NodePoolRotation;
use rota::report::{GitNotesStore, State};
use rota::sim::scenario::WorkloadProfile;

const V1: &str = "ami-0a1b2c3d4e5f60718";
const V2: &str = "ami-0f9e8d7c6b5a40312";

pub(crate) fn fleet_yaml(canary: &str, main: &str) -> String {
    format!(
        r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {{name: acme}}
spec:
  images:
    general:
      versions:
        "2026.11.1": {{aws: {V1}}}
        "2026.11.2": {{aws: {V2}}}
  waves:
    - name: canary
      clusters: [canary-1]
      images: {{general: "{canary}"}}
      soak: 30m
    - name: main
      clusters: [main-1]
      images: {{general: "{main}"}}
  rollout: {{batch: 2, nodeReadyTimeout: 10m}}
"#
    )
}

fn cluster_yaml(name: &str) -> String {
    format!(
        r#"apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  cloud: {{aws: {{region: us-east-1}}}}
  pools:
    - name: general
      channel: general
      nodeSelector: {{rota.dev/pool: general}}
      group: {{autoScalingGroup: {name}-general}}
"#
    )
}

const WORKLOADS: &str = r#"
nodes: {perPool: 4, registerAfter: 15s, readyAfter: 20s}
deployments:
  - {name: web, namespace: shop, replicas: 4, pdb: {maxUnavailable: 1}, readyAfter: 10s}
"#;

pub(crate) fn commit(dir: &Path, files: &[(&str, &str)], message: &str) -> String {
    for (p, c) in files {
        std::fs::write(dir.join(p), c).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
    git(dir, &["push", "-q", "origin", "main"]);
    git(dir, &["rev-parse", "HEAD"])
}

pub(crate) struct Setup {
    pub(crate) _tmp: tempfile::TempDir,
    /// The working clone people commit in.
    pub(crate) repo: std::path::PathBuf,
    /// The bare repo the agents follow and push their notes to.
    pub(crate) origin: std::path::PathBuf,
    pub(crate) fleet: LocalFleet,
    pub(crate) first: String,
}

pub(crate) async fn setup(trust: Option<rota::source::trust::TrustPolicy>) -> Setup {
    setup_at(trust, 1.0).await
}

/// [`setup`] with the fleet's clock `speed` times faster.
pub(crate) async fn setup_at(trust: Option<rota::source::trust::TrustPolicy>, speed: f64) -> Setup {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let tmp = tempfile::tempdir().unwrap();
    // The agents follow a bare "remote"; people commit in a clone and push.
    let (origin, repo) = origin_and_clone(tmp.path(), "fleet");
    let first = commit(
        &repo,
        &[
            ("fleet.yaml", &fleet_yaml("2026.11.1", "2026.11.1")),
            ("canary-1.yaml", &cluster_yaml("canary-1")),
            ("main-1.yaml", &cluster_yaml("main-1")),
        ],
        "fleet on 2026.11.1",
    );
    let fleet = LocalFleet::start({
        let mut c = LocalConfig::new(
            origin.clone(),
            tmp.path().join("state"),
            WorkloadProfile::from_yaml(WORKLOADS, "workloads").unwrap(),
        );
        c.speed = speed;
        c.trust = trust;
        c
    })
    .await
    .unwrap();
    Setup {
        _tmp: tmp,
        repo,
        origin,
        fleet,
        first,
    }
}

/// The notes refs `cluster`'s agent has mirrored (cluster names, sorted).
fn mirrored_notes(s: &Setup, cluster: &str) -> Vec<String> {
    let mirror = rota::agent::wiring::mirror_dir(&s._tmp.path().join("state"), cluster);
    let repo = git2::Repository::open_bare(mirror).unwrap();
    let mut out: Vec<String> = repo
        .references_glob("refs/rota/remote-notes/*")
        .unwrap()
        .map(|r| r.unwrap().name().unwrap()["refs/rota/remote-notes/".len()..].to_string())
        .collect();
    out.sort();
    out
}

/// Statuses recorded in the repo's git notes for `cluster` on `commit` (what a user sees).
async fn statuses(repo: &Path, commit: &str) -> Vec<(String, State, String)> {
    let store = GitNotesStore::new(repo, None, None);
    store.scope_to(["canary-1".to_string(), "main-1".to_string()]);
    let mut out: Vec<_> = store
        .docs(commit)
        .await
        .unwrap()
        .into_iter()
        .flat_map(|d| d.statuses)
        .map(|s| (s.context, s.state, s.description))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

pub(crate) async fn state_of(repo: &Path, commit: &str, context: &str) -> Option<(State, String)> {
    statuses(repo, commit)
        .await
        .into_iter()
        .find(|(c, _, _)| c == context)
        .map(|(_, s, d)| (s, d))
}

/// Waits (in simulated time) until `context` on `commit` is `want`; returns its description.
pub(crate) async fn wait_for(
    s: &Setup,
    commit: &str,
    context: &str,
    want: State,
    limit: Duration,
) -> String {
    let start = tokio::time::Instant::now();
    loop {
        if let Some((state, d)) = state_of(&s.origin, commit, context).await
            && state == want
        {
            return d;
        }
        assert!(
            start.elapsed() < limit,
            "{context} on {commit} never became {want}; statuses: {:?}",
            statuses(&s.origin, commit).await
        );
        s.fleet.poke();
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

pub(crate) async fn npr(s: &Setup, cluster: &str) -> NodePoolRotation {
    Api::<NodePoolRotation>::all(s.fleet.clients[cluster].clone())
        .get("general")
        .await
        .unwrap()
}

pub(crate) const LONG: Duration = Duration::from_secs(4 * 3600);

/// The simulated clusters stamp their Events (a bad build's sandbox failures, which an events
/// gate counts within a window) on the clock the controllers read. Every controller clock of a
/// runtime shares one anchor, made by the first clock; a cluster that counted from when its
/// store was made ran behind it by the speed times the paused time in between: here 10 s at
/// 600x, 100 minutes, and the demo's gate never saw its bad build fail.
#[tokio::test(start_paused = true)]
async fn the_clusters_stamp_time_on_the_controllers_clock() {
    let _earlier = rota::controller::clock::Clock::new(600.0);
    tokio::time::advance(Duration::from_secs(10)).await;
    let s = setup_at(None, 600.0).await;
    for (name, store) in &s.fleet.sim.clusters {
        let (cluster, controllers) = (store.sim_now(), s.fleet.clock.now());
        let gap = (cluster - controllers).num_seconds().abs();
        assert!(
            gap <= 60,
            "{name}: the cluster's time {cluster} is {gap} s off the controllers' {controllers}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_bump_rolls_the_canary_and_a_premature_promotion_waits_for_the_soak() {
    let s = setup(None).await;
    wait_for(&s, &s.first, "rota/canary-1", State::Success, LONG).await;
    wait_for(&s, &s.first, "rota/main-1", State::Success, LONG).await;
    // The canary's agent (first wave: its guard never waits) fetches its own notes only,
    // never the fleet's (issue 25).
    assert_eq!(mirrored_notes(&s, "canary-1"), ["canary-1"]);

    let bump = commit(
        &s.repo,
        &[("fleet.yaml", &fleet_yaml("2026.11.2", "2026.11.1"))],
        "canary: general 2026.11.2",
    );
    // Promote at once, before the canary even started: main must wait.
    let promote = commit(
        &s.repo,
        &[("fleet.yaml", &fleet_yaml("2026.11.2", "2026.11.2"))],
        "main: general 2026.11.2",
    );
    s.fleet.poke();
    let waiting = wait_for(&s, &promote, "rota/main-1/general", State::Pending, LONG).await;
    assert!(
        waiting.starts_with(
            "waiting for canary-1/general (wave canary) to complete general@2026.11.2"
        ) || waiting.starts_with("waiting for wave canary to soak"),
        "{waiting}"
    );
    assert_eq!(npr(&s, "main-1").await.spec.version, "2026.11.1");
    let done = wait_for(&s, &promote, "rota/canary-1/general", State::Success, LONG).await;
    assert_eq!(done, "4/4 nodes on general@2026.11.2");
    let canary_done = s.fleet.clock.now();
    // Soaking: still held, and the status says for how long.
    let soak = wait_for(&s, &promote, "rota/main-1/general", State::Pending, LONG).await;
    assert!(soak.starts_with("waiting"), "{soak}");
    // `rota promote --check` on the promotion says the same, from the same records.
    let check = |now| {
        let query = rota::promotion::Query {
            wave: Some("main".into()),
            repo: s.origin.clone(),
            rev: promote.clone(),
            check: true,
            base: bump.clone(),
            subdir: None,
            agent_signers: None,
        };
        async move { rota::promotion::checks_at(&query, now).await.unwrap() }
    };
    let during = check(s.fleet.clock.now()).await;
    assert_eq!(during.len(), 1, "{during:?}");
    assert_eq!(during[0].to, "2026.11.2");
    assert_eq!(during[0].from.as_deref(), Some("2026.11.1"));
    assert!(!during[0].decision.is_allowed(), "{during:?}");
    let after = check(canary_done + chrono::Duration::minutes(31)).await;
    assert!(after[0].decision.is_allowed(), "{after:?}");
    wait_for(&s, &promote, "rota/main-1/general", State::Success, LONG).await;
    let main_done = s.fleet.clock.now();
    assert!(
        main_done - canary_done >= chrono::Duration::minutes(30),
        "main finished {} after the canary, within the 30m soak",
        main_done - canary_done
    );
    assert_eq!(npr(&s, "main-1").await.spec.version, "2026.11.2");
    // Main's guard waited on the canary: it fetched the canary's notes to let the pin go;
    // the canary's agent still fetched none but its own.
    assert_eq!(mirrored_notes(&s, "main-1"), ["canary-1", "main-1"]);
    assert_eq!(mirrored_notes(&s, "canary-1"), ["canary-1"]);
    // The bump commit itself was superseded before the agents saw it or was acted on: either
    // way its statuses never claim main moved.
    for (c, _, d) in statuses(&s.origin, &bump).await {
        assert!(
            !(c.starts_with("rota/main-1/") && d.contains("2026.11.2 ") && d.contains("4/4")),
            "{d}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_revert_midway_rolls_back() {
    let s = setup(None).await;
    wait_for(&s, &s.first, "rota/canary-1", State::Success, LONG).await;
    let bump = commit(
        &s.repo,
        &[("fleet.yaml", &fleet_yaml("2026.11.2", "2026.11.1"))],
        "canary: general 2026.11.2",
    );
    s.fleet.poke();
    // Midway: a batch is under way.
    let d = loop {
        let d = wait_for(&s, &bump, "rota/canary-1/general", State::Pending, LONG).await;
        if d.starts_with("batch") {
            break d;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert!(d.contains("general@2026.11.2"), "{d}");
    git(&s.repo, &["revert", "--no-edit", "HEAD"]);
    git(&s.repo, &["push", "-q", "origin", "main"]);
    let revert = git(&s.repo, &["rev-parse", "HEAD"]);
    s.fleet.poke();
    let done = wait_for(&s, &revert, "rota/canary-1/general", State::Success, LONG).await;
    assert_eq!(done, "4/4 nodes on general@2026.11.1");
    let n = npr(&s, "canary-1").await;
    assert_eq!(n.spec.image, V1);
    assert_eq!(n.spec.source_commit, revert);
    // The reverted commit stopped mid-rotation: its pending statuses were made final.
    let (st, d) = state_of(&s.origin, &bump, "rota/canary-1/general")
        .await
        .unwrap();
    assert_eq!(st, State::Error, "{d}");
    assert!(
        d.starts_with(&format!(
            "superseded by {} before it finished: batch",
            &revert[..12]
        )),
        "{d}"
    );
    let (st, _) = state_of(&s.origin, &bump, "rota/canary-1").await.unwrap();
    assert_eq!(st, State::Error);
}

#[tokio::test(start_paused = true)]
async fn an_invalid_commit_gets_an_error_status_and_nothing_is_acted_on() {
    let s = setup(None).await;
    wait_for(&s, &s.first, "rota/canary-1", State::Success, LONG).await;
    let bad = commit(
        &s.repo,
        &[(
            "fleet.yaml",
            &fleet_yaml("2026.11.2", "2026.11.1").replace("batch: 2", "bacth: 2"),
        )],
        "typo",
    );
    s.fleet.poke();
    let why = wait_for(&s, &bad, "rota/canary-1", State::Error, LONG).await;
    assert!(why.contains("is invalid: fleet.yaml:"), "{why}");
    assert!(why.contains("bacth"), "{why}");
    let n = npr(&s, "canary-1").await;
    assert_eq!(n.spec.source_commit, s.first);
    assert_eq!(n.spec.version, "2026.11.1");
}

#[tokio::test(start_paused = true)]
async fn an_unsigned_commit_gets_an_error_status_and_nothing_is_acted_on() {
    let tmp = tempfile::tempdir().unwrap();
    let signers = tmp.path().join("allowed_signers");
    std::fs::write(&signers, "").unwrap();
    let s = setup(Some(rota::source::trust::TrustPolicy {
        ssh_allowed_signers: Some(signers),
        gpg_keyring: None,
    }))
    .await;
    let why = wait_for(&s, &s.first, "rota/canary-1", State::Error, LONG).await;
    assert!(why.contains("is not signed"), "{why}");
    assert!(
        Api::<NodePoolRotation>::all(s.fleet.clients["canary-1"].clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "an unsigned commit must not create anything"
    );
}
