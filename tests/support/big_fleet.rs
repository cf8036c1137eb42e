//! A synthetic fleet repo at fleet size, shared by `benches/fleet_scale.rs` and the tests of
//! `rota status --fleet` at size: N clusters of 5 pools in three waves chosen by label
//! (canary 1%, early 20%, main the rest), two commits (the second promotes `early` to
//! general@2026.11.2) and a git-notes status per cluster on each commit, as agents write
//! them. What each cluster is doing is a function of its index, and [`Expected`] counts it
//! by construction, so a test can hold the views to it without re-deriving their logic.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use chrono::{DateTime, Duration, Utc};

pub const POOLS: [(&str, &str); 5] = [
    ("general", "general"),
    ("batch", "general"),
    ("system", "general"),
    ("memory", "general"),
    ("gpu", "gpu"),
];

/// What the generated fleet holds, counted as it is written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expected {
    pub clusters: usize,
    pub pools: usize,
    /// Per wave (canary, early, main): clusters.
    pub wave_clusters: [usize; 3],
    /// Pools failing (a gate failed), halted (paused for a person), held by a maintenance
    /// window (of which `held_too_long` for more than a day), and clusters whose agent has
    /// not reported on the newest commit (it did on the one before).
    pub failing: usize,
    pub halted: usize,
    pub window_held: usize,
    pub held_too_long: usize,
    pub silent: usize,
    /// The first cluster of each kind, for tests that look one up.
    pub a_failing: Option<String>,
    pub a_silent: Option<String>,
}

/// The newest commit is made this long before `now`: long enough that silent agents and
/// day-long holds count as such (see `ui::summary::Limits`).
pub fn head_age() -> Duration {
    Duration::hours(30)
}

pub fn name(i: usize) -> String {
    format!("c{i:05}")
}

/// 0 canary, 1 early, 2 main.
pub fn wave_of(i: usize) -> usize {
    if i.is_multiple_of(100) {
        0
    } else if i % 5 == 1 {
        1
    } else {
        2
    }
}

const WAVES: [&str; 3] = ["canary", "early", "main"];

fn fleet_yaml(early_general: &str) -> String {
    format!(
        r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {{name: big}}
spec:
  images:
    general:
      versions:
        "2026.11.1": {{aws: ami-0a1b2c3d4e5f60718}}
        "2026.11.2": {{aws: ami-0f9e8d7c6b5a40312}}
    gpu:
      versions:
        "2026.10.3": {{aws: ami-07c5e1d2b3a4f5968}}
        "2026.11.1": {{aws: ami-03d4c5b6a7980e1f2}}
  waves:
    - name: canary
      clusterSelector: {{matchLabels: {{ring: canary}}}}
      images: {{general: "2026.11.2", gpu: "2026.11.1"}}
      soak: 2h
    - name: early
      clusterSelector: {{matchLabels: {{ring: early}}}}
      images: {{general: "{early_general}", gpu: "2026.10.3"}}
      soak: 24h
    - name: main
      clusterSelector: {{matchLabels: {{ring: main}}}}
      images: {{general: "2026.11.1", gpu: "2026.10.3"}}
  rollout: {{batch: "25%"}}
  promotion: {{guard: true}}
"#
    )
}

fn cluster_yaml(i: usize) -> String {
    // One region: an AMI id is regional, and one image per version keeps fleet.yaml small.
    let team = ["payments", "search", "ads", "data"][i % 4];
    let mut s = format!(
        "apiVersion: rota.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: {}\n  labels: {{ring: {}, team: {team}}}\nspec:\n  cloud: {{aws: {{region: us-east-1}}}}\n  pools:\n",
        name(i),
        WAVES[wave_of(i)]
    );
    for (pool, channel) in POOLS {
        let _ = writeln!(
            s,
            "    - {{name: {pool}, channel: {channel}, nodeSelector: {{pool: {pool}}}, group: {{autoScalingGroup: {pool}-{i}}}}}"
        );
    }
    s
}

