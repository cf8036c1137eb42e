//! Every stop says who must do what: the reasons the planner gives a pool's status, and for
//! each reason that stops the pool, its [`StopNote`]: the cause, the objects that hold it
//! (pods, PodDisruptionBudgets, a window, a gate, sibling pools), who moves it on (rota by
//! itself, or a person) and the one command, commit or moment that does.
//!
//! The planner emits only [`Reason`]s, so every reason it can give is in [`Reason::ALL`] and
//! the tests hold every one of them to this contract. The note is composed here, purely, from
//! the reason and what the planner knew when it stopped ([`Context`]); the NodePoolRotation's
//! status carries it, and the Event, the commit status and the fleet page all render it.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::checkpoint::{Checkpoint, Stage};
use crate::sanitize;

/// Why a pool's status says what it says. CamelCase and stable: conditions, Events and
/// metrics carry it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    // Nothing to do.
    NotManaged,
    UpToDate,
    Done,
    // Moving: a stage of a batch or of the pool.
    Surging,
    WaitingReady,
    Cordoning,
    Draining,
    DrainForced,
    Terminating,
    BatchSoak,
    PoolSoak,
    Abandoning,
    Cleanup,
    /// `strategy: replace`: a batch's old instances are removed and the group is bringing
    /// up their replacements (or a batch waits for the group to be whole again first).
    Refilling,
    /// A managed pool's owner is replacing its nodes (its own update, started by rota or
    /// someone else).
    OwnerUpdating,
    // Waits rota ends by itself.
    OutsideWindow,
    Blackout,
    SurgeBudget,
    MaxParallelPools,
    DescribeLag,
    ReplacingNotReady,
    SurgeShort,
    GatePending,
    ImageNotReady,
    ImageNotReplicated,
    NoCandidates,
    // Stops a person ends.
    VersionSkew,
    /// A fleet stop (`rota stop`) holds the pool: its commit on the stop ref says who and why.
    Stopped,
    PausedByOperator,
    PausedByPolicy,
    Halted,
    GateFailed,
    DrainTimeout,
    BatchFailed,
    DoNotDisrupt,
    RolledBack,
    InvalidWindow,
    ImageNotFound,
    ImageDeprecated,
    ImageWrongArch,
    ImageUnavailable,
    /// The owner's update of a managed pool failed (its own errors are in the message).
    OwnerUpdateFailed,
    /// The owner refused rota's request for a managed pool (a node image AKS does not offer,
    /// a node version or image type GKE refuses): sent again it would be refused again, so
    /// it is not.
    OwnerRefused,
    /// A pool a managed service owns (EKS, Karpenter, GKE, AKS), which this agent does not
    /// drive yet: nothing is written behind the owner.
    ManagedPoolNotSupported,
    PlannerLoop,
}

/// Who moves a stopped pool on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum MovedBy {
    /// rota, by itself: a wait that ends (a window opens, a budget frees, a replacement
    /// boots). Nobody needs to act; the note says when or on what.
    Rota,
    /// A person: a command or a commit, which the note names.
    Person,
}

