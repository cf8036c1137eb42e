//! `rota evidence`: the patching evidence of the fleet in one document an auditor can take as
//! it is. Per pool: the image in force at `--at` (what its nodes ran, from the ledger), its
//! release, age, the channel's `maxAge` and whether it is overdue, since when. Per version:
//! when released (the fleet repo's `released`), proposed and pinned (the commits, their
//! author, committer and pull request, [`crate::ledger::history`]) and when it reached every
//! node of each pool (the ledger). Breaches of the deadline within `--period`, with what the
//! pool's status says held it (its stop note: a window, a halt waiting for a person, ...).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use chrono::{DateTime, Duration, Utc};
use clap::{Args, ValueEnum};
use serde::Serialize;

use super::audit::{open_repo, parse_time};
use crate::ledger::history::{self, VersionHistory};
use crate::ledger::{Filter, Life};
use rota_core::fleet::Fleet;
use rota_core::ledger::evidence as ev;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EvidenceFormat {
    Json,
    Csv,
    Markdown,
}

#[derive(Args, Debug)]
pub struct EvidenceArgs {
    /// The fleet repo (a local clone or bare repo with the ledger and notes refs, or a URL).
    #[arg(long, env = "ROTA_REPO", default_value = ".")]
    pub repo: String,
    #[arg(long, env = "ROTA_STATE_DIR", default_value = "/var/lib/rota")]
    pub state_dir: PathBuf,
    #[command(flatten)]
    pub git: super::git_auth::GitAuthArgs,
    /// The revision whose fleet (pools, channels, maxAge) and history are read.
    #[arg(long, default_value = "HEAD")]
    pub rev: String,
    #[arg(long = "path")]
    pub subdir: Option<PathBuf>,
    /// The moment the pools are shown at (default: now).
    #[arg(long, value_parser = parse_time)]
    pub at: Option<DateTime<Utc>>,
    /// The period breaches are looked for in: FROM..TO (times or dates; default: the year
    /// before --at).
    #[arg(long, value_parser = parse_period)]
    pub period: Option<(DateTime<Utc>, DateTime<Utc>)>,
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: EvidenceFormat,
}

fn parse_period(s: &str) -> Result<(DateTime<Utc>, DateTime<Utc>), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("{s:?} is not FROM..TO (e.g. 2025-12-01..2026-12-01)"))?;
    let (a, b) = (parse_time(a)?, parse_time(b)?);
    if a >= b {
        return Err(format!("{s:?}: FROM must be before TO"));
    }
    Ok((a, b))
}

