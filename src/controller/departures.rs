//! What the controller drained and terminated, told to the image ledger as it happens.
//!
//! The ledger's recorder looks at the nodes every `--resync`; a batch can cordon, drain and
//! terminate a node between two looks (at the demo's speed a look covers ten fleet
//! minutes), and the node would read as `lost`. So `apply` notes each successful cordon,
//! terminate and surge withdrawal here, with the time and the rotation, and the recorder
//! takes them at its next pass ([`rota_core::ledger::diff_with`]). An uncordon (a batch
//! abandoned, its old nodes given back) takes the node's pending drain back.
//!
//! The journal is the process's memory, as the step Events are: a crash loses what the
//! recorder had not taken yet, and those leaves fall back to what the recorder sees (a
//! cordon it saw, or `lost`). A clean shutdown flushes the ledger before the controller
//! gives its Lease up (see `agent::wiring`).

use std::sync::{Arc, Mutex};

use rota_core::ledger::{Departure, Leave};
use rota_core::rotate::resource::NodePoolRotationSpec;
use rota_core::rotate::{Action, Checkpoint};

use super::clock::Clock;

/// At most this many leaves wait for the recorder (a recorder that never runs, say a replica
/// that lost its Lease, keeps the newest).
const CAP: usize = 10_000;

/// The leaves the recorder has not taken yet. Cheap to clone; clones share the journal.
#[derive(Clone)]
pub struct Departures {
    clock: Clock,
    pending: Arc<Mutex<Vec<Departure>>>,
}

impl Departures {
    pub fn new(clock: Clock) -> Self {
        Departures {
            clock,
            pending: Arc::default(),
        }
    }

    /// Notes `action`, carried out for `spec`'s pool under `checkpoint`, if it is a leave.
    pub fn record(&self, spec: &NodePoolRotationSpec, checkpoint: Option<&Checkpoint>, a: &Action) {
        let at = self.clock.now();
        let rotation = Some(rotation_name(spec, checkpoint));
        let mut pending = self.pending.lock().expect("departures lock");
        let mut push = |leave, node: Option<&String>, instance: Option<&String>, by: &str| {
            pending.push(Departure {
                leave,
                node: node.cloned(),
                instance: instance.cloned(),
                at,
                by: by.to_string(),
                rotation: rotation.clone(),
            })
        };
        match a {
            Action::Cordon { node, owner } => push(Leave::Drain, Some(node), None, owner),
            Action::Terminate { instance_id, node }
            | Action::TerminateForReplacement { instance_id, node } => {
                push(Leave::Terminate, node.as_ref(), Some(instance_id), "")
            }
            Action::WithdrawSurge { instances, .. } => {
                for i in instances {
                    push(Leave::Terminate, None, Some(i), "");
                }
            }
            Action::Uncordon { node } => pending
                .retain(|d| !(d.leave == Leave::Drain && d.node.as_deref() == Some(node.as_str()))),
            _ => {}
        }
        let over = pending.len().saturating_sub(CAP);
        pending.drain(..over);
    }

    /// Everything noted since the last call, oldest first.
    pub fn take(&self) -> Vec<Departure> {
        std::mem::take(&mut *self.pending.lock().expect("departures lock"))
    }
}

/// The name of the rotation a pool is in, as the ledger writes it: `general:general@2026.11.2`
/// (nodes join on, or are rotated toward, the desired version), `general:rollback to
/// general@2026.11.1` (a rollback to the desired version: a revert in git), `general:rollback
/// from general@2026.11.3` (a rollback away from the desired version, after its gate failed).
/// `checkpoint`: the rotation's, while one is under way.
pub fn rotation_name(spec: &NodePoolRotationSpec, checkpoint: Option<&Checkpoint>) -> String {
    let kind = match checkpoint.filter(|c| c.rolling_back) {
        Some(c) if c.target_image != spec.image => "rollback from ",
        Some(_) => "rollback to ",
        None => "",
    };
    format!("{}:{kind}{}@{}", spec.pool, spec.channel, spec.version)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> NodePoolRotationSpec {
        let mut v = serde_json::json!({
            "cluster": "c", "pool": "general", "channel": "general", "version": "2026.11.3",
            "image": "ami-3", "sourceCommit": "c0ffee",
            "group": {"aws": {"region": "us-east-1", "autoScalingGroup": "g"}},
        });
        v["policy"] = serde_json::to_value(rota_core::fleet::resolved::EffectivePolicy::default())
            .unwrap_or_default();
        serde_json::from_value(v).unwrap_or_else(|e| panic!("a spec: {e}"))
    }

    #[test]
    fn cordons_and_terminates_are_noted_and_an_uncordon_takes_the_drain_back() {
        let d = Departures::new(Clock::new(1.0));
        let s = spec();
        let cordon = |n: &str| Action::Cordon {
            node: n.into(),
            owner: "rota".into(),
        };
        d.record(&s, None, &cordon("n1"));
        d.record(&s, None, &cordon("n2"));
        d.record(&s, None, &Action::Uncordon { node: "n2".into() });
        d.record(
            &s,
            None,
            &Action::Terminate {
                instance_id: "i-1".into(),
                node: Some("n1".into()),
            },
        );
        d.record(
            &s,
            None,
            &Action::SetImage {
                image: "ami-3".into(),
            },
        );
        let got = d.take();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(
            (got[0].leave, got[0].node.as_deref(), got[0].by.as_str()),
            (Leave::Drain, Some("n1"), "rota")
        );
        assert_eq!(got[1].instance.as_deref(), Some("i-1"));
        assert_eq!(
            got[1].rotation.as_deref(),
            Some("general:general@2026.11.3")
        );
        assert!(d.take().is_empty(), "taken once");
    }
}