impl Reason {
    /// Every reason, in declaration order.
    pub const ALL: &'static [Reason] = &[
        Reason::NotManaged,
        Reason::UpToDate,
        Reason::Done,
        Reason::Surging,
        Reason::WaitingReady,
        Reason::Cordoning,
        Reason::Draining,
        Reason::DrainForced,
        Reason::Terminating,
        Reason::BatchSoak,
        Reason::PoolSoak,
        Reason::Abandoning,
        Reason::Cleanup,
        Reason::Refilling,
        Reason::OwnerUpdating,
        Reason::OutsideWindow,
        Reason::Blackout,
        Reason::SurgeBudget,
        Reason::MaxParallelPools,
        Reason::DescribeLag,
        Reason::ReplacingNotReady,
        Reason::SurgeShort,
        Reason::GatePending,
        Reason::ImageNotReady,
        Reason::ImageNotReplicated,
        Reason::NoCandidates,
        Reason::VersionSkew,
        Reason::Stopped,
        Reason::PausedByOperator,
        Reason::PausedByPolicy,
        Reason::Halted,
        Reason::GateFailed,
        Reason::DrainTimeout,
        Reason::BatchFailed,
        Reason::DoNotDisrupt,
        Reason::RolledBack,
        Reason::InvalidWindow,
        Reason::ImageNotFound,
        Reason::ImageDeprecated,
        Reason::ImageWrongArch,
        Reason::ImageUnavailable,
        Reason::OwnerUpdateFailed,
        Reason::OwnerRefused,
        Reason::ManagedPoolNotSupported,
        Reason::PlannerLoop,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NotManaged => "NotManaged",
            Reason::UpToDate => "UpToDate",
            Reason::Done => "Done",
            Reason::Surging => "Surging",
            Reason::WaitingReady => "WaitingReady",
            Reason::Cordoning => "Cordoning",
            Reason::Draining => "Draining",
            Reason::DrainForced => "DrainForced",
            Reason::Terminating => "Terminating",
            Reason::BatchSoak => "BatchSoak",
            Reason::PoolSoak => "PoolSoak",
            Reason::Abandoning => "Abandoning",
            Reason::Cleanup => "Cleanup",
            Reason::Refilling => "Refilling",
            Reason::OutsideWindow => "OutsideWindow",
            Reason::Blackout => "Blackout",
            Reason::SurgeBudget => "SurgeBudget",
            Reason::MaxParallelPools => "MaxParallelPools",
            Reason::DescribeLag => "DescribeLag",
            Reason::ReplacingNotReady => "ReplacingNotReady",
            Reason::SurgeShort => "SurgeShort",
            Reason::GatePending => "GatePending",
            Reason::ImageNotReady => "ImageNotReady",
            Reason::ImageNotReplicated => "ImageNotReplicated",
            Reason::NoCandidates => "NoCandidates",
            Reason::VersionSkew => "VersionSkew",
            Reason::Stopped => "Stopped",
            Reason::PausedByOperator => "PausedByOperator",
            Reason::PausedByPolicy => "PausedByPolicy",
            Reason::Halted => "Halted",
            Reason::GateFailed => "GateFailed",
            Reason::DrainTimeout => "DrainTimeout",
            Reason::BatchFailed => "BatchFailed",
            Reason::DoNotDisrupt => "DoNotDisrupt",
            Reason::RolledBack => "RolledBack",
            Reason::InvalidWindow => "InvalidWindow",
            Reason::ImageNotFound => "ImageNotFound",
            Reason::ImageDeprecated => "ImageDeprecated",
            Reason::ImageWrongArch => "ImageWrongArch",
            Reason::ImageUnavailable => "ImageUnavailable",
            Reason::OwnerUpdating => "OwnerUpdating",
            Reason::OwnerUpdateFailed => "OwnerUpdateFailed",
            Reason::OwnerRefused => "OwnerRefused",
            Reason::ManagedPoolNotSupported => "ManagedPoolNotSupported",
            Reason::PlannerLoop => "PlannerLoop",
        }
    }

    /// The reason of an image hold, from the edge's word (`NodeGroups::check_image`).
    pub fn of_image_hold(word: &str) -> Reason {
        match word {
            "ImageNotFound" => Reason::ImageNotFound,
            "ImageNotReady" => Reason::ImageNotReady,
            "ImageDeprecated" => Reason::ImageDeprecated,
            "ImageWrongArch" => Reason::ImageWrongArch,
            "ImageNotReplicated" => Reason::ImageNotReplicated,
            _ => Reason::ImageUnavailable,
        }
    }

    /// The reason a status names, if rota gives it.
    pub fn parse(s: &str) -> Option<Reason> {
        Reason::ALL.iter().copied().find(|r| r.as_str() == s)
    }

    /// Whether a pool with this reason is moving (or has nothing to do): no stop to explain.
    /// `Draining` stops when a budget or a pod holds the drain (see [`explain`]).
    pub fn moving(self) -> bool {
        matches!(
            self,
            Reason::NotManaged
                | Reason::UpToDate
                | Reason::Done
                | Reason::Surging
                | Reason::WaitingReady
                | Reason::Cordoning
                | Reason::Draining
                | Reason::DrainForced
                | Reason::Terminating
                | Reason::BatchSoak
                | Reason::PoolSoak
                | Reason::Abandoning
                | Reason::Cleanup
                | Reason::Refilling
                | Reason::OwnerUpdating
        )
    }

    /// Whether a pool whose rotation is under way but stopped for this reason keeps its
    /// `maxParallelPools` slot. It does, except when what stops it is its own: a pod that
    /// cannot be evicted or may not be disrupted, a PodDisruptionBudget, nodes that match no
    /// instance. Such a stop says nothing about the image or the cluster, and siblings
    /// waiting behind it for a person would wait for nothing. A stop that may say the image
    /// is bad (a gate failed, a batch's nodes never Ready, a rollback) or that a person
    /// asked for (a pause) keeps the others held, as do waits that end by themselves.
    pub fn holds_slot(self) -> bool {
        !matches!(
            self,
            Reason::DrainTimeout | Reason::DoNotDisrupt | Reason::NoCandidates
        )
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a pool stopped, what holds it, and what moves it on: the status's `stop`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StopNote {
    /// The status reason (`DrainTimeout`, `OutsideWindow`, ...).
    pub reason: String,
    /// Who moves the pool on: `rota` (by itself, the next step says when) or `person`.
    pub by: MovedBy,
    /// What stopped it, in one line.
    pub cause: String,
    /// What holds it: pods, PodDisruptionBudgets, windows, gates, sibling pools, instances.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_by: Vec<String>,
    /// The one command or commit that moves it on, or what it waits for and until when.
    pub next: String,
}

