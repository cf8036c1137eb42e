//! What rota did, as Events: one Normal Event per step of a batch, not one per pass.
//!
//! A step is where the checkpoint is (the batch, its stage) and the pool's phase. The
//! actions every pass of a step carried out are gathered here, by kind and by reason, and
//! posted as one Event when the pool leaves the step (or stops, or has gathered for
//! [`FLUSH_AFTER`]): a batch that surges, drains over a dozen passes as the
//! PodDisruptionBudgets allow and terminates writes three Events, whatever the passes
//! (issue 25: one Event per kind of action per pass was 6.7 writes a rotated node at
//! 3-node pools). The Event's reason is the step's stage (`Surging`, `Draining`,
//! `Terminating`, `Cleanup`, ...), its action the batch (`Batch3`; `Rotate` outside a batch,
//! like the stop Events), so that the kube-rs recorder, which folds Events of the same
//! reason and action into a series that keeps the first note, never folds two batches'
//! steps into one; the note carries every kind of action with its count and reasons.
//!
//! What is gathered lives in the controller's memory: a crash loses the Event of the step
//! under way, never anything of the rotation (the checkpoint and the status say where it
//! is); failures are posted at once, as Warnings, by `apply`.

use crate::rotate::action::Action;
use crate::rotate::outcome::Plan;
use crate::rotate::phase::Phase;
use chrono::{DateTime, Utc};

/// A step gathering for longer than this is posted anyway (a long drain says what it did
/// so far), and again after as long. Longer than the kube-rs recorder's 6-minute series
/// window, so each such Event is a new one with its own note.
pub const FLUSH_AFTER: chrono::TimeDelta = chrono::TimeDelta::minutes(10);

/// Where a pool's actions are gathered: the batch, its stage, the phase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub batch: Option<u32>,
    pub stage: &'static str,
    pub phase: Phase,
}

impl Step {
    /// The step a plan leaves the pool in.
    pub fn of(plan: &Plan) -> Step {
        let stage = plan.checkpoint.as_ref().map(|c| &c.stage);
        Step {
            batch: stage.and_then(|s| s.batch()).map(|b| b.number),
            stage: stage.map_or("Reconcile", |s| s.name()),
            phase: plan.status.phase,
        }
    }

    /// A step that lasts (the pool moves through it): its actions wait for the next step.
    /// Anything else (stopped, waiting, done) is posted at once: no next step may come soon.
    fn lasts(&self) -> bool {
        matches!(
            self.phase,
            Phase::Rotating | Phase::Soaking | Phase::RollingBack
        ) && self.stage != "Done"
    }

    /// The Event's `action`: the batch, so that Events of two batches never share a series.
    pub fn action(&self) -> String {
        match self.batch {
            Some(n) => format!("Batch{n}"),
            None => "Rotate".into(),
        }
    }
}

/// The kind an action is gathered (and a failure's Warning Event is posted) under.
pub fn kind(a: &Action) -> &'static str {
    match a {
        Action::SetImage { .. } => "SetImage",
        Action::SetCapacity { .. } => "SetCapacity",
        Action::SetMax { .. } => "SetMaxSize",
        Action::Cordon { .. } => "Cordon",
        Action::Uncordon { .. } => "Uncordon",
        Action::Evict { .. } => "Evict",
        Action::DeletePod { .. } => "ForceDelete",
        Action::Terminate { .. } => "Terminate",
        Action::TerminateForReplacement { .. } => "TerminateForReplacement",
        Action::SetScaleDownDisabled { .. } => "ScaleDownDisabled",
        Action::WithdrawSurge { .. } => "WithdrawSurge",
        Action::StartOwnerUpdate { .. } => "StartOwnerUpdate",
        Action::PinNodeClassImage { .. } => "PinNodeClassImage",
        Action::SetDisruptionBudgets { .. } => "SetDisruptionBudgets",
        Action::CreateTwinPool { .. } => "CreateTwinPool",
        Action::SetPoolSize { .. } => "SetPoolSize",
        Action::RemovePoolNode { .. } => "RemovePoolNode",
        Action::DeletePool { .. } => "DeletePool",
    }
}