fn git(dir: &Path, at: DateTime<Utc>, args: &[&str]) -> String {
    let date = at.to_rfc3339();
    let out = Command::new("git")
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_DATE", &date)
        .output()
        .expect("git is installed");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// One pool's status on a commit: (state, description, updatedAt, a person's stop note).
type PoolStatus = (&'static str, String, DateTime<Utc>, bool);

/// Cluster `i`'s note on a commit: its statuses (pool by pool from `status`) and its pools'
/// cumulative records (`completed`: per channel, the versions completed and when).
fn note(
    i: usize,
    statuses: &[PoolStatus],
    completed: &[(&str, &str, DateTime<Utc>)],
    at: DateTime<Utc>,
) -> String {
    let c = name(i);
    let on = statuses.iter().filter(|s| s.0 == "success").count();
    let worst = if statuses.iter().any(|s| s.0 == "failure") {
        "failure"
    } else if on == statuses.len() {
        "success"
    } else {
        "pending"
    };
    let mut list = vec![serde_json::json!({
        "context": format!("rota/{c}"), "state": worst,
        "description": format!("{on}/{} pools on target", statuses.len()),
        "updatedAt": at.to_rfc3339(),
    })];
    for ((pool, _), (state, description, updated, person)) in POOLS.iter().zip(statuses) {
        let mut s = serde_json::json!({
            "context": format!("rota/{c}/{pool}"), "state": state,
            "description": description, "updatedAt": updated.to_rfc3339(),
        });
        if *person {
            s["stop"] = serde_json::json!({
                "reason": "GateFailed", "by": "person", "cause": "gate pods-healthy failed",
                "next": format!("rota ctl resume --cluster {c} --pool {pool}"),
            });
        }
        list.push(s);
    }
    let pools: Vec<_> = POOLS
        .iter()
        .map(|(pool, channel)| {
            let completions: Vec<_> = completed
                .iter()
                .filter(|(ch, _, _)| ch == channel)
                .map(|(ch, v, t)| {
                    serde_json::json!({"channel": ch, "version": v, "completedAt": t.to_rfc3339()})
                })
                .collect();
            serde_json::json!({"cluster": c, "pool": pool, "completions": completions, "gateFailures": []})
        })
        .collect();
    serde_json::json!({"cluster": c, "statuses": list, "pools": pools}).to_string()
}

/// Writes the fleet of `clusters` clusters into a new git repo at `dir` (which must exist
/// and be empty), its newest commit made [`head_age`] before `now`.
pub fn generate(dir: &Path, clusters: usize, now: DateTime<Utc>) -> Expected {
    let head_at = now - head_age();
    let base_at = head_at - Duration::days(2);
    git(dir, base_at, &["init", "-q", "-b", "main"]);
    // No background `gc --auto` packing while thousands of notes refs are written.
    git(dir, base_at, &["config", "gc.auto", "0"]);
    std::fs::create_dir_all(dir.join("clusters")).unwrap();
    for i in 0..clusters {
        std::fs::write(
            dir.join("clusters").join(format!("{}.yaml", name(i))),
            cluster_yaml(i),
        )
        .unwrap();
    }
    std::fs::write(dir.join("fleet.yaml"), fleet_yaml("2026.11.1")).unwrap();
    git(dir, base_at, &["add", "-A"]);
    git(dir, base_at, &["commit", "-q", "-m", "the fleet"]);
    let base = git(dir, base_at, &["rev-parse", "HEAD"]);
    std::fs::write(dir.join("fleet.yaml"), fleet_yaml("2026.11.2")).unwrap();
    git(
        dir,
        head_at,
        &["commit", "-q", "-am", "promote early to general@2026.11.2"],
    );
    let head = git(dir, head_at, &["rev-parse", "HEAD"]);

    let repo = git2::Repository::open(dir).unwrap();
    let sig = git2::Signature::now("rota", "rota@example.com").unwrap();
    let (base_oid, head_oid) = (
        git2::Oid::from_str(&base).unwrap(),
        git2::Oid::from_str(&head).unwrap(),
    );
    let mut e = Expected {
        clusters,
        pools: clusters * POOLS.len(),
        ..Expected::default()
    };
    for i in 0..clusters {
        let wave = wave_of(i);
        e.wave_clusters[wave] += 1;
        let done = |ch: &str, v: &str, nodes: u32| -> PoolStatus {
            (
                "success",
                format!("{nodes}/{nodes} nodes on {ch}@{v}"),
                base_at + Duration::minutes(5),
                false,
            )
        };
        // Everyone completed the old versions long ago; canary the new ones before `base`.
        let long_ago = base_at - Duration::days(10);
        let mut completed = vec![
            ("general", "2026.11.1", long_ago),
            ("gpu", "2026.10.3", long_ago),
        ];
        if wave == 0 {
            completed.push(("general", "2026.11.2", base_at - Duration::hours(6)));
            completed.push(("gpu", "2026.11.1", base_at - Duration::hours(6)));
        }
        let pinned = |ch: &str| -> &'static str {
            match (wave, ch) {
                (0, "general") => "2026.11.2",
                (0, _) => "2026.11.1",
                (_, "general") => "2026.11.1",
                _ => "2026.10.3",
            }
        };
        // On the base commit every pool is done on its wave's pins.
        let base_statuses: Vec<PoolStatus> = POOLS
            .iter()
            .map(|(_, ch)| done(ch, pinned(ch), 12))
            .collect();
        let base_note = note(
            i,
            &base_statuses,
            &completed,
            base_at + Duration::minutes(5),
        );
        repo.note(
            &sig,
            &sig,
            Some(&format!("refs/notes/rota/{}", name(i))),
            base_oid,
            &base_note,
            true,
        )
        .unwrap();
        // Silent agents: reported on the base commit, not on the newest (never a canary).
        if wave != 0 && i % 97 == 3 {
            e.silent += 1;
            e.a_silent.get_or_insert_with(|| name(i));
            continue;
        }
        let at = head_at + Duration::minutes(5);
        let mut statuses = base_statuses.clone();
        if wave == 1 {
            // `early` takes general@2026.11.2 on the newest commit.
            let new = "general@2026.11.2";
            let k = i / 5;
            let mut completed_new = false;
            for (s, (_, ch)) in statuses.iter_mut().zip(POOLS) {
                if ch != "general" {
                    continue;
                }
                *s = match k % 20 {
                    0..=9 => {
                        completed_new = true;
                        done("general", "2026.11.2", 12)
                    }
                    16 => {
                        e.window_held += 1;
                        let d = format!("waiting for a maintenance window · 0/12 nodes on {new}");
                        ("pending", d, now - Duration::hours(2), false)
                    }
                    17 => {
                        e.window_held += 1;
                        e.held_too_long += 1;
                        let d = format!("waiting for a maintenance window · 0/12 nodes on {new}");
                        ("pending", d, at, false)
                    }
                    18 => {
                        e.failing += 1;
                        e.a_failing.get_or_insert_with(|| name(i));
                        let d = format!("failed: gate pods-healthy failed on {new}");
                        ("failure", d, at, false)
                    }
                    19 => {
                        e.halted += 1;
                        let d = "paused; next: rota ctl resume".to_string();
                        ("pending", d, at, true)
                    }
                    _ => (
                        "pending",
                        format!("batch 2/4 · 6/12 nodes on {new}"),
                        at,
                        false,
                    ),
                };
            }
            if completed_new {
                completed.push(("general", "2026.11.2", head_at + Duration::hours(2)));
            }
        }
        repo.note(
            &sig,
            &sig,
            Some(&format!("refs/notes/rota/{}", name(i))),
            head_oid,
            &note(i, &statuses, &completed, at),
            true,
        )
        .unwrap();
    }
    e
}