/// One pool at `at`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolEvidence {
    pub cluster: String,
    pub pool: String,
    pub wave: String,
    /// What its nodes ran at `at`, most nodes first (`channel@version: nodes`).
    pub running: Vec<(String, usize)>,
    /// The version most of its nodes ran (none when the ledger has no node of it then).
    pub in_force: Option<String>,
    pub released: Option<DateTime<Utc>>,
    pub age_days: Option<f64>,
    pub max_age: Option<String>,
    pub overdue: bool,
    pub overdue_since: Option<DateTime<Utc>>,
    /// The command that lists its nodes' lives.
    pub ledger: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reached {
    pub wave: String,
    pub cluster: String,
    pub pool: String,
    /// When every node of the pool ran the version (`None`: not yet).
    pub at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionEvidence {
    pub version: String,
    pub released: Option<DateTime<Utc>>,
    #[serde(flatten)]
    pub history: VersionHistory,
    pub reached: Vec<Reached>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BreachEvidence {
    pub cluster: String,
    pub pool: String,
    pub version: String,
    pub due: DateTime<Utc>,
    /// When its last node on the version left (`None`: it still runs it).
    pub until: Option<DateTime<Utc>>,
    /// What the pool's status says holds it, at the revision read.
    pub cause: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    pub fleet: String,
    pub commit: String,
    pub at: DateTime<Utc>,
    pub period: (DateTime<Utc>, DateTime<Utc>),
    pub pools: Vec<PoolEvidence>,
    pub versions: Vec<VersionEvidence>,
    pub breaches: Vec<BreachEvidence>,
}

/// `released + maxAge` of `channel@version` in `fleet`.
fn deadline(fleet: &Fleet, label: &str) -> Option<DateTime<Utc>> {
    let (c, v) = label.split_once('@')?;
    let channel = fleet.spec.images.get(c)?;
    let released = channel.versions.get(v)?.released?;
    let max = channel.max_age?.as_duration();
    Some(released + Duration::from_std(max).ok()?)
}

fn released(fleet: &Fleet, label: &str) -> Option<DateTime<Utc>> {
    let (c, v) = label.split_once('@')?;
    fleet.spec.images.get(c)?.versions.get(v)?.released
}

/// The evidence document: `fleet` at `commit`, the ledger's `lives`, the versions'
/// `histories`, and each pool's stop cause from its status (`causes`).
pub fn compose(
    fleet: &Fleet,
    commit: &str,
    lives: &[Life],
    histories: BTreeMap<(String, String), VersionHistory>,
    causes: &BTreeMap<(String, String), String>,
    at: DateTime<Utc>,
    period: (DateTime<Utc>, DateTime<Utc>),
) -> Result<Evidence, String> {
    let clusters = fleet.resolve_all().map_err(|e| e.to_string())?;
    let pools_lives = ev::by_pool(lives);
    let none: Vec<&Life> = Vec::new();
    let mut pools = Vec::new();
    let mut breaches = Vec::new();
    for c in &clusters {
        for p in &c.pools {
            let key = (c.name.clone(), p.name.clone());
            let mine = pools_lives.get(&key).unwrap_or(&none);
            let running = ev::versions_at(mine, at);
            let in_force = running.first().map(|(v, _)| v.clone());
            let rel = in_force.as_deref().and_then(|v| released(fleet, v));
            let max_age = fleet.spec.images.get(&p.channel).and_then(|ch| ch.max_age);
            let age = rel.map(|r| {
                ev::age(
                    r,
                    max_age.and_then(|m| Duration::from_std(m.as_duration()).ok()),
                    at,
                )
            });
            pools.push(PoolEvidence {
                cluster: c.name.clone(),
                pool: p.name.clone(),
                wave: c.wave.clone(),
                running,
                in_force,
                released: rel,
                age_days: age.as_ref().map(|a| a.age.num_seconds() as f64 / 86_400.0),
                max_age: max_age.map(|m| m.to_string()),
                overdue: age.as_ref().is_some_and(|a| a.overdue),
                overdue_since: age.as_ref().filter(|a| a.overdue).and_then(|a| a.due),
                ledger: crate::ledger::audit_command(&c.name, &p.name),
            });
            for b in ev::breaches(mine, |v| deadline(fleet, v), Some(period.0), period.1) {
                breaches.push(BreachEvidence {
                    cluster: c.name.clone(),
                    pool: p.name.clone(),
                    version: b.version,
                    due: b.due,
                    until: b.until,
                    cause: causes
                        .get(&key)
                        .cloned()
                        .unwrap_or_else(|| "no stop recorded in the pool's status".into()),
                });
            }
        }
    }
    let mut versions = Vec::new();
    for ((channel, version), history) in histories {
        let label = format!("{channel}@{version}");
        let mut reached = Vec::new();
        for c in &clusters {
            for p in c.pools.iter().filter(|p| p.channel == channel) {
                let mine = pools_lives
                    .get(&(c.name.clone(), p.name.clone()))
                    .unwrap_or(&none);
                if mine.iter().any(|l| ev::label(l) == label) {
                    reached.push(Reached {
                        wave: c.wave.clone(),
                        cluster: c.name.clone(),
                        pool: p.name.clone(),
                        at: ev::reached(mine, &label),
                    });
                }
            }
        }
        versions.push(VersionEvidence {
            released: released(fleet, &label),
            version: label,
            history,
            reached,
        });
    }
    Ok(Evidence {
        fleet: fleet.metadata.name.clone(),
        commit: commit.to_string(),
        at,
        period,
        pools,
        versions,
        breaches,
    })
}

fn t(x: Option<DateTime<Utc>>) -> String {
    x.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| "-".into())
}

/// The document as markdown: headings, one table per section.
pub fn markdown(e: &Evidence) -> String {
    let mut s = format!(
        "# Patching evidence: fleet {}\n\nFleet commit `{}`; pools at {}; breaches from {} to {}.\n\n## Pools\n\n| cluster | pool | wave | in force | nodes | released | age (days) | maxAge | overdue since | ledger |\n|---|---|---|---|---|---|---|---|---|---|\n",
        e.fleet,
        e.commit,
        t(Some(e.at)),
        t(Some(e.period.0)),
        t(Some(e.period.1))
    );
    for p in &e.pools {
        let nodes: Vec<String> = p
            .running
            .iter()
            .map(|(v, n)| format!("{n} on {v}"))
            .collect();
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | `{}` |\n",
            p.cluster,
            p.pool,
            p.wave,
            p.in_force.as_deref().unwrap_or("-"),
            nodes.join(", "),
            t(p.released),
            p.age_days
                .map(|d| format!("{d:.1}"))
                .unwrap_or_else(|| "-".into()),
            p.max_age.as_deref().unwrap_or("-"),
            if p.overdue {
                t(p.overdue_since)
            } else {
                "no".into()
            },
            p.ledger
        );
    }
    s += "\n## Versions\n";
    for v in &e.versions {
        s += &format!("\n### {}\n\n- released: {}\n", v.version, t(v.released));
        match &v.history.proposed {
            Some(c) => {
                s += &format!(
                    "- proposed: {} by {} in `{}` {}\n",
                    t(Some(c.at)),
                    c.author,
                    &c.commit[..12],
                    c.pr.as_deref().unwrap_or("")
                )
            }
            None => s += "- proposed: not found in the history read\n",
        }
        for c in &v.history.pinned {
            s += &format!(
                "- pinned in {}: {} by {} (committed by {}) in `{}` {}{}\n",
                if c.waves.is_empty() {
                    "a wave".to_string()
                } else {
                    c.waves.join(", ")
                },
                t(Some(c.at)),
                c.proposed_by.as_deref().unwrap_or(&c.author),
                c.committer,
                &c.commit[..12],
                c.pr.as_deref().unwrap_or(""),
                if c.subject.is_empty() {
                    String::new()
                } else {
                    format!(" \"{}\"", c.subject)
                }
            );
        }
        for r in &v.reached {
            s += &format!(
                "- reached {}/{} (wave {}): {}\n",
                r.cluster,
                r.pool,
                r.wave,
                r.at.map_or("not every node yet".into(), |a| t(Some(a)))
            );
        }
    }
    s += "\n## Breaches of maxAge\n\n";
    if e.breaches.is_empty() {
        s += "None in the period.\n";
    } else {
        s += "| cluster | pool | version | due | until | cause |\n|---|---|---|---|---|---|\n";
        for b in &e.breaches {
            s += &format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                b.cluster,
                b.pool,
                b.version,
                t(Some(b.due)),
                b.until.map_or("still running".into(), |u| t(Some(u))),
                b.cause.replace('|', "/")
            );
        }
    }
    s
}