impl StopNote {
    /// The terminal views' line: `needs a person (Reason): next` or `waits (Reason): next`.
    pub fn headline(&self) -> String {
        let who = match self.by {
            MovedBy::Person => "needs a person",
            MovedBy::Rota => "waits",
        };
        format!("{who} ({}): {}", self.reason, self.next)
    }

    /// One line for an Event or a log: `cause; blocked by: a, b; next: ...`.
    pub fn line(&self) -> String {
        let mut s = self.cause.clone();
        if !self.blocked_by.is_empty() {
            s.push_str(&format!("; blocked by: {}", self.blocked_by.join(", ")));
        }
        s.push_str(&format!("; next: {}", self.next));
        s
    }

    /// The same note with every text made safe to show (notes from git are untrusted).
    pub fn sanitized(&self) -> StopNote {
        StopNote {
            reason: sanitize::line(&self.reason).into_owned(),
            by: self.by,
            cause: sanitize::line(&self.cause).into_owned(),
            blocked_by: self
                .blocked_by
                .iter()
                .map(|b| sanitize::line(b).into_owned())
                .collect(),
            next: sanitize::line(&self.next).into_owned(),
        }
    }
}

/// What the planner knew when it stopped, beyond the reason and its message.
#[derive(Clone, Debug, Default)]
pub struct Context<'a> {
    pub cluster: &'a str,
    pub pool: &'a str,
    /// The objects that hold the pool, as the planner named them.
    pub blocked_by: Vec<String>,
    /// When the wait ends by itself, if known (a window opens, a drain times out, a
    /// replacement is due).
    pub until: Option<DateTime<Utc>>,
    /// A halt's own words (the checkpoint's `halted`), when the pool is halted.
    pub halted: Option<&'a str>,
    /// A fleet stop: the command that lifts it (`rota stop --clear --wave main`, by someone
    /// at least as trusted as who stopped it).
    pub clear: Option<String>,
}

/// The note for a pool whose status says `reason` and `message`; `None` while it moves.
pub fn explain(reason: Reason, message: &str, ctx: &Context<'_>) -> Option<StopNote> {
    // A drain is moving unless something holds it.
    let held_drain = reason == Reason::Draining && !ctx.blocked_by.is_empty();
    if reason.moving() && !held_drain {
        return None;
    }
    let cause = ctx.halted.unwrap_or(message).to_string();
    let (by, next) = match rota_waits(reason, ctx) {
        Some(next) => (MovedBy::Rota, next),
        None => (MovedBy::Person, person_moves(reason, ctx, &cause)?),
    };
    Some(StopNote {
        reason: reason.as_str().into(),
        by,
        cause,
        blocked_by: super::listing::capped(&ctx.blocked_by),
        next,
    })
}

