//! Revert proposals: which waves should go back to the version they pinned before, because a
//! pool of theirs recorded that the version pinned now is bad (a health gate failed on it, or
//! its image did not boot). A pure function of the pins and their history, the waves' pools
//! and the agents' records; `promotion::revert` at the edge reads those from git and writes
//! the proposal: a commit on `rota/revert/<wave>/<channel>-<version>` and one pull request,
//! with this module's title and body. A person reviews and merges; merging is the revert.
//!
//! A wave pinned to `channel@V` calls for a revert when a pool of its clusters on `channel`
//! recorded a failure on V
//!
//! 1. after the pin moved to V: the failure is not in the records the agents had written
//!    before the commit that moved it (`PinHistory::recorded_before`: each cluster's newest
//!    note on a commit older than the move, in the branch's first-parent order). A failure
//!    already there is from an earlier time V was pinned: a person pinned it again since,
//!    knowing. The order is the agents' records and the history's, never a commit's date: the
//!    pusher chooses that (`GIT_COMMITTER_DATE` a day ahead once made today's failure look
//!    "recorded before" the move, and no revert was proposed);
//! 2. not followed by a completion of V by the same pool. That pool recovered (a gate paused
//!    it and a person resumed it to the end); the promotion guard lets the next wave take V
//!    then, and a revert would contradict it;
//!
//! and the wave pinned another version of the channel before (`previous`), still among the
//! channel's versions: that is where it goes back to. Without one, a person decides, and the
//! decision says so ([`RevertDecision::ByHand`]).
//!
//! Worked example: wave canary pinned general@2026.11.1 until the merge of 10:00 moved it to
//! 2026.11.2; canary-use1/general records gate error-rate failing on 2026.11.2 at 10:40 (and
//! rolls back). The decision: revert canary from 2026.11.2 to 2026.11.1 on branch
//! `rota/revert/canary/general-2026.11.2`, evidence `canary-use1/general: gate error-rate
//! failed at 2026-11-22T10:40:00Z`. A failure of 2026.11.2 recorded at 09:30 and found in
//! canary-use1's note on a commit before the merge would not call for it; nor would one on
//! 2026.11.1.
//!
//! The branch names the wave and the version, never the time or the evidence: every pass that
//! finds the same failures, or more of them, proposes on the same branch, so there is never
//! more than one proposal per wave and version.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::guard::WaveView;
use super::records::{GateFailure, PoolRecord, PoolRef};
use crate::sanitize;

/// A wave's pin of one channel at the branch head, and where it came from in git.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinHistory {
    pub wave: String,
    pub channel: String,
    /// The version the wave pins at the head.
    pub version: String,
    /// When the pin moved to `version`: the time of the oldest commit of the run of commits,
    /// back from the head, that pin it (the history's oldest commit if all of it does). Said
    /// in the proposal; never used to order the evidence (the pusher chose it).
    pub since: DateTime<Utc>,
    /// The records of the wave's pools as they stood before the pin moved: each cluster's
    /// newest note on a commit older than the one that moved it (first-parent order). A
    /// failure found here was recorded before the move. Empty when no such note was read.
    pub recorded_before: Vec<PoolRecord>,
    /// The version the wave pinned before that run; `None` when the history read has none
    /// (the pin was added with `version`, or the history ends first).
    pub previous: Option<String>,
}

/// One recorded failure that calls for (or, [`RevertDecision::ByHand`], asks about) a revert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    pub pool: PoolRef,
    pub failure: GateFailure,
}

impl Evidence {
    /// `canary-use1/general: gate error-rate failed at 2026-11-22T10:40:00Z`.
    pub fn describe(&self) -> String {
        format!(
            "{}/{}: {} at {}",
            self.pool.cluster,
            self.pool.pool,
            sanitize::line(&self.failure.what()),
            stamp(self.failure.at)
        )
    }

    /// The same as a markdown list item, every name in a code span (a gate name is whatever
    /// an agent wrote: no markup, link or mention of it may render).
    fn markdown(&self) -> String {
        let what = if self.failure.did_not_boot() {
            "the image did not boot (new nodes never Ready)".to_string()
        } else {
            format!("gate {} failed", sanitize::code_span(&self.failure.gate))
        };
        format!(
            "- {}: {what} at {}",
            sanitize::code_span(&format!("{}/{}", self.pool.cluster, self.pool.pool)),
            stamp(self.failure.at)
        )
    }
}

