//! The per-wave rollup status, `rota/wave/<name>`: one context per wave instead of one per
//! cluster and pool (`rota agent --status-contexts waves`), for forges at fleet size. Pure:
//! the wave's pinned pools and the promotion records in, one status out.
//!
//! Its description counts what the records show, and names what holds the wave:
//! `390 clusters, 1,424 pools on their pins: 1,200 done, 220 to go, 4 failed · held: …`;
//! its target URL is the fleet page filtered to the wave, when the agent knows the page.
//! State: `failure` when a pool failed on its pin, else `pending` while any pool is not
//! done, else `success`.
//!
//! One agent per wave writes it: the agent of the wave's first cluster in name order
//! ([`writer`]), so that a wave costs one writer's requests, not one per cluster. Clusters
//! never talk to each other; every agent derives the same writer from the same commit and
//! from the git notes every agent writes. When the first cluster's agent is down (or cut off
//! from the repo), the next of [`CANDIDATES`] takes over: one that has seen no notes on the
//! commit from the candidates before it for [`TAKEOVER_AFTER`] writes the rollup itself, and
//! hands it back as soon as one of them reports the commit.

use std::collections::{BTreeSet, HashMap};

use rota_core::fleet::proposal::count as grouped;
use rota_core::waves::PoolRecord;

use super::status::{CommitStatus, State};

/// One pool of the wave and the version its channel pins at the commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedPool {
    pub cluster: String,
    pub pool: String,
    pub channel: String,
    pub version: String,
}

/// The context of a wave's rollup status.
pub fn wave_context(wave: &str) -> String {
    format!("rota/wave/{wave}")
}

/// How many of a wave's clusters, in name order, may write its rollup: the first, and the
/// next ones in turn while those before them are silent. Only they read the notes of the
/// candidates before them, so a wave of 390 clusters does not make 390 agents read each
/// other's notes.
pub const CANDIDATES: usize = 3;

/// How long a candidate waits, from when its agent first reported a commit, for a candidate
/// before it to report the commit too, before it writes the rollup itself: long enough for a
/// live agent's next poll (a minute by default) and its pass, short enough that a wave's
/// rollup is not stale for long.
pub const TAKEOVER_AFTER: chrono::Duration = chrono::Duration::minutes(10);

/// The clusters of the wave that may write its rollup, in the order they take it over.
pub fn candidates<'a>(clusters: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let all: BTreeSet<&str> = clusters.into_iter().collect();
    all.into_iter().take(CANDIDATES).collect()
}

/// Whether the agent of `me` writes the rollup of the wave `clusters` make up, on a commit
/// its agent first reported `waited` ago, when the clusters in `reported` have written notes
/// on it: the first candidate always; a later one when every candidate before it is silent on
/// the commit and it has waited [`TAKEOVER_AFTER`].
pub fn writer<'a>(
    clusters: impl IntoIterator<Item = &'a str>,
    me: &str,
    reported: &BTreeSet<String>,
    waited: chrono::Duration,
) -> bool {
    for c in candidates(clusters) {
        if c == me {
            return true;
        }
        if reported.contains(c) || waited < TAKEOVER_AFTER {
            return false;
        }
    }
    false
}

/// Where a pool stands on its pin, by its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Done,
    Failed,
    /// Rotating, waiting, held, or not reported yet.
    ToGo,
}

/// A pool is done when it recorded a completion of its pin after its last failure on it,
/// failed when a failure on its pin is its newest record of it.
pub fn standing(record: Option<&PoolRecord>, channel: &str, version: &str) -> Standing {
    let Some(r) = record else {
        return Standing::ToGo;
    };
    let done = r.latest_completion(channel, version);
    let failed = r
        .gate_failures
        .iter()
        .filter(|f| f.channel == channel && f.version == version)
        .map(|f| f.at)
        .max();
    match (done, failed) {
        (Some(d), Some(f)) if f > d => Standing::Failed,
        (None, Some(_)) => Standing::Failed,
        (Some(_), _) => Standing::Done,
        (None, None) => Standing::ToGo,
    }
}

