//! What `rota status --fleet` leads with on a big fleet, and what its JSON carries: per wave,
//! clusters by state, pools by phase, the versions in force and their shares, and what holds
//! the wave; then the exceptions a person should look at (failing, halted, held longer than
//! expected, agents silent for long). Pure: the page model, the commit's time and the clock
//! in, counts and lists out, in one pass over the pools (linear in the fleet).

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::model::{FleetPage, Phase, PoolPanel};
use rota_core::rotate::stop::MovedBy;

/// When a wait becomes an exception.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// An agent that has not reported on a commit this long after it was made is silent:
    /// agents poll every minute by default and report within a pass, so half an hour is
    /// many missed passes, not a slow one.
    pub silent_after: Duration,
    /// A hold with no known end (a maintenance window, the guard waiting for an earlier
    /// wave to complete, a wait of rota's) that has lasted this long. Windows recur at
    /// least weekly in practice but most daily; a day held is worth a look, not an alarm.
    pub held_after: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            silent_after: Duration::minutes(30),
            held_after: Duration::hours(24),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetSummary {
    pub clusters: usize,
    pub pools: usize,
    pub waves: Vec<WaveSummary>,
    /// How many exceptions of each kind (all of them, whatever a view lists).
    pub exception_counts: BTreeMap<ExceptionKind, usize>,
    /// Failing first, then halted, held too long, silent; in wave and cluster order.
    pub exceptions: Vec<Exception>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaveSummary {
    pub name: String,
    pub clusters: usize,
    /// Clusters by the state of their own status (`none`: no report on this commit).
    pub cluster_states: BTreeMap<String, usize>,
    pub pools: usize,
    /// Pools by phase, in [`Phase::ALL`] order, only the phases present.
    pub phases: Vec<PhaseCount>,
    /// Per channel, the versions the wave's pools run (their newest completion).
    pub versions: Vec<ChannelShares>,
    /// What holds the wave's held pools, the most common first.
    pub holds: Vec<HoldGroup>,
}

impl WaveSummary {
    /// The clusters' states with their counts, attention first: failure, error, pending,
    /// none (no report), then success.
    pub fn states_by_attention(&self) -> Vec<(&str, usize)> {
        let rank = |st: &str| match st {
            "failure" => 0,
            "error" => 1,
            "pending" => 2,
            "none" => 3,
            _ => 4,
        };
        let mut states: Vec<(&str, usize)> = self
            .cluster_states
            .iter()
            .map(|(st, n)| (st.as_str(), *n))
            .collect();
        states.sort_by_key(|(st, _)| rank(st));
        states
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseCount {
    pub phase: Phase,
    pub pools: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelShares {
    pub channel: String,
    /// The version the wave pins for the channel, when it pins one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    pub pools: usize,
    /// Most pools first; `version: null` is the pools with no completion recorded.
    pub versions: Vec<VersionShare>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionShare {
    pub version: Option<String>,
    pub pools: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HoldGroup {
    /// `guard`, `soak`, `gate`, `window`, `paused` (as [`super::model::Hold`]).
    pub kind: String,
    /// The hold's words without the pool's own progress (so that pools held alike group).
    pub text: String,
    pub pools: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExceptionKind {
    /// A pool failed or is rolling back.
    Failing,
    /// A pool stopped until a person acts (paused, or its stop note names a person).
    Halted,
    /// A pool held past its hold's end, or longer than [`Limits::held_after`].
    HeldTooLong,
    /// A cluster with no report on a commit older than [`Limits::silent_after`].
    Silent,
}

impl ExceptionKind {
    pub const ALL: [ExceptionKind; 4] = [
        ExceptionKind::Failing,
        ExceptionKind::Halted,
        ExceptionKind::HeldTooLong,
        ExceptionKind::Silent,
    ];

    pub fn label(self) -> &'static str {
        match self {
            ExceptionKind::Failing => "failing",
            ExceptionKind::Halted => "halted",
            ExceptionKind::HeldTooLong => "held too long",
            ExceptionKind::Silent => "silent",
        }
    }

    /// The kind's name on the command line and in links (`--exception held-too-long`).
    pub fn key(self) -> &'static str {
        match self {
            ExceptionKind::Failing => "failing",
            ExceptionKind::Halted => "halted",
            ExceptionKind::HeldTooLong => "held-too-long",
            ExceptionKind::Silent => "silent",
        }
    }

    /// The kind named `s` (its key or its label).
    pub fn parse(s: &str) -> Result<ExceptionKind, String> {
        ExceptionKind::ALL
            .into_iter()
            .find(|k| k.key() == s || k.label() == s)
            .ok_or_else(|| {
                let keys: Vec<&str> = ExceptionKind::ALL.iter().map(|k| k.key()).collect();
                format!(
                    "{s:?} is not a kind of exception: one of {}",
                    keys.join(", ")
                )
            })
    }

    /// Whether pool `p` may be an exception of this kind, from the pool alone: what
    /// `--exception KIND` lists, so that the "and N more" of the exceptions lists every one
    /// of them (and, for `held-too-long` and `silent`, which need the clock and the commit's
    /// age, every held or unreported pool among which they are). The same tests, in the
    /// same order, decide [`pool_exception`].
    pub fn may_be(self, p: &PoolPanel) -> bool {
        let failing = matches!(p.phase, Phase::Failed | Phase::RollingBack);
        let person = p.stop.as_ref().is_some_and(|s| s.by == MovedBy::Person);
        let halted = !failing && (p.phase == Phase::Paused || person);
        match self {
            ExceptionKind::Failing => failing,
            ExceptionKind::Halted => halted,
            ExceptionKind::HeldTooLong => !failing && !halted && p.phase == Phase::Held,
            ExceptionKind::Silent => p.phase == Phase::Unknown,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Exception {
    pub kind: ExceptionKind,
    pub wave: String,
    pub cluster: String,
    /// `None` for a cluster-wide exception (a silent agent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Why, in words.
    pub text: String,
    /// Since when (the pool's status, the hold's start, the commit the agent is silent on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
}

/// A hold's words without the pool's own progress: `waiting for a maintenance window · 0/4
/// nodes on general@2` and `... · 3/12 nodes ...` are one hold.
fn hold_words(text: &str) -> &str {
    text.split(" · ").next().unwrap_or(text)
}

/// Why `p` is an exception, if it is one (a pool can be only one kind: the first that
/// applies, failing before halted before held).
fn pool_exception(
    p: &PoolPanel,
    commit_time: DateTime<Utc>,
    now: DateTime<Utc>,
    limits: &Limits,
) -> Option<(ExceptionKind, String, Option<DateTime<Utc>>)> {
    if ExceptionKind::Failing.may_be(p) {
        return Some((ExceptionKind::Failing, p.description.clone(), p.since));
    }
    if ExceptionKind::Halted.may_be(p) {
        let text = match &p.stop {
            // The agent's note whole, not the commit status that abbreviates it to 140
            // characters (which may already carry a shortened "next:").
            Some(s) => format!("{}; next: {}", s.cause, s.next),
            None => p.description.clone(),
        };
        return Some((ExceptionKind::Halted, text, p.since));
    }
    if p.phase != Phase::Held {
        return None;
    }
    let hold = p.hold.as_ref()?;
    // A hold the page found (the guard) started no earlier than the commit that pinned the
    // target; one the agent reported started when it wrote the status (it writes on change).
    let since = p.since.unwrap_or(commit_time).max(commit_time);
    let late = match hold.until {
        // A known end that passed, with the same grace as an agent's report.
        Some(until) => now > until + limits.silent_after,
        None => now - since > limits.held_after,
    };
    late.then(|| {
        (
            ExceptionKind::HeldTooLong,
            format!(
                "held ({}) for {}: {}",
                hold.kind,
                span(since, now),
                hold.text
            ),
            Some(since),
        )
    })
}

/// The summary of `page` (the fleet, or the part a filter selected), shown on a commit made
/// at `commit_time`, as of `page.now`.
pub fn summarize(page: &FleetPage, commit_time: DateTime<Utc>, limits: &Limits) -> FleetSummary {
    let now = page.now;
    let mut by_kind: BTreeMap<ExceptionKind, Vec<Exception>> = BTreeMap::new();
    let mut waves = Vec::with_capacity(page.waves.len());
    let (mut all_clusters, mut all_pools) = (0, 0);
    let silent = now - commit_time > limits.silent_after;
    for w in &page.waves {
        let mut cluster_states: BTreeMap<String, usize> = BTreeMap::new();
        let mut phases: BTreeMap<Phase, usize> = BTreeMap::new();
        let mut shares: BTreeMap<&str, BTreeMap<Option<&str>, usize>> = BTreeMap::new();
        let mut holds: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        let mut pools = 0;
        for c in &w.clusters {
            *cluster_states.entry(c.state.clone()).or_default() += 1;
            let reported = c.state != "none" || c.pools.iter().any(|p| p.phase != Phase::Unknown);
            if !reported && silent {
                by_kind
                    .entry(ExceptionKind::Silent)
                    .or_default()
                    .push(Exception {
                        kind: ExceptionKind::Silent,
                        wave: w.name.clone(),
                        cluster: c.name.clone(),
                        pool: None,
                        text: format!(
                            "no report on this commit, made {} ago",
                            span(commit_time, now)
                        ),
                        since: Some(commit_time),
                    });
            }
            for p in &c.pools {
                pools += 1;
                *phases.entry(p.phase).or_default() += 1;
                *shares
                    .entry(p.channel.as_str())
                    .or_default()
                    .entry(p.in_force.as_deref())
                    .or_default() += 1;
                if let Some(h) = p.hold.as_ref().filter(|_| p.phase == Phase::Held) {
                    *holds
                        .entry((h.kind.as_str(), hold_words(&h.text)))
                        .or_default() += 1;
                }
                if let Some((kind, text, since)) = pool_exception(p, commit_time, now, limits) {
                    by_kind.entry(kind).or_default().push(Exception {
                        kind,
                        wave: w.name.clone(),
                        cluster: c.name.clone(),
                        pool: Some(p.name.clone()),
                        text,
                        since,
                    });
                }
            }
        }
        all_clusters += w.clusters.len();
        all_pools += pools;
        let versions = shares
            .into_iter()
            .map(|(channel, counts)| {
                let mut versions: Vec<VersionShare> = counts
                    .into_iter()
                    .map(|(v, n)| VersionShare {
                        version: v.map(str::to_string),
                        pools: n,
                    })
                    .collect();
                // Most pools first; ties by version, newest (greatest) first.
                versions.sort_by(|a, b| b.pools.cmp(&a.pools).then(b.version.cmp(&a.version)));
                ChannelShares {
                    channel: channel.to_string(),
                    target: w.pins.get(channel).cloned(),
                    pools: versions.iter().map(|v| v.pools).sum(),
                    versions,
                }
            })
            .collect();
        let mut holds: Vec<HoldGroup> = holds
            .into_iter()
            .map(|((kind, text), pools)| HoldGroup {
                kind: kind.to_string(),
                text: text.to_string(),
                pools,
            })
            .collect();
        holds.sort_by_key(|h| std::cmp::Reverse(h.pools));
        waves.push(WaveSummary {
            name: w.name.clone(),
            clusters: w.clusters.len(),
            cluster_states,
            pools,
            phases: Phase::ALL
                .into_iter()
                .filter_map(|phase| phases.get(&phase).map(|&pools| PhaseCount { phase, pools }))
                .collect(),
            versions,
            holds,
        });
    }
    FleetSummary {
        clusters: all_clusters,
        pools: all_pools,
        waves,
        exception_counts: by_kind.iter().map(|(k, v)| (*k, v.len())).collect(),
        exceptions: by_kind.into_values().flatten().collect(),
    }
}

/// `23d 4h`, `5h 10m`, `4m`: from `from` to `to`, for spans of days. Here, below the text
/// view, because the summary's exceptions name their waits with it too.
pub fn span(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    let secs = (to - from).num_seconds().max(0);
    let (d, h, m) = (secs / 86_400, secs % 86_400 / 3_600, secs % 3_600 / 60);
    match (d, h) {
        (0, 0) => format!("{m}m"),
        (0, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::model::{ClusterPanel, Hold, WavePanel};
    use rota_core::rotate::stop::StopNote;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    /// Noon; the commit was made at 09:00.
    fn now() -> DateTime<Utc> {
        at("2026-11-23T12:00:00Z")
    }
    fn commit_time() -> DateTime<Utc> {
        at("2026-11-23T09:00:00Z")
    }

    fn pool(name: &str, phase: Phase, in_force: Option<&str>, description: &str) -> PoolPanel {
        PoolPanel {
            cluster: String::new(),
            name: name.into(),
            channel: "general".into(),
            target: "2".into(),
            in_force: in_force.map(Into::into),
            phase,
            state: if phase == Phase::Unknown {
                "none".into()
            } else {
                "pending".into()
            },
            description: description.into(),
            batch: None,
            nodes: None,
            hold: None,
            since: (phase != Phase::Unknown).then(|| at("2026-11-23T09:05:00Z")),
            stop: None,
        }
    }

    fn held(name: &str, kind: &str, text: &str, until: Option<&str>, since: &str) -> PoolPanel {
        PoolPanel {
            hold: Some(Hold {
                kind: kind.into(),
                text: text.into(),
                until: until.map(at),
            }),
            since: Some(at(since)),
            ..pool(name, Phase::Held, Some("1"), text)
        }
    }

    fn cluster(name: &str, state: &str, pools: Vec<PoolPanel>) -> ClusterPanel {
        ClusterPanel {
            name: name.into(),
            labels: Default::default(),
            state: state.into(),
            description: String::new(),
            pools: pools
                .into_iter()
                .map(|p| PoolPanel {
                    cluster: name.into(),
                    ..p
                })
                .collect(),
        }
    }

    fn page(waves: Vec<(&str, Vec<ClusterPanel>)>) -> FleetPage {
        FleetPage {
            fleet: "acme".into(),
            commit: "abc".into(),
            now: now(),
            waves: waves
                .into_iter()
                .map(|(name, clusters)| WavePanel {
                    name: name.into(),
                    soak: "1h".into(),
                    pins: [("general".to_string(), "2".to_string())].into(),
                    clusters,
                    on_target: 0,
                    total: 0,
                })
                .collect(),
            channels: Vec::new(),
            overdue: Vec::new(),
            unjudged: Vec::new(),
            max_age_channels: Default::default(),
            declared: Default::default(),
        }
    }

    #[test]
    fn a_wave_is_counted_by_cluster_state_phase_version_and_hold() {
        let window = "waiting for a maintenance window";
        let p = page(vec![(
            "main",
            vec![
                cluster(
                    "c1",
                    "success",
                    vec![
                        pool("a", Phase::Done, Some("2"), "4/4 nodes on general@2"),
                        pool("b", Phase::Done, Some("2"), "4/4 nodes on general@2"),
                    ],
                ),
                cluster(
                    "c2",
                    "pending",
                    vec![
                        pool("a", Phase::Rotating, Some("1"), "1/4 nodes on general@2"),
                        // Two window holds whose progress differs are one hold.
                        held(
                            "b",
                            "window",
                            &format!("{window} · 0/4 nodes on general@2"),
                            None,
                            "2026-11-23T10:00:00Z",
                        ),
                        held(
                            "c",
                            "window",
                            &format!("{window} · 0/9 nodes on general@2"),
                            None,
                            "2026-11-23T10:00:00Z",
                        ),
                    ],
                ),
                cluster(
                    "c3",
                    "none",
                    vec![pool("a", Phase::Unknown, None, "no status yet")],
                ),
            ],
        )]);
        let s = summarize(&p, commit_time(), &Limits::default());
        assert_eq!((s.clusters, s.pools), (3, 6));
        let w = &s.waves[0];
        assert_eq!(
            w.cluster_states,
            [
                ("none".into(), 1),
                ("pending".into(), 1),
                ("success".into(), 1)
            ]
            .into()
        );
        // Attention first: held before rotating before no report before done.
        let phases: Vec<(Phase, usize)> = w.phases.iter().map(|c| (c.phase, c.pools)).collect();
        assert_eq!(
            phases,
            [
                (Phase::Held, 2),
                (Phase::Rotating, 1),
                (Phase::Unknown, 1),
                (Phase::Done, 2)
            ]
        );
        // Shares: 2 pools on the target, 3 still on 1, 1 with nothing recorded; most first.
        let general = &w.versions[0];
        assert_eq!(
            (general.channel.as_str(), general.target.as_deref()),
            ("general", Some("2"))
        );
        let shares: Vec<(Option<&str>, usize)> = general
            .versions
            .iter()
            .map(|v| (v.version.as_deref(), v.pools))
            .collect();
        assert_eq!(shares, [(Some("1"), 3), (Some("2"), 2), (None, 1)]);
        assert_eq!(general.pools, 6);
        assert_eq!(
            w.holds,
            [HoldGroup {
                kind: "window".into(),
                text: window.into(),
                pools: 2
            }]
        );
        // Three hours after the commit, c3's agent is silent; nothing else is an exception
        // (the window holds began two hours ago, under a day).
        let kinds: Vec<(ExceptionKind, &str)> = s
            .exceptions
            .iter()
            .map(|e| (e.kind, e.cluster.as_str()))
            .collect();
        assert_eq!(kinds, [(ExceptionKind::Silent, "c3")]);
        assert!(
            s.exceptions[0].text.contains("made 3h 0m ago"),
            "{}",
            s.exceptions[0].text
        );
    }

    #[test]
    fn an_agent_is_silent_only_once_the_commit_is_older_than_the_limit() {
        let p = page(vec![(
            "main",
            vec![cluster(
                "c1",
                "none",
                vec![pool("a", Phase::Unknown, None, "no status yet")],
            )],
        )]);
        // Made 10 minutes ago: the agents have not had their passes yet.
        let fresh = summarize(&p, now() - Duration::minutes(10), &Limits::default());
        assert!(fresh.exceptions.is_empty(), "{:?}", fresh.exceptions);
        let old = summarize(&p, now() - Duration::minutes(31), &Limits::default());
        assert_eq!(old.exception_counts, [(ExceptionKind::Silent, 1)].into());
        assert_eq!(old.exceptions[0].pool, None, "the cluster, not each pool");
    }

    #[test]
    fn failing_halted_and_late_holds_are_exceptions_in_that_order() {
        let person = StopNote {
            reason: "DrainTimeout".into(),
            cause: "drain timed out".into(),
            blocked_by: Vec::new(),
            by: MovedBy::Person,
            next: "rota ctl retry --cluster c1 --pool d".into(),
        };
        let p = page(vec![(
            "main",
            vec![cluster(
                "c1",
                "failure",
                vec![
                    // Listed in the wrong order on purpose: the summary orders by kind.
                    held(
                        "late-window",
                        "window",
                        "waiting for a maintenance window",
                        None,
                        "2026-11-21T12:00:00Z",
                    ),
                    // A soak that should have ended at 11:00: late past the grace (30m).
                    held(
                        "late-soak",
                        "soak",
                        "waiting for wave canary to soak",
                        Some("2026-11-23T11:00:00Z"),
                        "2026-11-23T09:30:00Z",
                    ),
                    // A soak ending at 11:45 is within the grace at noon: not late.
                    held(
                        "soak-in-grace",
                        "soak",
                        "waiting for wave canary to soak",
                        Some("2026-11-23T11:45:00Z"),
                        "2026-11-23T09:30:00Z",
                    ),
                    pool("paused", Phase::Paused, Some("1"), "paused: gate failed"),
                    PoolPanel {
                        stop: Some(Box::new(person)),
                        ..pool("d", Phase::Held, Some("1"), "waits (drain)")
                    },
                    pool("f", Phase::Failed, Some("1"), "failed: image never booted"),
                    pool("r", Phase::RollingBack, Some("2"), "rolling back"),
                ],
            )],
        )]);
        // The commit is two days old: the window's hold began with it.
        let s = summarize(&p, at("2026-11-21T11:00:00Z"), &Limits::default());
        let got: Vec<(ExceptionKind, &str)> = s
            .exceptions
            .iter()
            .map(|e| (e.kind, e.pool.as_deref().unwrap()))
            .collect();
        assert_eq!(
            got,
            [
                (ExceptionKind::Failing, "f"),
                (ExceptionKind::Failing, "r"),
                (ExceptionKind::Halted, "paused"),
                (ExceptionKind::Halted, "d"),
                (ExceptionKind::HeldTooLong, "late-window"),
                (ExceptionKind::HeldTooLong, "late-soak"),
            ]
        );
        // The person's next step is part of the words; the window has been held two days.
        assert!(s.exceptions[3].text.contains("next: rota ctl retry"));
        assert!(
            s.exceptions[4].text.starts_with("held (window) for 2d 0h"),
            "{}",
            s.exceptions[4].text
        );
        assert_eq!(
            s.exception_counts,
            [
                (ExceptionKind::Failing, 2),
                (ExceptionKind::Halted, 2),
                (ExceptionKind::HeldTooLong, 2)
            ]
            .into()
        );
    }

    /// The footer's "and N more" names a command that lists every one of them: the pools a
    /// person must move on that the views show as held (a person's stop while waiting) are
    /// `halted`, and `--state paused` would list none of them.
    #[test]
    fn every_kind_of_exception_has_a_filter_that_lists_all_of_them() {
        let person = |i: usize| PoolPanel {
            stop: Some(Box::new(StopNote {
                reason: "ImageNotFound".into(),
                cause: "AMI missing".into(),
                blocked_by: Vec::new(),
                by: MovedBy::Person,
                next: "a commit pinning an image the cloud can launch here".into(),
            })),
            ..pool(
                &format!("p{i:02}"),
                Phase::Held,
                Some("1"),
                "waits for its image",
            )
        };
        let n = crate::ui::text::EXCEPTIONS_LISTED + 5;
        let mut pools: Vec<PoolPanel> = (0..n).map(person).collect();
        pools.push(pool("f", Phase::Failed, Some("1"), "failed: x"));
        pools.push(pool("ok", Phase::Done, Some("2"), "4/4 nodes on general@2"));
        let p = page(vec![("main", vec![cluster("c1", "failure", pools)])]);
        let s = summarize(&p, commit_time(), &Limits::default());
        assert_eq!(s.exception_counts.get(&ExceptionKind::Halted), Some(&n));
        let text = crate::ui::text::at_size(&p, &s);
        assert!(
            text.contains("and 5 more (rota status --fleet --exception halted)"),
            "{text}"
        );
        for kind in ExceptionKind::ALL {
            let filter = crate::ui::text::Filter {
                exception: Some(kind),
                ..Default::default()
            };
            let listed: Vec<String> = filter
                .select(&p)
                .waves
                .iter()
                .flat_map(|w| &w.clusters)
                .flat_map(|c| &c.pools)
                .map(|p| p.name.clone())
                .collect();
            for e in s.exceptions.iter().filter(|e| e.kind == kind) {
                let pool = e.pool.clone().unwrap();
                assert!(listed.contains(&pool), "{kind:?}: {pool} not in {listed:?}");
            }
            assert_eq!(ExceptionKind::parse(kind.key()), Ok(kind));
        }
        // The kinds apart: the failed pool is not halted, the done one nothing.
        let halted = crate::ui::text::Filter {
            exception: Some(ExceptionKind::Halted),
            ..Default::default()
        };
        let names: Vec<String> = halted.select(&p).waves[0].clusters[0]
            .pools
            .iter()
            .map(|p| p.name.clone())
            .collect();
        assert_eq!(names.len(), n);
        assert!(!names.contains(&"f".to_string()) && !names.contains(&"ok".to_string()));
    }
}