/// A revert to propose: wave `wave` pins `channel` back from `from` to `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revert {
    pub wave: String,
    pub channel: String,
    pub from: String,
    pub to: String,
    /// When the wave's pin moved to `from`.
    pub since: DateTime<Utc>,
    /// The failures it rests on, oldest first (never empty).
    pub evidence: Vec<Evidence>,
}

/// Evidence lines shown at most in a body; the rest are counted.
const SHOWN: usize = 50;

impl Revert {
    /// Since when a closed pull request of this revert's branch counts as "a person closed
    /// it" (and the revert is not proposed again): the pin move's commit time, but never
    /// earlier than the first failure the evidence rests on. The commit time is the pusher's
    /// to choose: dated in the past, it would let a pull request closed in an earlier period
    /// of the same version (pinned, failed, closed, moved away, pinned again) silence this
    /// one. The failures' times are the agents' records, and a revert of this period is only
    /// proposed once one of them exists, so a pull request closed before the first of them
    /// belongs to another period. Erring late only proposes again; it never hides a revert.
    pub fn closed_counts_since(&self) -> DateTime<Utc> {
        let first_failure = self.evidence.iter().map(|e| e.failure.at).min();
        first_failure.map_or(self.since, |f| self.since.max(f))
    }

    /// `rota/revert/<wave>/<channel>-<version>`: one per wave and version, whatever the
    /// evidence, so that a later pass updates the proposal rather than making another.
    pub fn branch(&self) -> String {
        branch(&self.wave, &self.channel, &self.from)
    }

    /// `Revert wave canary to general@2026.11.1 (gate error-rate failed on general@2026.11.2)`.
    pub fn title(&self) -> String {
        let from = format!("{}@{}", self.channel, self.from);
        let first = &self.evidence[0].failure;
        let why = if first.did_not_boot() {
            format!("{from} did not boot")
        } else {
            // A gate's name as an agent recorded it: one line, and not a paragraph.
            let gate: String = sanitize::line(&first.gate).chars().take(63).collect();
            format!("gate {gate} failed on {from}")
        };
        let more = match self.evidence.len() {
            1 => String::new(),
            2 => ", and 1 more failure".to_string(),
            n => format!(", and {} more failures", n - 1),
        };
        format!(
            "Revert wave {} to {}@{} ({why}{more})",
            self.wave, self.channel, self.to
        )
    }

    /// The pull request's body (and the commit message's): what is proposed, why, and the
    /// evidence as a markdown list.
    pub fn body(&self) -> String {
        let mut out = format!(
            "Wave **{}** has pinned {}@{} since {}, and pools of the wave recorded failures on \
             it. This pins the wave back to {}@{}, the version it pinned before.\n\n\
             Evidence, from the agents' records (git notes):\n\n",
            self.wave,
            self.channel,
            self.from,
            stamp(self.since),
            self.channel,
            self.to
        );
        for e in self.evidence.iter().take(SHOWN) {
            out += &e.markdown();
            out.push('\n');
        }
        if self.evidence.len() > SHOWN {
            out += &format!("- and {} more\n", self.evidence.len() - SHOWN);
        }
        out += &format!(
            "\nMerging this is the revert: the agents of wave {} roll its pools on channel {} \
             back to {}; meanwhile the promotion guard holds the later waves. rota proposes one \
             revert per wave and version: later passes update this one while the failures \
             stand, and never open a second.\n",
            self.wave, self.channel, self.to
        );
        out
    }
}

/// The branch of the revert of `wave`'s pin `channel@version`.
pub fn branch(wave: &str, channel: &str, version: &str) -> String {
    format!("rota/revert/{wave}/{channel}-{version}")
}

/// What one pin calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevertDecision {
    /// No recorded failure calls for going back.
    Keep { reason: String },
    /// Failures call for going back, but not to a version rota can name: a person decides.
    ByHand {
        reason: String,
        evidence: Vec<Evidence>,
    },
    /// Propose this revert.
    Revert(Revert),
}

/// One pin of one wave and what it calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevertCheck {
    pub wave: String,
    pub channel: String,
    pub version: String,
    pub decision: RevertDecision,
}

