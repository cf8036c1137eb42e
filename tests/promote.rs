//! `rota promote --wave NAME` writing the promotion commit, with real git: the guard's records
//! are git notes written by the same store the agents use; the command is the real binary.

#[path = "support/git.rs"]
mod git_support;
use git_support::{git, rota};

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

fn promote(work: &Path, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(rota())
        .args(["promote", "--wave", "main", "--repo"])
        .arg(work)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
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
