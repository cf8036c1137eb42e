//! The promotion guard (contract: "Waves and the promotion guard"). With `promotion.guard:
//! true`, a pool in wave k starts rotating to version v of channel c only when
//!
//! 1. every pool on channel c in every earlier wave has a recorded completion of v,
//! 2. the newest of those completions is at least that earlier wave's `soak` old, and
//! 3. no gate failure on v was recorded after it.
//!
//! Until then the pool waits, and its pending status names what it waits for. A pure
//! function of (waves, records, now): the records come from the status store, the clock from
//! the caller.
//!
//! Two readings the contract leaves open, decided here:
//! - An earlier wave with no pool on channel c imposes nothing (neither completion nor soak):
//!   it has nothing to prove about c.
//! - A gate failure blocks when recorded after the wave's newest completion, and also when
//!   recorded after the failing pool's own latest completion (the pool went bad after it
//!   finished, even if a sibling completed later). A failure during a pool's rollout that the
//!   pool then recovered from and completed does not block.
//!
//! Worked example (canary soak 1h): canary-use1/general completes general@2026.11.2 at 10:00,
//! canary-euw1/general at 10:20. At 11:05 main waits ("soak: 15m left"); at 11:20 it may go.
//! A gate failure on 2026.11.2 at 10:40 blocks until a new completion is recorded.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::records::{PoolRecord, PoolRef};

/// One wave as the guard sees it: its name, soak, and every pool of its clusters with the
/// channel each follows (from the resolved fleet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaveView {
    pub name: String,
    pub soak: Duration,
    pub pools: Vec<PoolRef>,
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
    /// The pending status description (at most 140 characters).
    pub fn describe(&self, channel: &str, version: &str) -> String {
        let cv = format!("{channel}@{version}");
        let text = match self {
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
            Wait::GateFailure { wave, pool, gate, at } => format!(
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
        };
        crate::report::fit_description(&text)
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
    let record_of = |p: &PoolRef| {
        records
            .iter()
            .find(|r| r.cluster == p.cluster && r.pool == p.pool)
    };
    for earlier in &waves[..k] {
        let on_channel: Vec<&PoolRef> = earlier.pools.iter().filter(|p| p.channel == channel).collect();
        if on_channel.is_empty() {
            continue;
        }
        // 1. every pool on c has completed v (its latest completion of v).
        let mut missing = Vec::new();
        let mut completions = Vec::new();
        for p in &on_channel {
            match record_of(p).and_then(|r| r.latest_completion(channel, version)) {
                Some(at) => completions.push((*p, at)),
                None => missing.push((*p).clone()),
            }
        }
        if !missing.is_empty() {
            return GuardDecision::Waiting(Wait::Completion {
                wave: earlier.name.clone(),
                pools: missing,
            });
        }
        let newest = completions.iter().map(|(_, at)| *at).max().expect("non-empty");
        // 3. no gate failure on v after the newest completion, or after the failing pool's
        //    own completion.
        let mut blocking = None;
        for (p, own) in &completions {
            let since = (*own).min(newest);
            let failures = record_of(p).into_iter().flat_map(|r| r.gate_failures.iter());
            for f in failures.filter(|f| f.channel == channel && f.version == version && f.at > since) {
                if blocking.as_ref().is_none_or(|(_, g): &(&PoolRef, &super::records::GateFailure)| f.at > g.at) {
                    blocking = Some((*p, f));
                }
            }
        }
        if let Some((p, f)) = blocking {
            return GuardDecision::Waiting(Wait::GateFailure {
                wave: earlier.name.clone(),
                pool: p.clone(),
                gate: f.gate.clone(),
                at: f.at,
            });
        }
        // 2. the newest completion is at least the wave's soak old.
        let soak = chrono::Duration::from_std(earlier.soak).unwrap_or(chrono::Duration::MAX);
        let until = newest.checked_add_signed(soak).unwrap_or(DateTime::<Utc>::MAX_UTC);
        if now < until {
            return GuardDecision::Waiting(Wait::Soak {
                wave: earlier.name.clone(),
                completed_at: newest,
                until,
                remaining: (until - now).to_std().unwrap_or_default(),
            });
        }
    }
    GuardDecision::Allowed {
        reason: format!(
            "every earlier wave completed {channel}@{version} and soaked"
        ),
    }
}