/// The wave's rollup status from its pools' records. `held`: what the promotion guard says
/// holds the wave (the writer's own held pools' description), if anything; `page`: the fleet
/// page's URL.
pub fn wave_status(
    wave: &str,
    pools: &[PinnedPool],
    records: &[PoolRecord],
    held: Option<&str>,
    page: Option<&str>,
) -> CommitStatus {
    let by_pool: HashMap<(&str, &str), &PoolRecord> = records
        .iter()
        .map(|r| ((r.cluster.as_str(), r.pool.as_str()), r))
        .collect();
    let (mut done, mut failed, mut to_go) = (0, 0, 0);
    for p in pools {
        let record = by_pool.get(&(p.cluster.as_str(), p.pool.as_str())).copied();
        match standing(record, &p.channel, &p.version) {
            Standing::Done => done += 1,
            Standing::Failed => failed += 1,
            Standing::ToGo => to_go += 1,
        }
    }
    let clusters: BTreeSet<&str> = pools.iter().map(|p| p.cluster.as_str()).collect();
    let mut text = format!(
        "{} clusters, {} pools on their pins: {} done",
        grouped(clusters.len()),
        grouped(pools.len()),
        grouped(done)
    );
    if to_go > 0 {
        text += &format!(", {} to go", grouped(to_go));
    }
    if failed > 0 {
        text += &format!(", {} failed", grouped(failed));
    }
    if let Some(h) = held {
        text += &format!(" · held: {h}");
    }
    let state = if failed > 0 {
        State::Failure
    } else if to_go > 0 {
        State::Pending
    } else {
        State::Success
    };
    let status = CommitStatus::new(wave_context(wave), state, &text);
    match page {
        Some(url) => status.with_target_url(crate::page_link::wave(url, wave)),
        None => status,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn pin(cluster: &str, pool: &str) -> PinnedPool {
        PinnedPool {
            cluster: cluster.into(),
            pool: pool.into(),
            channel: "general".into(),
            version: "2".into(),
        }
    }

    fn at(h: u32) -> chrono::DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, h, 0, 0).unwrap()
    }

    #[test]
    fn the_rollup_counts_done_to_go_and_failed_and_names_the_hold() {
        let pools = [pin("a", "p"), pin("a", "q"), pin("b", "p"), pin("c", "p")];
        let records = [
            PoolRecord::new("a", "p").completed("general", "2", at(1)),
            // A completion of another version is not this pin's.
            PoolRecord::new("a", "q").completed("general", "1", at(1)),
            PoolRecord::new("b", "p").did_not_boot("general", "2", at(2)),
        ];
        let s = wave_status(
            "prod",
            &pools,
            &records,
            Some("waits for canary's soak"),
            Some("https://rota.example.com/"),
        );
        assert_eq!(s.context, "rota/wave/prod");
        assert_eq!(s.state, State::Failure);
        assert_eq!(
            s.description,
            "3 clusters, 4 pools on their pins: 1 done, 2 to go, 1 failed · held: waits for canary's soak"
        );
        assert_eq!(
            s.target_url.as_deref(),
            Some("https://rota.example.com/?wave=prod")
        );
        // Done everywhere: success, no hold, no link without a page.
        let records: Vec<PoolRecord> = pools
            .iter()
            .map(|p| PoolRecord::new(&p.cluster, &p.pool).completed("general", "2", at(3)))
            .collect();
        let s = wave_status("prod", &pools, &records, None, None);
        assert_eq!(s.state, State::Success);
        assert_eq!(s.description, "3 clusters, 4 pools on their pins: 4 done");
        assert_eq!(s.target_url, None);
    }

    #[test]
    fn a_completion_after_a_failure_is_done_and_a_failure_after_it_is_failed() {
        let r = PoolRecord::new("a", "p")
            .did_not_boot("general", "2", at(1))
            .completed("general", "2", at(2));
        assert_eq!(standing(Some(&r), "general", "2"), Standing::Done);
        let r = PoolRecord::new("a", "p")
            .completed("general", "2", at(1))
            .did_not_boot("general", "2", at(2));
        assert_eq!(standing(Some(&r), "general", "2"), Standing::Failed);
        assert_eq!(standing(None, "general", "2"), Standing::ToGo);
    }

    #[test]
    fn a_big_wave_fits_a_forge_description_and_groups_thousands() {
        let pools: Vec<PinnedPool> = (0..10_000).map(|i| pin(&format!("c{i:05}"), "p")).collect();
        let held = "x".repeat(300);
        let s = wave_status("prod", &pools, &[], Some(&held), None);
        assert!(
            s.description
                .starts_with("10,000 clusters, 10,000 pools on their pins: 0 done, 10,000 to go")
        );
        assert_eq!(
            s.description.chars().count(),
            super::super::MAX_DESCRIPTION_CHARS
        );
    }

    #[test]
    fn one_writer_per_wave_the_first_cluster_by_name() {
        let wave = ["prod-b", "prod-a", "prod-c", "prod-d", "prod-e"];
        let all: BTreeSet<String> = wave.iter().map(|c| c.to_string()).collect();
        let writers = |reported: &BTreeSet<String>, minutes: i64| -> Vec<&str> {
            let waited = chrono::Duration::minutes(minutes);
            let mut w: Vec<&str> = wave
                .iter()
                .filter(|me| writer(wave.iter().copied(), me, reported, waited))
                .copied()
                .collect();
            w.sort();
            w
        };
        // Everyone up: the first by name, however long they waited.
        assert_eq!(writers(&all, 0), ["prod-a"]);
        assert_eq!(writers(&all, 60), ["prod-a"]);
        assert!(!writer(
            wave.iter().copied(),
            "elsewhere",
            &all,
            chrono::Duration::hours(1)
        ));
        // prod-a is silent on the commit: prod-b waits TAKEOVER_AFTER, then takes over.
        let without = |gone: &[&str]| -> BTreeSet<String> {
            all.iter()
                .filter(|c| !gone.contains(&c.as_str()))
                .cloned()
                .collect()
        };
        assert_eq!(writers(&without(&["prod-a"]), 9), ["prod-a"]);
        assert_eq!(writers(&without(&["prod-a"]), 10), ["prod-a", "prod-b"]);
        // (prod-a, if it is up after all, writes too: the same status, from the same notes.)
        // prod-a and prod-b silent (down): prod-c takes over; with the first three silent,
        // nobody else does (candidates are the first three only).
        let wave_of = || wave.iter().copied();
        let ten = chrono::Duration::minutes(10);
        let two_down = without(&["prod-a", "prod-b"]);
        assert!(writer(wave_of(), "prod-c", &two_down, ten));
        assert!(!writer(wave_of(), "prod-d", &two_down, ten));
        let three_down = without(&["prod-a", "prod-b", "prod-c"]);
        assert!(!writer(
            wave_of(),
            "prod-d",
            &three_down,
            chrono::Duration::hours(5)
        ));
        assert_eq!(candidates(wave_of()), ["prod-a", "prod-b", "prod-c"]);
        // prod-a reports again: the rollup is its own once more.
        assert_eq!(writers(&all, 30), ["prod-a"]);
    }
}