impl RevertCheck {
    /// One line: `↩ wave canary: general 2026.11.2 → 2026.11.1: revert (...)`, `· wave
    /// canary: general@2026.11.2: no revert: ...` or `! wave canary: general@2026.11.2: ...`.
    pub fn describe(&self) -> String {
        let first = |e: &[Evidence]| {
            let more = match e.len() {
                1 => String::new(),
                n => format!(" and {} more", n - 1),
            };
            format!("{}{more}", e[0].describe())
        };
        match &self.decision {
            RevertDecision::Keep { reason } => format!(
                "· wave {}: {}@{}: no revert: {reason}",
                self.wave, self.channel, self.version
            ),
            RevertDecision::ByHand { reason, evidence } => format!(
                "! wave {}: {}@{}: {}; {reason}",
                self.wave,
                self.channel,
                self.version,
                first(evidence)
            ),
            RevertDecision::Revert(r) => format!(
                "↩ wave {}: {} {} → {}: revert ({})",
                r.wave,
                r.channel,
                r.from,
                r.to,
                first(&r.evidence)
            ),
        }
    }
}

/// What each pin in `pins` calls for, in their order. `available(channel, version)`: whether
/// the fleet at the head still declares that version (a revert must load).
pub fn reverts(
    waves: &[WaveView],
    pins: &[PinHistory],
    records: &[PoolRecord],
    available: impl Fn(&str, &str) -> bool,
) -> Vec<RevertCheck> {
    let index: HashMap<(&str, &str), &PoolRecord> = records
        .iter()
        .map(|r| ((r.cluster.as_str(), r.pool.as_str()), r))
        .collect();
    pins.iter()
        .map(|pin| RevertCheck {
            wave: pin.wave.clone(),
            channel: pin.channel.clone(),
            version: pin.version.clone(),
            decision: decide(waves, pin, &index, &available),
        })
        .collect()
}

fn decide(
    waves: &[WaveView],
    pin: &PinHistory,
    index: &HashMap<(&str, &str), &PoolRecord>,
    available: &impl Fn(&str, &str) -> bool,
) -> RevertDecision {
    let (wave, channel, version) = (&pin.wave, &pin.channel, &pin.version);
    let cv = format!("{channel}@{version}");
    let pools: Vec<&PoolRef> = waves
        .iter()
        .filter(|w| &w.name == wave)
        .flat_map(|w| w.pools.iter())
        .filter(|p| &p.channel == channel)
        .collect();
    if pools.is_empty() {
        return RevertDecision::Keep {
            reason: format!("no pool of wave {wave} follows channel {channel}"),
        };
    }
    let earlier: HashMap<(&str, &str), &PoolRecord> = pin
        .recorded_before
        .iter()
        .map(|r| ((r.cluster.as_str(), r.pool.as_str()), r))
        .collect();
    let mut evidence = Vec::new();
    let mut before = 0;
    let mut recovered: Option<(&PoolRef, DateTime<Utc>)> = None;
    for p in pools {
        let Some(r) = index.get(&(p.cluster.as_str(), p.pool.as_str())) else {
            continue;
        };
        let done = r.latest_completion(channel, version);
        let known = earlier.get(&(p.cluster.as_str(), p.pool.as_str()));
        for f in r
            .gate_failures
            .iter()
            .filter(|f| &f.channel == channel && &f.version == version)
        {
            if known.is_some_and(|k| k.gate_failures.contains(f)) {
                before += 1;
            } else if let Some(done) = done.filter(|d| *d >= f.at) {
                recovered = recovered.or(Some((p, done)));
            } else {
                evidence.push(Evidence {
                    pool: p.clone(),
                    failure: f.clone(),
                });
            }
        }
    }
    if evidence.is_empty() {
        let reason = match (recovered, before) {
            (Some((p, done)), _) => format!(
                "{}/{} recorded a failure on {cv} and completed it afterwards (at {}): it recovered",
                p.cluster,
                p.pool,
                stamp(done)
            ),
            (None, n) if n > 0 => format!(
                "the failures on {cv} were recorded before wave {wave} pinned it again (at {})",
                stamp(pin.since)
            ),
            _ => format!("no pool of wave {wave} recorded a failure on {cv}"),
        };
        return RevertDecision::Keep { reason };
    }
    evidence.sort_by(|a, b| {
        (a.failure.at, &a.pool.cluster, &a.pool.pool).cmp(&(
            b.failure.at,
            &b.pool.cluster,
            &b.pool.pool,
        ))
    });
    let Some(to) = &pin.previous else {
        return RevertDecision::ByHand {
            reason: format!(
                "wave {wave} pinned no other version of {channel} before {version} in the history \
                 read: nothing to go back to, pin it by hand"
            ),
            evidence,
        };
    };
    if !available(channel, to) {
        return RevertDecision::ByHand {
            reason: format!(
                "{channel}@{to}, which wave {wave} pinned before, is no longer among channel \
                 {channel}'s versions: pin it by hand"
            ),
            evidence,
        };
    }
    RevertDecision::Revert(Revert {
        wave: wave.clone(),
        channel: channel.clone(),
        from: version.clone(),
        to: to.clone(),
        since: pin.since,
        evidence,
    })
}