/// What rota waits for, for a stop it ends by itself (windows, budgets, boots, gates'
/// samples, a drain the budgets allow); `None`: a person moves it ([`person_moves`]).
fn rota_waits(reason: Reason, ctx: &Context<'_>) -> Option<String> {
    let when = |what: &str| match ctx.until {
        Some(t) => format!("{what} at {}", t.to_rfc3339()),
        None => what.to_string(),
    };
    Some(match reason {
        Reason::OutsideWindow => when(
            "nothing to do: the next batch starts when a maintenance window opens with room for it",
        ),
        Reason::Blackout => {
            when("nothing to do: the next batch starts when the blackout ends, inside a window")
        }
        Reason::SurgeBudget => {
            "nothing to do: the next batch starts when the group shrinks under its surge bound"
                .into()
        }
        Reason::MaxParallelPools => {
            "nothing to do: it starts when a pool holding a slot finishes (or is moved on)".into()
        }
        Reason::DescribeLag => {
            "nothing to do: rota waits until the cloud's describe shows its last change".into()
        }
        Reason::ReplacingNotReady | Reason::SurgeShort => when(
            "nothing to do: rota replaces the new instances not Ready (rollout.nodeReadyRetries)",
        ),
        Reason::GatePending => "nothing to do: rota goes on once the gate has its samples".into(),
        Reason::ImageNotReady | Reason::ImageNotReplicated => {
            "nothing to do: rota asks the cloud again until the image can launch here".into()
        }
        Reason::NoCandidates if ctx.blocked_by.is_empty() => {
            "nothing to do: rota goes on once the old instances have terminated".into()
        }
        Reason::Draining => when(
            "nothing to do: rota evicts as the PodDisruptionBudgets allow; drain.onTimeout applies",
        ),
        _ => return None,
    })
}

/// The one command or commit that moves on a stop a person must end; `None` for a reason
/// that is no stop. Every reason is named: a new one must say who moves it.
fn person_moves(reason: Reason, ctx: &Context<'_>, cause: &str) -> Option<String> {
    let (cluster, pool) = (ctx.cluster, ctx.pool);
    let retry = format!("rota ctl retry --cluster {cluster} --pool {pool}");
    Some(match reason {
        Reason::NoCandidates => format!(
            "a commit fixing pool {pool}'s nodeSelector or group, or remove the nodes that match no instance"
        ),
        Reason::DoNotDisrupt => "the pod's owner removes rota.dev/do-not-disrupt (or moves the pod); rota goes on by itself".into(),
        Reason::VersionSkew => "upgrade the control plane, or a commit pinning a version whose kubernetes it accepts".into(),
        Reason::Stopped => ctx.clear.clone().unwrap_or_else(|| "rota stop --clear".into()),
        Reason::PausedByOperator => format!("rota ctl resume --cluster {cluster} --pool {pool}"),
        Reason::PausedByPolicy => "a commit setting rollout.paused back to false".into(),
        Reason::Halted | Reason::GateFailed | Reason::DrainTimeout | Reason::BatchFailed
            if bad_image(cause) =>
        {
            format!(
                "a commit pinning a version that boots (rota propose opens the revert) or {retry}"
            )
        }
        Reason::Halted | Reason::GateFailed | Reason::DrainTimeout | Reason::BatchFailed => {
            format!("{retry}, once the cause is fixed")
        }
        Reason::RolledBack => "a commit pinning another version (the revert rota propose opens)".into(),
        Reason::InvalidWindow => "a commit fixing rollout.windows (rota validate names the line)".into(),
        Reason::ImageNotFound
        | Reason::ImageDeprecated
        | Reason::ImageWrongArch
        | Reason::ImageUnavailable => {
            "a commit pinning an image the cloud can launch here (rota images discover lists them)"
                .into()
        }
        Reason::OwnerUpdateFailed => "a commit pinning a version the owner's update can finish (its errors name the cause)".into(),
        Reason::OwnerRefused => "a commit pinning a version the owner offers (its refusal names what it takes)".into(),
        Reason::ManagedPoolNotSupported => "an agent that drives the pool's owner, or a commit giving the pool a self-managed group".into(),
        Reason::PlannerLoop => format!("a bug in rota: report it; {retry} tries again"),
        // What rota ends by itself ([`rota_waits`]).
        Reason::OutsideWindow
        | Reason::Blackout
        | Reason::SurgeBudget
        | Reason::MaxParallelPools
        | Reason::DescribeLag
        | Reason::ReplacingNotReady
        | Reason::SurgeShort
        | Reason::GatePending
        | Reason::ImageNotReady
        | Reason::ImageNotReplicated
        | Reason::Draining => return None,
        // No stop: the pool moves, or has nothing to do.
        Reason::NotManaged
        | Reason::UpToDate
        | Reason::Done
        | Reason::Surging
        | Reason::WaitingReady
        | Reason::Cordoning
        | Reason::DrainForced
        | Reason::Terminating
        | Reason::BatchSoak
        | Reason::PoolSoak
        | Reason::Abandoning
        | Reason::Cleanup
        | Reason::Refilling
        | Reason::OwnerUpdating => return None,
    })
}

