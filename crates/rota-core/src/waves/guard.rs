//! The promotion guard (contract: "Waves and the promotion guard"). With `promotion.guard:
//! true`, a pool in wave k starts rotating to version v of channel c only when
//!
//! 1. every pool on channel c in every earlier wave has a recorded completion of v (a
//!    rotation to v, or an adoption: the pool already ran v when its agent first met it),
//! 2. the newest of those completions is at least that earlier wave's `soak` old, and
//! 3. no gate failure on v was recorded after it.
//!
//! Until then the pool waits, and its pending status names what it waits for. A pure
//! function of (waves, records, now): the records come from the status store, the clock from
//! the caller.
//!
//! Readings the contract leaves open, decided here:
//! - An adopted pool counts as having completed v, and imposes no soak: nothing rotated.
//! - Pools missing a completion whose cluster has no record at all are reported as clusters
//!   no agent has reported from (`no rota agent has reported from canary-use1`), not as a
//!   rollout to wait for.
//! - An earlier wave with no pool on channel c imposes nothing (neither completion nor soak):
//!   it has nothing to prove about c.
//! - A gate failure blocks when recorded after the wave's newest completion, and also when
//!   recorded after the failing pool's own latest completion (the pool went bad after it
//!   finished, even if a sibling completed later). A failure during a pool's rollout that the
//!   pool then recovered from and completed does not block.
//! - A pool that has not completed v but recorded a failure on v (a gate, or the image did
//!   not boot: [`super::records::DID_NOT_BOOT`]) is named for its failure rather than as a
//!   rollout to wait for: the wait is the same, its reason is the one to act on.
//!
//! Worked example (canary soak 1h): canary-use1/general completes general@2026.11.2 at 10:00,
//! canary-euw1/general at 10:20. At 11:05 main waits ("soak: 15m left"); at 11:20 it may go.
//! A gate failure on 2026.11.2 at 10:40 blocks until a new completion is recorded.

use crate::rotate::stop::{MovedBy, StopNote};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::records::{CompletionKind, GateFailure, PoolRecord, PoolRef};
use crate::fleet::Fleet;
use crate::fleet::resolved::DesiredCluster;

/// One wave as the guard sees it: its name, soak, and every pool of its clusters with the
/// channel each follows (from the resolved fleet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaveView {
    pub name: String,
    pub soak: Duration,
    pub pools: Vec<PoolRef>,
}

/// The waves as the guard sees them, from the resolved fleet.
pub fn wave_views(fleet: &Fleet, clusters: &[DesiredCluster]) -> Vec<WaveView> {
    fleet
        .waves()
        .iter()
        .map(|w| WaveView {
            name: w.name.clone(),
            soak: w.soak.map(|s| s.as_duration()).unwrap_or_default(),
            pools: clusters
                .iter()
                .filter(|c| c.wave == w.name)
                .flat_map(|c| {
                    c.pools
                        .iter()
                        .map(|p| PoolRef::new(&c.name, &p.name, &p.channel))
                })
                .collect(),
        })
        .collect()
}

/// What a pool wants to do: roll `channel` to `version` in `wave`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Promotion<'a> {
    pub wave: &'a str,
    pub channel: &'a str,
    pub version: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardDecision {
    Allowed { reason: String },
    Waiting(Wait),
}

impl GuardDecision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, GuardDecision::Allowed { .. })
    }
}

/// What a pool waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    /// These pools of `wave` have no recorded completion of the version.
    Completion { wave: String, pools: Vec<PoolRef> },
    /// These clusters of `wave` have no record at all: no agent has reported from them.
    NeverReported { wave: String, clusters: Vec<String> },
    /// A gate failed on the version after the wave completed it.
    GateFailure {
        wave: String,
        pool: PoolRef,
        gate: String,
        at: DateTime<Utc>,
    },
    /// The wave completed the version at `completed_at`; its soak ends at `until`.
    Soak {
        wave: String,
        completed_at: DateTime<Utc>,
        until: DateTime<Utc>,
        remaining: Duration,
    },
    /// The pool's wave is not in the fleet's wave list (a resolution bug: never promote).
    UnknownWave { wave: String },
}