/// A record's time, to the second.
fn stamp(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use std::time::Duration;

    fn t(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, h, m, 0).unwrap()
    }

    const V: &str = "2026.11.2";
    const P: &str = "2026.11.1";

    /// canary: canary-use1/general, canary-use1/gpu (channel gpu), canary-euw1/general;
    /// main: prod-use1/general.
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
                soak: Duration::ZERO,
                pools: vec![PoolRef::new("prod-use1", "general", "general")],
            },
        ]
    }

    /// canary pins general@V since 10:00, general@P before.
    fn canary_pin() -> PinHistory {
        PinHistory {
            wave: "canary".into(),
            channel: "general".into(),
            version: V.into(),
            since: t(10, 0),
            previous: Some(P.into()),
            recorded_before: Vec::new(),
        }
    }

    fn decide_one(pin: PinHistory, records: &[PoolRecord]) -> RevertDecision {
        let mut checks = reverts(&waves(), &[pin], records, |_, _| true);
        assert_eq!(checks.len(), 1);
        checks.remove(0).decision
    }

    fn keep_reason(d: &RevertDecision) -> &str {
        match d {
            RevertDecision::Keep { reason } => reason,
            d => panic!("want Keep, got {d:?}"),
        }
    }

    #[test]
    fn a_pin_move_dated_in_the_past_does_not_let_an_older_closed_pull_request_count() {
        let records = [PoolRecord::new("canary-use1", "general").gate_failed(
            "general",
            V,
            "error-rate",
            t(10, 40),
        )];
        // Honest: the move at 10:00, the failure at 10:40: closed pull requests count from
        // the failure on (a revert of this period was proposed no earlier).
        let RevertDecision::Revert(r) = decide_one(canary_pin(), &records) else {
            panic!("want a revert")
        };
        assert_eq!(r.closed_counts_since(), t(10, 40));
        // The pusher dated the move a week back: still from the first failure.
        let mut pin = canary_pin();
        pin.since = t(10, 0) - chrono::Duration::days(7);
        let RevertDecision::Revert(r) = decide_one(pin, &records) else {
            panic!("want a revert")
        };
        assert_eq!(r.closed_counts_since(), t(10, 40));
        // Dated in the future: from that date (later only proposes again).
        let mut pin = canary_pin();
        pin.since = t(12, 0);
        if let RevertDecision::Revert(r) = decide_one(pin, &records) {
            assert_eq!(r.closed_counts_since(), t(12, 0));
        }
    }

    #[test]
    fn no_failure_no_revert() {
        let records = [
            PoolRecord::new("canary-use1", "general").completed("general", V, t(10, 30)),
            PoolRecord::new("canary-euw1", "general"),
        ];
        let d = decide_one(canary_pin(), &records);
        assert_eq!(
            keep_reason(&d),
            "no pool of wave canary recorded a failure on general@2026.11.2"
        );
        assert_eq!(
            keep_reason(&decide_one(canary_pin(), &[])),
            "no pool of wave canary recorded a failure on general@2026.11.2"
        );
    }

    #[test]
    fn a_gate_failure_at_the_pinned_version_reverts_to_the_previous_pin() {
        let records = [
            PoolRecord::new("canary-use1", "general").gate_failed(
                "general",
                V,
                "error-rate",
                t(10, 40),
            ),
            PoolRecord::new("canary-euw1", "general").completed("general", V, t(10, 30)),
        ];
        let RevertDecision::Revert(r) = decide_one(canary_pin(), &records) else {
            panic!("want a revert")
        };
        assert_eq!(
            (
                r.wave.as_str(),
                r.channel.as_str(),
                r.from.as_str(),
                r.to.as_str()
            ),
            ("canary", "general", V, P)
        );
        assert_eq!(r.branch(), "rota/revert/canary/general-2026.11.2");
        assert_eq!(
            r.title(),
            "Revert wave canary to general@2026.11.1 (gate error-rate failed on general@2026.11.2)"
        );
        assert_eq!(r.evidence.len(), 1);
        assert_eq!(
            r.evidence[0].describe(),
            "canary-use1/general: gate error-rate failed at 2026-11-22T10:40:00Z"
        );
        let body = r.body();
        assert!(
            body.contains(
                "- `canary-use1/general`: gate `error-rate` failed at 2026-11-22T10:40:00Z\n"
            ),
            "{body}"
        );
        assert!(body.contains("since 2026-11-22T10:00:00Z"), "{body}");
        assert!(body.contains("back to general@2026.11.1"), "{body}");
        let line = reverts(&waves(), &[canary_pin()], &records, |_, _| true)[0].describe();
        assert_eq!(
            line,
            "↩ wave canary: general 2026.11.2 → 2026.11.1: revert (canary-use1/general: gate error-rate failed at 2026-11-22T10:40:00Z)"
        );
    }

    #[test]
    fn an_image_that_did_not_boot_reverts_too() {
        let records =
            [PoolRecord::new("canary-euw1", "general").did_not_boot("general", V, t(10, 20))];
        let RevertDecision::Revert(r) = decide_one(canary_pin(), &records) else {
            panic!("want a revert")
        };
        assert_eq!(
            r.title(),
            "Revert wave canary to general@2026.11.1 (general@2026.11.2 did not boot)"
        );
        assert!(
            r.body().contains(
                "- `canary-euw1/general`: the image did not boot (new nodes never Ready) at 2026-11-22T10:20:00Z"
            ),
            "{}",
            r.body()
        );
    }

    #[test]
    fn a_failure_on_an_older_version_or_another_channel_or_wave_does_not_revert() {
        let records = [
            PoolRecord::new("canary-use1", "general").gate_failed(
                "general",
                P,
                "error-rate",
                t(10, 40),
            ),
            PoolRecord::new("canary-use1", "gpu").gate_failed("gpu", V, "error-rate", t(10, 40)),
            PoolRecord::new("prod-use1", "general").gate_failed(
                "general",
                V,
                "error-rate",
                t(10, 40),
            ),
        ];
        assert_eq!(
            keep_reason(&decide_one(canary_pin(), &records)),
            "no pool of wave canary recorded a failure on general@2026.11.2"
        );
    }

    #[test]
    fn a_failure_recorded_before_the_pin_moved_there_does_not_revert() {
        // general@V was pinned once, failed at 09:30, went back; pinned again at 10:00. The
        // agent's note on a commit before the move already holds the 09:30 failure.
        let old = PoolRecord::new("canary-use1", "general").gate_failed(
            "general",
            V,
            "error-rate",
            t(9, 30),
        );
        let pin = PinHistory {
            recorded_before: vec![old.clone()],
            ..canary_pin()
        };
        assert_eq!(
            keep_reason(&decide_one(pin.clone(), std::slice::from_ref(&old))),
            "the failures on general@2026.11.2 were recorded before wave canary pinned it again (at 2026-11-22T10:00:00Z)"
        );
        // A new failure after the move, beside the old one: only the new one is evidence.
        let now = old
            .clone()
            .gate_failed("general", V, "error-rate", t(10, 40));
        let RevertDecision::Revert(r) = decide_one(pin, &[now]) else {
            panic!("want a revert")
        };
        assert_eq!(r.evidence.len(), 1);
        assert_eq!(r.evidence[0].failure.at, t(10, 40));
    }

    /// The commit that moved the pin was dated a day ahead by its pusher: a failure the
    /// agents recorded after the move, at 10:40 of the same day, is still after it, because
    /// no record from before the move holds it. The date plays no part.
    #[test]
    fn a_future_dated_move_does_not_hide_a_failure_recorded_after_it() {
        let pin = PinHistory {
            since: t(10, 0) + chrono::Duration::days(1),
            recorded_before: vec![PoolRecord::new("canary-use1", "general")],
            ..canary_pin()
        };
        let records = [PoolRecord::new("canary-use1", "general").gate_failed(
            "general",
            V,
            "error-rate",
            t(10, 40),
        )];
        assert!(matches!(
            decide_one(pin, &records),
            RevertDecision::Revert(_)
        ));
    }

    #[test]
    fn a_pool_that_completed_the_version_after_its_failure_recovered() {
        let records = [PoolRecord::new("canary-use1", "general")
            .gate_failed("general", V, "error-rate", t(10, 40))
            .completed("general", V, t(11, 0))];
        assert_eq!(
            keep_reason(&decide_one(canary_pin(), &records)),
            "canary-use1/general recorded a failure on general@2026.11.2 and completed it afterwards (at 2026-11-22T11:00:00Z): it recovered"
        );
        // A failure after its completion stands.
        let records = [PoolRecord::new("canary-use1", "general")
            .completed("general", V, t(10, 30))
            .gate_failed("general", V, "error-rate", t(10, 40))];
        assert!(matches!(
            decide_one(canary_pin(), &records),
            RevertDecision::Revert(_)
        ));
    }

    #[test]
    fn no_previous_pin_asks_a_person_with_the_evidence() {
        let pin = PinHistory {
            previous: None,
            ..canary_pin()
        };
        let records = [PoolRecord::new("canary-use1", "general").gate_failed(
            "general",
            V,
            "error-rate",
            t(10, 40),
        )];
        let d = decide_one(pin, &records);
        let RevertDecision::ByHand { reason, evidence } = &d else {
            panic!("want ByHand, got {d:?}")
        };
        assert_eq!(
            reason,
            "wave canary pinned no other version of general before 2026.11.2 in the history read: nothing to go back to, pin it by hand"
        );
        assert_eq!(evidence.len(), 1);
        // The previous version is gone from the channel: the same.
        let checks = reverts(&waves(), &[canary_pin()], &records, |_, v| v != P);
        let RevertDecision::ByHand { reason, .. } = &checks[0].decision else {
            panic!("want ByHand")
        };
        assert!(reason.contains("general@2026.11.1, which wave canary pinned before, is no longer among channel general's versions"), "{reason}");
        assert!(
            checks[0].describe().starts_with(
                "! wave canary: general@2026.11.2: canary-use1/general: gate error-rate failed at"
            ),
            "{}",
            checks[0].describe()
        );
    }

    #[test]
    fn a_wave_without_pools_on_the_channel_keeps_its_pin() {
        let pin = PinHistory {
            wave: "main".into(),
            channel: "gpu".into(),
            ..canary_pin()
        };
        assert_eq!(
            keep_reason(&decide_one(pin, &[])),
            "no pool of wave main follows channel gpu"
        );
    }

    #[test]
    fn two_passes_propose_on_one_branch_whatever_the_evidence() {
        let first = [PoolRecord::new("canary-use1", "general").gate_failed(
            "general",
            V,
            "error-rate",
            t(10, 40),
        )];
        let second = [
            PoolRecord::new("canary-use1", "general")
                .gate_failed("general", V, "error-rate", t(10, 40))
                .gate_failed("general", V, "pods-healthy", t(11, 40)),
            PoolRecord::new("canary-euw1", "general").did_not_boot("general", V, t(11, 10)),
        ];
        let (RevertDecision::Revert(a), RevertDecision::Revert(b)) = (
            decide_one(canary_pin(), &first),
            decide_one(canary_pin(), &second),
        ) else {
            panic!("want two reverts")
        };
        assert_eq!(a.branch(), b.branch());
        // The newer pass says more, oldest first.
        assert_eq!(b.evidence.len(), 3);
        assert_eq!(b.evidence[1].pool.cluster, "canary-euw1");
        assert_eq!(
            b.title(),
            "Revert wave canary to general@2026.11.1 (gate error-rate failed on general@2026.11.2, and 2 more failures)"
        );
        // Deterministic: the same inputs, the same proposal.
        assert_eq!(
            decide_one(canary_pin(), &second),
            decide_one(canary_pin(), &second)
        );
    }

    #[test]
    fn recorded_text_cannot_mark_up_the_proposal() {
        let records = [PoolRecord::new("canary-use1", "general").gate_failed(
            "general",
            V,
            "x` <img src=//evil> @everyone \u{1b}[2J",
            t(10, 40),
        )];
        let RevertDecision::Revert(r) = decide_one(canary_pin(), &records) else {
            panic!("want a revert")
        };
        let body = r.body();
        assert!(
            body.contains("gate `x' <img src=//evil> @everyone \\u{1b}[2J` failed"),
            "{body}"
        );
        assert!(!r.title().contains('\u{1b}'), "{}", r.title());
    }
}