/// What halted a halted pool (its status then says `Halted`): the drain's timeout when it
/// halted draining, a gate when a gate said so, else its batch failed (new nodes never
/// Ready, a surge the cloud did not fulfil).
pub fn halt_cause(cp: &Checkpoint) -> Reason {
    match (&cp.stage, cp.halted.as_deref()) {
        (_, None) => Reason::Halted,
        (Stage::Draining { .. }, _) => Reason::DrainTimeout,
        (_, Some(h)) if h.starts_with("health gate") => Reason::GateFailed,
        _ => Reason::BatchFailed,
    }
}

/// Whether a halt says the image is bad: its new nodes never became Ready on any attempt.
fn bad_image(cause: &str) -> bool {
    cause.contains("did not boot")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_round_trips_and_every_stop_says_who_and_what_next() {
        let ctx = Context {
            cluster: "prod",
            pool: "general",
            blocked_by: vec!["data/db-0".into()],
            until: None,
            halted: None,
            clear: None,
        };
        for r in Reason::ALL {
            assert_eq!(Reason::parse(r.as_str()), Some(*r));
            match explain(*r, "why", &ctx) {
                None => assert!(r.moving(), "{r} stops without a note"),
                Some(n) => {
                    assert_eq!(n.reason, r.as_str());
                    assert!(!n.cause.is_empty() && !n.next.is_empty(), "{r}: {n:?}");
                    if n.by == MovedBy::Person {
                        assert!(
                            n.next.contains("rota ctl")
                                || n.next.contains("rota stop --clear")
                                || n.next.contains("commit")
                                || n.next.contains("owner"),
                            "{r}: a person's step names a command or a commit: {}",
                            n.next
                        );
                    } else {
                        assert!(n.next.starts_with("nothing to do"), "{r}: {}", n.next);
                    }
                }
            }
        }
        assert_eq!(Reason::ALL.len(), 45);
    }

    #[test]
    fn a_bad_image_asks_for_a_commit_and_a_drain_for_a_retry() {
        let ctx = |halted| Context {
            cluster: "prod",
            pool: "general",
            halted: Some(halted),
            ..Default::default()
        };
        let n = explain(
            Reason::Halted,
            "x",
            &ctx("image ami-1 did not boot: 3 of 3 new nodes never Ready"),
        )
        .unwrap();
        assert!(
            n.next.starts_with("a commit pinning a version that boots"),
            "{}",
            n.next
        );
        for r in Reason::ALL {
            if let Some(n) = explain(*r, "x", &ctx("y")) {
                assert!(
                    n.next.chars().count() <= 110,
                    "{r}: a next step fits a commit status: {}",
                    n.next
                );
            }
        }
        let n = explain(Reason::Halted, "x", &ctx("batch 2: drain not done")).unwrap();
        assert_eq!(
            n.next,
            "rota ctl retry --cluster prod --pool general, once the cause is fixed"
        );
        assert_eq!(n.cause, "batch 2: drain not done");
    }

    #[test]
    fn a_drain_without_blockers_is_moving_and_with_one_says_until_when() {
        let mut ctx = Context {
            cluster: "c",
            pool: "p",
            ..Default::default()
        };
        assert_eq!(
            explain(Reason::Draining, "draining: a/b (evicting)", &ctx),
            None
        );
        ctx.blocked_by = vec!["PodDisruptionBudget a/pdb".into()];
        ctx.until = Some(
            DateTime::parse_from_rfc3339("2026-11-26T10:00:00Z")
                .unwrap()
                .with_timezone(&Utc),
        );
        let n = explain(Reason::Draining, "draining", &ctx).unwrap();
        assert_eq!(n.by, MovedBy::Rota);
        assert!(
            n.next.ends_with("at 2026-11-26T10:00:00+00:00"),
            "{}",
            n.next
        );
        assert_eq!(
            n.line(),
            "draining; blocked by: PodDisruptionBudget a/pdb; next: nothing to do: rota evicts as the PodDisruptionBudgets allow; drain.onTimeout applies at 2026-11-26T10:00:00+00:00"
        );
    }

    #[test]
    fn only_a_pools_own_stops_give_its_slot_up() {
        let free: Vec<_> = Reason::ALL.iter().filter(|r| !r.holds_slot()).collect();
        assert_eq!(
            free,
            [
                &Reason::NoCandidates,
                &Reason::DrainTimeout,
                &Reason::DoNotDisrupt
            ]
        );
    }
}