impl Wait {
    /// What the pool waits for, in one line (a commit status fits it to the forges' 140
    /// characters: `report::CommitStatus::new`).
    pub fn describe(&self, channel: &str, version: &str) -> String {
        let cv = format!("{channel}@{version}");
        match self {
            Wait::Completion { wave, pools } => {
                let first = &pools[0];
                let more = match pools.len() {
                    1 => String::new(),
                    n => format!(" and {} more", n - 1),
                };
                format!(
                    "waiting for {}/{}{more} (wave {wave}) to complete {cv}",
                    first.cluster, first.pool
                )
            }
            Wait::NeverReported { wave, clusters } => {
                let more = match clusters.len() {
                    1 => String::new(),
                    n => format!(" and {} more", n - 1),
                };
                format!(
                    "waiting for wave {wave}: no rota agent has reported from {}{more} (is one running there?)",
                    clusters[0]
                )
            }
            Wait::GateFailure {
                wave,
                pool,
                gate,
                at,
            } if gate == super::records::DID_NOT_BOOT => format!(
                "waiting: {cv} did not boot on {}/{} (wave {wave}) at {}",
                pool.cluster,
                pool.pool,
                at.format("%Y-%m-%dT%H:%MZ")
            ),
            Wait::GateFailure {
                wave,
                pool,
                gate,
                at,
            } => format!(
                "waiting: gate {gate} failed on {}/{} (wave {wave}) for {cv} at {}",
                pool.cluster,
                pool.pool,
                at.format("%Y-%m-%dT%H:%MZ")
            ),
            Wait::Soak {
                wave,
                until,
                remaining,
                ..
            } => format!(
                "waiting for wave {wave} to soak {cv}: {} left (until {})",
                human(*remaining),
                until.format("%Y-%m-%dT%H:%MZ")
            ),
            Wait::UnknownWave { wave } => format!("wave {wave} is not in the fleet's waves"),
        }
    }

    /// The stop note of a pool the guard holds (`rotate::stop`): what holds it (the earlier
    /// wave's pools or clusters, a gate), who moves it on and how. Reason `WaveGuard`.
    pub fn stop_note(&self, channel: &str, version: &str) -> StopNote {
        const SHOWN: usize = 20;
        let cv = format!("{channel}@{version}");
        let (by, blocked_by, next) = match self {
            Wait::Completion { wave, pools } => (
                MovedBy::Rota,
                pools
                    .iter()
                    .take(SHOWN)
                    .map(|p| format!("pool {}/{}", p.cluster, p.pool))
                    .collect(),
                format!("nothing to do: it takes {cv} once wave {wave} completes it and soaks"),
            ),
            Wait::NeverReported { wave, clusters } => (
                MovedBy::Person,
                clusters
                    .iter()
                    .take(SHOWN)
                    .map(|c| format!("cluster {c}"))
                    .collect(),
                format!(
                    "run a rota agent in the clusters named, or a commit taking them out of wave {wave}"
                ),
            ),
            Wait::GateFailure {
                wave, pool, gate, ..
            } => (
                MovedBy::Person,
                vec![
                    format!("pool {}/{}", pool.cluster, pool.pool),
                    format!("gate {gate}"),
                ],
                format!(
                    "a commit pinning wave {wave} to a version that passes (rota propose opens the revert)"
                ),
            ),
            Wait::Soak { wave, until, .. } => (
                MovedBy::Rota,
                vec![format!("wave {wave}'s soak")],
                format!("nothing to do: it takes {cv} at {}", until.to_rfc3339()),
            ),
            Wait::UnknownWave { .. } => (
                MovedBy::Person,
                Vec::new(),
                "a bug in rota: report it with the fleet repo's waves".into(),
            ),
        };
        StopNote {
            reason: "WaveGuard".into(),
            by,
            cause: self.describe(channel, version),
            blocked_by,
            next,
        }
    }
}

/// `1h5m`, `15m`, `42s`: how long is left, rounded up to the second.
fn human(d: Duration) -> String {
    let mut s = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    let h = s / 3600;
    s %= 3600;
    let m = s / 60;
    s %= 60;
    let mut out = String::new();
    if h > 0 {
        out += &format!("{h}h");
    }
    if m > 0 {
        out += &format!("{m}m");
    }
    if s > 0 || out.is_empty() {
        out += &format!("{s}s");
    }
    out
}