/// The pools as CSV, one row each (the breaches and versions are in the JSON and markdown).
pub fn csv(e: &Evidence) -> String {
    let mut s = String::from(
        "cluster,pool,wave,inForce,released,ageDays,maxAge,overdue,overdueSince,breaches\n",
    );
    for p in &e.pools {
        let n = e
            .breaches
            .iter()
            .filter(|b| b.cluster == p.cluster && b.pool == p.pool)
            .count();
        s += &format!(
            "{},{},{},{},{},{},{},{},{},{n}\n",
            p.cluster,
            p.pool,
            p.wave,
            p.in_force.as_deref().unwrap_or(""),
            p.released.map(|r| t(Some(r))).unwrap_or_default(),
            p.age_days.map(|d| format!("{d:.3}")).unwrap_or_default(),
            p.max_age.as_deref().unwrap_or(""),
            p.overdue,
            p.overdue_since.map(|r| t(Some(r))).unwrap_or_default()
        );
    }
    s
}

/// Each pool's stop cause from the notes on `commit` (`person: cause; next: ...`).
fn causes(
    repo: &std::path::Path,
    fleet: &Fleet,
    commit: &str,
) -> BTreeMap<(String, String), String> {
    let store = crate::report::GitNotesStore::new(repo, None, None);
    store.scope_to(fleet.clusters.keys().cloned());
    let rt = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(rt) => rt,
        Err(_) => return BTreeMap::new(),
    };
    let docs = rt.block_on(store.docs(commit)).unwrap_or_default();
    let mut out = BTreeMap::new();
    for d in docs {
        for s in d.statuses {
            let Some(pool) = s.context.strip_prefix(&format!("rota/{}/", d.cluster)) else {
                continue;
            };
            let cause = match &s.stop {
                Some(stop) => format!("{}: {}", stop.headline(), stop.line()),
                None => s.description.clone(),
            };
            out.insert(
                (d.cluster.clone(), pool.to_string()),
                rota_core::sanitize::text(&cause).into_owned(),
            );
        }
    }
    out
}

pub fn run(args: EvidenceArgs) -> ExitCode {
    crate::telemetry::init_one_shot();
    crate::ui::load::trust_the_object_store();
    match evidence(&args) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rota evidence: {e}");
            ExitCode::from(2)
        }
    }
}