/// The actions carried out, by event kind and reason, in the order first seen.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Digest {
    kinds: Vec<(&'static str, Vec<(String, u32)>)>,
}

impl Digest {
    pub fn add(&mut self, kind: &'static str, reason: &str) {
        let i = match self.kinds.iter().position(|(k, _)| *k == kind) {
            Some(i) => i,
            None => {
                self.kinds.push((kind, Vec::new()));
                self.kinds.len() - 1
            }
        };
        let reasons = &mut self.kinds[i].1;
        match reasons.iter_mut().find(|(r, _)| r == reason) {
            Some((_, n)) => *n += 1,
            None => reasons.push((reason.to_string(), 1)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    fn merge(&mut self, other: &Digest) {
        for (kind, reasons) in &other.kinds {
            for (reason, n) in reasons {
                for _ in 0..*n {
                    self.add(kind, reason);
                }
            }
        }
    }

    /// The note: every kind with its count and its reasons (each with its count when it
    /// repeats), within the 1 kB Kubernetes allows an Event note; what does not fit is
    /// counted at the end.
    pub fn note(&self) -> String {
        const ROOM: usize = 960;
        let mut note = String::new();
        let mut left_out = 0;
        for (kind, reasons) in &self.kinds {
            let total: u32 = reasons.iter().map(|(_, n)| n).sum();
            let head = format!("{}{kind} ×{total}", if note.is_empty() { "" } else { "; " });
            if note.len() + head.len() > ROOM {
                left_out += reasons.len();
                continue;
            }
            note.push_str(&head);
            let mut first = true;
            for (reason, n) in reasons {
                let times = if *n > 1 {
                    format!(" ×{n}")
                } else {
                    String::new()
                };
                let part = format!("{}{reason}{times}", if first { ": " } else { ", " });
                if note.len() + part.len() > ROOM {
                    left_out += 1;
                    continue;
                }
                note.push_str(&part);
                first = false;
            }
        }
        if left_out > 0 {
            note.push_str(&format!(" (and {left_out} more reasons)"));
        }
        note
    }
}

/// One pool's gathered actions: the step they belong to and since when.
#[derive(Clone, Debug, PartialEq)]
pub struct Gathered {
    step: Step,
    since: DateTime<Utc>,
    digest: Digest,
}

/// An Event to post: (reason, action, note).
pub type StepEvent = (&'static str, String, String);

/// Add what a pass did in `step` to what the pool gathered, and return the Events to post
/// now (pure): the gathered step's when the pool left it, or gathered long enough; this
/// pass's at once when its step does not last.
pub fn record(
    gathered: &mut Option<Gathered>,
    step: Step,
    done: &Digest,
    now: DateTime<Utc>,
) -> Vec<StepEvent> {
    let mut out = Vec::new();
    let post = |g: Gathered, out: &mut Vec<StepEvent>| {
        if !g.digest.is_empty() {
            out.push((g.step.stage, g.step.action(), g.digest.note()));
        }
    };
    if let Some(g) = gathered.take() {
        if g.step != step || now - g.since >= FLUSH_AFTER {
            post(g, &mut out);
        } else {
            *gathered = Some(g);
        }
    }
    if !done.is_empty() {
        gathered
            .get_or_insert_with(|| Gathered {
                step: step.clone(),
                since: now,
                digest: Digest::default(),
            })
            .digest
            .merge(done);
    }
    if !step.lasts()
        && let Some(g) = gathered.take()
    {
        post(g, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(batch: u32, stage: &'static str) -> Step {
        Step {
            batch: Some(batch),
            stage,
            phase: Phase::Rotating,
        }
    }

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_790_000_000 + s, 0).unwrap()
    }

    /// Issue 25: a drain over many passes is one Event when the batch leaves it, with the
    /// count and the reasons; the surge and the termination one each.
    #[test]
    fn a_batch_posts_one_event_per_step_whatever_the_passes() {
        let mut g = None;
        let mut posted = Vec::new();
        let mut surge = Digest::default();
        surge.add("SetImage", "batch 1: new instances must boot v2");
        surge.add("SetCapacity", "batch 1: surge 1 new node(s) to replace n1");
        posted.extend(record(&mut g, step(1, "Surging"), &surge, at(0)));
        posted.extend(record(
            &mut g,
            step(1, "Surging"),
            &Digest::default(),
            at(10),
        ));
        posted.extend(record(
            &mut g,
            step(1, "WaitingReady"),
            &Digest::default(),
            at(20),
        ));
        assert_eq!(posted.len(), 1, "{posted:?}");
        for pass in 0..12 {
            let mut d = Digest::default();
            if pass == 0 {
                d.add(
                    "ScaleDownDisabled",
                    "batch 1: keep the autoscaler off new node n4",
                );
                d.add(
                    "Cordon",
                    "batch 1: its replacement is Ready and the gates pass",
                );
            }
            for _ in 0..3 {
                d.add("Evict", "batch 1: drain node n1");
            }
            posted.extend(record(&mut g, step(1, "Draining"), &d, at(40 + pass * 5)));
        }
        assert_eq!(posted.len(), 1, "a drain under way posts nothing yet");
        let mut t = Digest::default();
        t.add("Terminate", "batch 1: node n1 is drained");
        posted.extend(record(&mut g, step(1, "Terminating"), &t, at(120)));
        posted.extend(record(
            &mut g,
            step(1, "Soaking"),
            &Digest::default(),
            at(140),
        ));
        assert_eq!(posted.len(), 3, "{posted:?}");
        assert_eq!(posted[0].0, "Surging");
        assert_eq!(posted[0].1, "Batch1");
        assert_eq!(
            posted[1].2,
            "ScaleDownDisabled ×1: batch 1: keep the autoscaler off new node n4; Cordon ×1: batch 1: its replacement is Ready and the gates pass; Evict ×36: batch 1: drain node n1 ×36"
        );
        assert_eq!(posted[2].0, "Terminating");
        assert!(g.is_none());
    }

    #[test]
    fn a_long_step_posts_what_it_did_so_far_and_a_stop_posts_at_once() {
        let mut g = None;
        let mut d = Digest::default();
        d.add("Evict", "batch 2: drain node n3");
        assert!(record(&mut g, step(2, "Draining"), &d, at(0)).is_empty());
        let later = at(FLUSH_AFTER.num_seconds());
        let posted = record(&mut g, step(2, "Draining"), &d, later);
        assert_eq!(posted.len(), 1);
        assert_eq!(posted[0].2, "Evict ×1: batch 2: drain node n3");
        assert!(g.is_some(), "this pass's evictions wait for the next post");
        let paused = Step {
            phase: Phase::Paused,
            ..step(2, "Draining")
        };
        let posted = record(&mut g, paused, &d, later);
        assert_eq!(
            posted.len(),
            2,
            "the step changed, then the stop posts its own"
        );
        assert!(g.is_none());
        let done = Step {
            batch: None,
            stage: "Done",
            phase: Phase::Succeeded,
        };
        let mut u = Digest::default();
        u.add("Uncordon", "no batch owns the cordon");
        let posted = record(&mut g, done, &u, later);
        assert_eq!(
            posted,
            vec![(
                "Done",
                "Rotate".to_string(),
                "Uncordon ×1: no batch owns the cordon".to_string()
            )]
        );
    }

    #[test]
    fn a_note_stays_within_a_kilobyte_and_counts_what_it_leaves_out() {
        let mut d = Digest::default();
        for i in 0..200 {
            d.add("Evict", &format!("batch 1: drain node n{i}"));
        }
        let note = d.note();
        assert!(note.len() <= 1000, "{}", note.len());
        assert!(
            note.starts_with("Evict ×200: batch 1: drain node n0, "),
            "{note}"
        );
        assert!(note.ends_with(" more reasons)"), "{note}");
    }
}