/// Decides whether `promotion` may start now.
pub fn promotion_guard(
    enabled: bool,
    waves: &[WaveView],
    promotion: Promotion<'_>,
    records: &[PoolRecord],
    now: DateTime<Utc>,
) -> GuardDecision {
    let Promotion {
        wave,
        channel,
        version,
    } = promotion;
    if !enabled {
        return GuardDecision::Allowed {
            reason: "promotion guard disabled".into(),
        };
    }
    let Some(k) = waves.iter().position(|w| w.name == wave) else {
        return GuardDecision::Waiting(Wait::UnknownWave { wave: wave.into() });
    };
    if k == 0 {
        return GuardDecision::Allowed {
            reason: format!("wave {wave} is the first wave"),
        };
    }
    let judge = Judge {
        channel,
        version,
        records,
        // Indexed once: a fleet has hundreds of pools and each is looked up per decision.
        index: records
            .iter()
            .map(|r| ((r.cluster.as_str(), r.pool.as_str()), r))
            .collect(),
        now,
    };
    let mut adopted = 0;
    for earlier in &waves[..k] {
        match judge.earlier_wave(earlier) {
            Verdict::Clear { adopted: n } => adopted += n,
            Verdict::Holds(wait) => return GuardDecision::Waiting(wait),
        }
    }
    let reason = match adopted {
        0 => format!("every earlier wave completed {channel}@{version} and soaked"),
        n => format!(
            "every earlier wave completed or already ran {channel}@{version} ({n} pools adopted) and soaked"
        ),
    };
    GuardDecision::Allowed { reason }
}

/// What one earlier wave says of a promotion.
enum Verdict {
    /// It completed (or adopted) the version, without a failure since, and soaked.
    Clear { adopted: usize },
    /// It holds the promotion, and why.
    Holds(Wait),
}

/// The guard's view of one promotion's evidence: the agents' records, indexed by pool.
struct Judge<'a> {
    channel: &'a str,
    version: &'a str,
    records: &'a [PoolRecord],
    index: std::collections::HashMap<(&'a str, &'a str), &'a PoolRecord>,
    now: DateTime<Utc>,
}