fn evidence(args: &EvidenceArgs) -> Result<String, String> {
    let repo = open_repo(&args.repo, &args.state_dir, &args.git)?;
    let path = repo.path().to_path_buf();
    let fleet = crate::source::read::load_git_at(&path, &args.rev, args.subdir.as_deref())
        .map_err(|d| format!("the fleet at {}: {d}", args.rev))?;
    let head = repo
        .revparse_single(&args.rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(|e| format!("{}: {}", args.rev, e.message()))?
        .id();
    let at = args.at.unwrap_or_else(Utc::now);
    let period = args.period.unwrap_or((at - Duration::days(365), at));
    let lives = super::audit::lives(
        &repo,
        &Filter {
            from: Some(period.0.min(at)),
            ..Filter::default()
        },
    )?;
    let asked: Vec<(String, String)> = fleet
        .spec
        .images
        .iter()
        .flat_map(|(c, ch)| ch.versions.keys().map(move |v| (c.clone(), v.clone())))
        .collect();
    let histories = history::versions(&repo, head, &asked).map_err(|e| e.message().to_string())?;
    let causes = causes(&path, &fleet, &head.to_string());
    let e = compose(
        &fleet,
        &head.to_string(),
        &lives,
        histories,
        &causes,
        at,
        period,
    )?;
    Ok(match args.format {
        EvidenceFormat::Json => serde_json::to_string_pretty(&e).expect("serialisable") + "\n",
        EvidenceFormat::Csv => csv(&e),
        EvidenceFormat::Markdown => markdown(&e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rota_core::fleet::{SourceFile, load_files};

    const FLEET: &str = r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {name: acme}
spec:
  images:
    general:
      maxAge: 30d
      versions:
        "1": {aws: ami-0a1b2c3d4e5f60718, released: "2026-10-01T00:00:00Z"}
        "2": {aws: ami-0f9e8d7c6b5a40312, released: "2026-11-20T00:00:00Z"}
  waves:
    - name: canary
      clusters: [c]
      images: {general: "2"}
---
apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {name: c}
spec:
  cloud: {aws: {region: us-east-1}}
  pools:
    - name: general
      channel: general
      nodeSelector: {pool: general}
      group: {autoScalingGroup: c-general}
"#;

    fn day(d: u32) -> DateTime<Utc> {
        chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, d, 0, 0, 0).unwrap()
    }

    fn life(node: &str, v: &str, joined: DateTime<Utc>, left: Option<DateTime<Utc>>) -> Life {
        Life {
            cluster: "c".into(),
            pool: "general".into(),
            node: node.into(),
            instance: format!("i-{node}"),
            image: format!("ami-{v}"),
            version: Some(format!("general@{v}")),
            joined,
            joined_before: None,
            drained_at: None,
            drained_by: None,
            left,
            left_how: None,
            left_rotation: None,
            rotation: None,
            commit: None,
        }
    }

    fn fleet() -> Fleet {
        load_files(&[SourceFile {
            path: "fleet.yaml".into(),
            bytes: FLEET.as_bytes().to_vec(),
        }])
        .unwrap()
    }

    /// The pool ran version 1 (released 2026-10-01, due 2026-10-31) until 2026-11-21: a
    /// breach from the deadline to that day, with the pool's stop as its cause; at 11-25 it
    /// runs version 2, and its age there is what the agent's metric says for it.
    #[test]
    fn the_evidence_names_the_breach_and_agrees_with_the_age_metric() {
        let lives = [
            life("a", "1", day(1), Some(day(21))),
            life("b", "2", day(21), None),
        ];
        let causes: BTreeMap<_, _> = [(
            ("c".to_string(), "general".to_string()),
            "needs a person (Halted)".to_string(),
        )]
        .into_iter()
        .collect();
        let at = day(25);
        let f = fleet();
        let e = compose(
            &f,
            "abc",
            &lives,
            BTreeMap::new(),
            &causes,
            at,
            (day(1), at),
        )
        .unwrap();
        assert_eq!(e.pools.len(), 1);
        let p = &e.pools[0];
        assert_eq!(p.in_force.as_deref(), Some("general@2"));
        assert!(!p.overdue);
        assert_eq!(e.breaches.len(), 1, "{:?}", e.breaches);
        let b = &e.breaches[0];
        assert_eq!((b.version.as_str(), b.until), ("general@1", Some(day(21))));
        assert_eq!(
            b.due,
            chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 10, 31, 0, 0, 0).unwrap()
        );
        assert_eq!(b.cause, "needs a person (Halted)");
        // The agent's gauge for the pool, from the spec of the version it runs.
        let m = crate::metrics::Metrics::for_cluster("c");
        let spec_released = f.spec.images["general"].versions["2"].released;
        let max_age = f.spec.images["general"].max_age.map(|a| a.as_duration());
        m.set_pool_image_age("general", spec_released, max_age, at);
        let seconds = (p.age_days.unwrap() * 86_400.0).round() as i64;
        let line =
            format!(r#"rota_pool_image_age_seconds{{cluster="c",pool="general"}} {seconds}"#);
        assert!(m.render_at(at).contains(&line), "{line} not in the metrics");
        assert!(
            markdown(&e).contains("| c | general | general@1 |"),
            "{}",
            markdown(&e)
        );
        assert!(
            csv(&e).lines().nth(1).unwrap().ends_with(",1"),
            "{}",
            csv(&e)
        );
    }
}