impl<'a> Judge<'a> {
    fn record_of(&self, p: &PoolRef) -> Option<&'a PoolRecord> {
        self.index
            .get(&(p.cluster.as_str(), p.pool.as_str()))
            .copied()
    }

    /// The gate failures a pool recorded on the promoted version.
    fn failures_of(&self, p: &PoolRef) -> impl Iterator<Item = &'a GateFailure> {
        let (channel, version) = (self.channel, self.version);
        self.record_of(p)
            .into_iter()
            .flat_map(|r| r.gate_failures.iter())
            .filter(move |f| f.channel == channel && f.version == version)
    }

    /// One earlier wave's rules, in order: (1) every pool on the channel completed the
    /// version (its latest completion of it) or was adopted on it; (3) no gate failure on the
    /// version after the newest completion, or after the failing pool's own; (2) the newest
    /// completion has soaked the wave's soak.
    fn earlier_wave(&self, earlier: &WaveView) -> Verdict {
        let on_channel = earlier.pools.iter().filter(|p| p.channel == self.channel);
        let (mut missing, mut completions, mut soak_from, mut adopted) =
            (Vec::new(), Vec::new(), None, 0);
        for p in on_channel {
            match self
                .record_of(p)
                .and_then(|r| r.latest(self.channel, self.version))
            {
                Some(c) => {
                    completions.push((p, c.completed_at));
                    if c.kind == CompletionKind::Rotated {
                        soak_from = soak_from.max(Some(c.completed_at));
                    } else {
                        adopted += 1;
                    }
                }
                None => missing.push(p.clone()),
            }
        }
        if !missing.is_empty() {
            return Verdict::Holds(self.why_missing(earlier, missing));
        }
        if let Some((p, f)) = self.failure_after_completion(&completions) {
            return Verdict::Holds(Wait::GateFailure {
                wave: earlier.name.clone(),
                pool: p.clone(),
                gate: f.gate.clone(),
                at: f.at,
            });
        }
        // Adoptions have nothing to soak: the version ran there before rota did.
        match soak_from.and_then(|newest| self.soaking(earlier, newest)) {
            Some(wait) => Verdict::Holds(wait),
            None => Verdict::Clear { adopted },
        }
    }

    /// Why pools of an earlier wave have not completed the version: a failure they recorded
    /// on it (the image is in question), clusters whose agent never reported (the one thing
    /// to fix), or a rollout still to wait for.
    fn why_missing(&self, earlier: &WaveView, missing: Vec<PoolRef>) -> Wait {
        let failed = missing
            .iter()
            .flat_map(|p| self.failures_of(p).map(move |f| (p, f)))
            .max_by_key(|(_, f)| f.at);
        if let Some((p, f)) = failed {
            return Wait::GateFailure {
                wave: earlier.name.clone(),
                pool: p.clone(),
                gate: f.gate.clone(),
                at: f.at,
            };
        }
        let mut silent: Vec<String> = Vec::new();
        for p in &missing {
            if !self.records.iter().any(|r| r.cluster == p.cluster) && !silent.contains(&p.cluster)
            {
                silent.push(p.cluster.clone());
            }
        }
        if !silent.is_empty() {
            return Wait::NeverReported {
                wave: earlier.name.clone(),
                clusters: silent,
            };
        }
        Wait::Completion {
            wave: earlier.name.clone(),
            pools: missing,
        }
    }

    /// The latest gate failure on the version after the newest completion of the wave, or
    /// after the failing pool's own completion when that is earlier.
    fn failure_after_completion<'p>(
        &self,
        completions: &[(&'p PoolRef, DateTime<Utc>)],
    ) -> Option<(&'p PoolRef, &'a GateFailure)> {
        let newest = completions.iter().map(|(_, at)| *at).max()?;
        let mut blocking: Option<(&PoolRef, &GateFailure)> = None;
        for (p, own) in completions {
            let since = (*own).min(newest);
            for f in self.failures_of(p).filter(|f| f.at > since) {
                if blocking.is_none_or(|(_, g)| f.at > g.at) {
                    blocking = Some((*p, f));
                }
            }
        }
        blocking
    }

    /// The wave's soak, while the newest rotated completion is younger than it.
    fn soaking(&self, earlier: &WaveView, newest: DateTime<Utc>) -> Option<Wait> {
        let soak = chrono::Duration::from_std(earlier.soak).unwrap_or(chrono::Duration::MAX);
        let until = newest
            .checked_add_signed(soak)
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        (self.now < until).then(|| Wait::Soak {
            wave: earlier.name.clone(),
            completed_at: newest,
            until,
            remaining: (until - self.now).to_std().unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::waves::records::PoolRecord;
    use chrono::TimeZone;

    fn t(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, h, m, 0).unwrap()
    }

    const V: &str = "2026.11.2";

    /// canary (soak 1h): canary-use1/general, canary-use1/gpu (channel gpu),
    /// canary-euw1/general; main (soak 2h): prod-use1/general; last: prod-apse1/general.
    fn waves() -> Vec<WaveView> {
        vec![
            WaveView {
                name: "canary".into(),
                soak: Duration::from_secs(3600),
                pools: vec![
                    PoolRef::new("canary-use1", "general", "general"),
                    PoolRef::new("canary-use1", "gpu", "gpu"),
                    PoolRef::new("canary-euw1", "general", "general"),
                ],
            },
            WaveView {
                name: "main".into(),
                soak: Duration::from_secs(2 * 3600),
                pools: vec![PoolRef::new("prod-use1", "general", "general")],
            },
            WaveView {
                name: "last".into(),
                soak: Duration::ZERO,
                pools: vec![PoolRef::new("prod-apse1", "general", "general")],
            },
        ]
    }

    fn main_general() -> Promotion<'static> {
        Promotion {
            wave: "main",
            channel: "general",
            version: V,
        }
    }

    fn both_canaries_done() -> Vec<PoolRecord> {
        vec![
            PoolRecord::new("canary-use1", "general").completed("general", V, t(10, 0)),
            PoolRecord::new("canary-euw1", "general").completed("general", V, t(10, 20)),
        ]
    }

    struct Case {
        name: &'static str,
        enabled: bool,
        promotion: Promotion<'static>,
        records: Vec<PoolRecord>,
        now: DateTime<Utc>,
        want: Result<(), &'static str>,
    }

    #[test]
    fn contract_table() {
        let cases = vec![
            Case {
                name: "guard disabled: anything goes",
                enabled: false,
                promotion: main_general(),
                records: vec![],
                now: t(10, 0),
                want: Ok(()),
            },
            Case {
                name: "the first wave never waits",
                enabled: true,
                promotion: Promotion {
                    wave: "canary",
                    channel: "general",
                    version: V,
                },
                records: vec![],
                now: t(10, 0),
                want: Ok(()),
            },
            Case {
                name: "no earlier pool completed v",
                enabled: true,
                promotion: main_general(),
                records: vec![
                    PoolRecord::new("canary-use1", "general"),
                    PoolRecord::new("canary-euw1", "general"),
                ],
                now: t(12, 0),
                want: Err(
                    "waiting for canary-use1/general and 1 more (wave canary) to complete general@2026.11.2",
                ),
            },
            Case {
                name: "one earlier pool on c still missing",
                enabled: true,
                promotion: main_general(),
                records: vec![
                    PoolRecord::new("canary-use1", "general").completed("general", V, t(10, 0)),
                    PoolRecord::new("canary-euw1", "general"),
                ],
                now: t(12, 0),
                want: Err(
                    "waiting for canary-euw1/general (wave canary) to complete general@2026.11.2",
                ),
            },
            Case {
                name: "a completion of another version does not count",
                enabled: true,
                promotion: main_general(),
                records: vec![
                    PoolRecord::new("canary-use1", "general").completed("general", V, t(10, 0)),
                    PoolRecord::new("canary-euw1", "general").completed(
                        "general",
                        "2026.11.1",
                        t(10, 0),
                    ),
                ],
                now: t(12, 0),
                want: Err(
                    "waiting for canary-euw1/general (wave canary) to complete general@2026.11.2",
                ),
            },
            Case {
                name: "clusters with no record at all are named as having no agent",
                enabled: true,
                promotion: main_general(),
                records: vec![],
                now: t(12, 0),
                want: Err(
                    "waiting for wave canary: no rota agent has reported from canary-use1 and 1 more (is one running there?)",
                ),
            },
            Case {
                name: "only the silent cluster is named, not the one whose agent reports",
                enabled: true,
                promotion: main_general(),
                records: vec![PoolRecord::new("canary-use1", "general")],
                now: t(12, 0),
                want: Err(
                    "waiting for wave canary: no rota agent has reported from canary-euw1 (is one running there?)",
                ),
            },
            Case {
                name: "pools adopted on v count as done, with nothing to soak",
                enabled: true,
                promotion: main_general(),
                records: vec![
                    PoolRecord::new("canary-use1", "general").adopted("general", V, t(10, 0)),
                    PoolRecord::new("canary-euw1", "general").adopted("general", V, t(10, 0)),
                ],
                now: t(10, 1),
                want: Ok(()),
            },
            Case {
                name: "an adoption beside a rotation: the soak counts from the rotation",
                enabled: true,
                promotion: main_general(),
                records: vec![
                    PoolRecord::new("canary-use1", "general").adopted("general", V, t(10, 0)),
                    PoolRecord::new("canary-euw1", "general").completed("general", V, t(10, 20)),
                ],
                now: t(11, 5),
                want: Err(
                    "waiting for wave canary to soak general@2026.11.2: 15m left (until 2026-11-22T11:20Z)",
                ),
            },
            Case {
                name: "a gate failure after an adoption blocks",
                enabled: true,
                promotion: main_general(),
                records: vec![
                    PoolRecord::new("canary-use1", "general")
                        .adopted("general", V, t(10, 0))
                        .gate_failed("general", V, "error-rate", t(10, 30)),
                    PoolRecord::new("canary-euw1", "general").adopted("general", V, t(10, 0)),
                ],
                now: t(15, 0),
                want: Err(
                    "waiting: gate error-rate failed on canary-use1/general (wave canary) for general@2026.11.2 at 2026-11-22T10:30Z",
                ),
            },
            Case {
                name: "a pool that failed a gate on v and never completed it is named for the failure",
                enabled: true,
                promotion: main_general(),
                records: vec![
                    PoolRecord::new("canary-use1", "general").completed("general", V, t(10, 0)),
                    PoolRecord::new("canary-euw1", "general").gate_failed(
                        "general",
                        V,
                        "error-rate",
                        t(10, 30),
                    ),
                ],
                now: t(15, 0),
                want: Err(
                    "waiting: gate error-rate failed on canary-euw1/general (wave canary) for general@2026.11.2 at 2026-11-22T10:30Z",
                ),
            },
            Case {
                name: "an image that did not boot holds the later waves, named",
                enabled: true,
                promotion: main_general(),
                records: vec![
                    PoolRecord::new("canary-use1", "general").did_not_boot("general", V, t(10, 5)),
                    PoolRecord::new("canary-euw1", "general"),
                ],
                now: t(15, 0),
                want: Err(
                    "waiting: general@2026.11.2 did not boot on canary-use1/general (wave canary) at 2026-11-22T10:05Z",
                ),
            },
            Case {
                name: "a boot failure after an old completion of v holds too (v pinned again)",
                enabled: true,
                promotion: main_general(),
                records: vec![
                    PoolRecord::new("canary-use1", "general")
                        .completed("general", V, t(8, 0))
                        .did_not_boot("general", V, t(10, 5)),
                    PoolRecord::new("canary-euw1", "general").completed("general", V, t(8, 0)),
                ],
                now: t(15, 0),
                want: Err(
                    "waiting: general@2026.11.2 did not boot on canary-use1/general (wave canary) at 2026-11-22T10:05Z",
                ),
            },
            Case {
                name: "a failure on another version does not name a pool still rolling",
                enabled: true,
                promotion: main_general(),
                records: vec![
                    PoolRecord::new("canary-use1", "general").completed("general", V, t(10, 0)),
                    PoolRecord::new("canary-euw1", "general").gate_failed(
                        "general",
                        "2026.11.1",
                        "error-rate",
                        t(10, 30),
                    ),
                ],
                now: t(15, 0),
                want: Err(
                    "waiting for canary-euw1/general (wave canary) to complete general@2026.11.2",
                ),
            },
            Case {
                name: "pools on other channels are not waited for (canary gpu never completed)",
                enabled: true,
                promotion: main_general(),
                records: both_canaries_done(),
                now: t(11, 20),
                want: Ok(()),
            },
            Case {
                name: "soak counts from the newest completion, not the first",
                enabled: true,
                promotion: main_general(),
                records: both_canaries_done(),
                now: t(11, 5),
                want: Err(
                    "waiting for wave canary to soak general@2026.11.2: 15m left (until 2026-11-22T11:20Z)",
                ),
            },
            Case {
                name: "exactly soak old is old enough",
                enabled: true,
                promotion: main_general(),
                records: both_canaries_done(),
                now: t(11, 20),
                want: Ok(()),
            },
            Case {
                name: "gate failure on v after the newest completion blocks",
                enabled: true,
                promotion: main_general(),
                records: vec![
                    PoolRecord::new("canary-use1", "general")
                        .completed("general", V, t(10, 0))
                        .gate_failed("general", V, "error-rate", t(10, 40)),
                    PoolRecord::new("canary-euw1", "general").completed("general", V, t(10, 20)),
                ],
                now: t(15, 0),
                want: Err(
                    "waiting: gate error-rate failed on canary-use1/general (wave canary) for general@2026.11.2 at 2026-11-22T10:40Z",
                ),
            },
            Case {
                name: "gate failure after the pool's own completion blocks even before a sibling completes later",
                enabled: true,
                promotion: main_general(),
                records: vec![
                    PoolRecord::new("canary-use1", "general")
                        .completed("general", V, t(10, 0))
                        .gate_failed("general", V, "pods-healthy", t(10, 10)),
                    PoolRecord::new("canary-euw1", "general").completed("general", V, t(10, 20)),
                ],
                now: t(15, 0),
                want: Err(
                    "waiting: gate pods-healthy failed on canary-use1/general (wave canary) for general@2026.11.2 at 2026-11-22T10:10Z",
                ),
            },
            Case {
                name: "a failure during the rollout, then a completion, does not block",
                enabled: true,
                promotion: main_general(),
                records: vec![
                    PoolRecord::new("canary-use1", "general")
                        .gate_failed("general", V, "error-rate", t(9, 30))
                        .completed("general", V, t(10, 0)),
                    PoolRecord::new("canary-euw1", "general").completed("general", V, t(10, 20)),
                ],
                now: t(11, 20),
                want: Ok(()),
            },
            Case {
                name: "a failure on another version does not block",
                enabled: true,
                promotion: main_general(),
                records: vec![
                    PoolRecord::new("canary-use1", "general")
                        .completed("general", V, t(10, 0))
                        .gate_failed("general", "2026.11.1", "error-rate", t(10, 30)),
                    PoolRecord::new("canary-euw1", "general").completed("general", V, t(10, 20)),
                ],
                now: t(11, 20),
                want: Ok(()),
            },
            Case {
                name: "a completion after the failure (re-rolled) lifts the block",
                enabled: true,
                promotion: main_general(),
                records: vec![
                    PoolRecord::new("canary-use1", "general")
                        .completed("general", V, t(10, 0))
                        .gate_failed("general", V, "error-rate", t(10, 40))
                        .completed("general", V, t(11, 0)),
                    PoolRecord::new("canary-euw1", "general").completed("general", V, t(10, 20)),
                ],
                now: t(11, 30),
                want: Err(
                    "waiting for wave canary to soak general@2026.11.2: 30m left (until 2026-11-22T12:00Z)",
                ),
            },
            Case {
                name: "every earlier wave: the third wave also waits for canary",
                enabled: true,
                promotion: Promotion {
                    wave: "last",
                    channel: "general",
                    version: V,
                },
                records: vec![
                    PoolRecord::new("canary-use1", "general").completed("general", V, t(10, 0)),
                    PoolRecord::new("canary-euw1", "general"),
                    PoolRecord::new("prod-use1", "general").completed("general", V, t(12, 0)),
                ],
                now: t(15, 0),
                want: Err(
                    "waiting for canary-euw1/general (wave canary) to complete general@2026.11.2",
                ),
            },
            Case {
                name: "every earlier wave: main's own soak (2h) applies to the third wave",
                enabled: true,
                promotion: Promotion {
                    wave: "last",
                    channel: "general",
                    version: V,
                },
                records: {
                    let mut r = both_canaries_done();
                    r.push(PoolRecord::new("prod-use1", "general").completed(
                        "general",
                        V,
                        t(12, 0),
                    ));
                    r
                },
                now: t(13, 0),
                want: Err(
                    "waiting for wave main to soak general@2026.11.2: 1h left (until 2026-11-22T14:00Z)",
                ),
            },
            Case {
                name: "an earlier wave without pools on the channel imposes nothing",
                enabled: true,
                promotion: Promotion {
                    wave: "main",
                    channel: "windows",
                    version: V,
                },
                records: vec![],
                now: t(10, 0),
                want: Ok(()),
            },
            Case {
                name: "a completion stamped in the future is not soaked",
                enabled: true,
                promotion: main_general(),
                records: vec![
                    PoolRecord::new("canary-use1", "general").completed("general", V, t(10, 0)),
                    PoolRecord::new("canary-euw1", "general").completed("general", V, t(16, 0)),
                ],
                now: t(15, 0),
                want: Err(
                    "waiting for wave canary to soak general@2026.11.2: 2h left (until 2026-11-22T17:00Z)",
                ),
            },
            Case {
                name: "an unknown wave never proceeds",
                enabled: true,
                promotion: Promotion {
                    wave: "mian",
                    channel: "general",
                    version: V,
                },
                records: both_canaries_done(),
                now: t(20, 0),
                want: Err("wave mian is not in the fleet's waves"),
            },
        ];
        let waves = waves();
        for c in cases {
            let d = promotion_guard(c.enabled, &waves, c.promotion, &c.records, c.now);
            match (&d, c.want) {
                (GuardDecision::Allowed { .. }, Ok(())) => {}
                (GuardDecision::Waiting(w), Err(text)) => {
                    assert_eq!(
                        w.describe(c.promotion.channel, c.promotion.version),
                        text,
                        "case: {}",
                        c.name
                    )
                }
                (d, want) => panic!("case: {}: got {d:?}, want {want:?}", c.name),
            }
        }
    }

    #[test]
    fn waiting_says_how_long_structurally() {
        let d = promotion_guard(
            true,
            &waves(),
            main_general(),
            &both_canaries_done(),
            t(11, 5),
        );
        assert_eq!(
            d,
            GuardDecision::Waiting(Wait::Soak {
                wave: "canary".into(),
                completed_at: t(10, 20),
                until: t(11, 20),
                remaining: Duration::from_secs(15 * 60),
            })
        );
    }

    #[test]
    fn a_long_wait_names_the_first_pool_and_counts_the_rest() {
        let pools: Vec<PoolRef> = (0..50)
            .map(|i| {
                PoolRef::new(
                    &format!("a-very-long-cluster-name-number-{i}"),
                    "general-purpose-pool",
                    "general",
                )
            })
            .collect();
        let w = Wait::Completion {
            wave: "canary".into(),
            pools,
        };
        let d = w.describe("general", V);
        assert!(d.contains("and 49 more"), "{d}");
    }

    #[test]
    fn human_durations() {
        assert_eq!(human(Duration::from_secs(3900)), "1h5m");
        assert_eq!(human(Duration::from_millis(500)), "1s");
        assert_eq!(human(Duration::ZERO), "0s");
    }
}
