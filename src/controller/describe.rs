//! The group's last describe, kept between passes and reused where no decision can depend
//! on anything newer the cloud knows ([`Described`]): taken, brought up to rota's own
//! writes (`rota_core::rotate::aftermath::own_writes`), dropped.

use kube::ResourceExt;

use super::pool_state::Described;
use super::state::Controller;
use crate::kube::crd::NodePoolRotation;
use rota_core::rotate::aftermath::own_writes;
use rota_core::rotate::{GateVerdict, Phase, Stage};

/// How long a rotating pool reuses a describe at most (controller time): the bound on how
/// late a change only the cloud shows (a launch that failed, an instance the cloud took
/// back) is noticed mid-rotation, well within the minutes of `nodeReadyTimeout` and drain
/// timeouts that such changes are judged by.
pub const DESCRIBE_REUSE: std::time::Duration = std::time::Duration::from_secs(60);

/// The provider IDs of the pool's nodes, selected and departed, sorted.
fn node_ids(observed: &rota_core::rotate::Observed) -> Vec<String> {
    let mut ids: Vec<String> = observed
        .nodes
        .iter()
        .chain(&observed.departed)
        .map(|n| n.provider_id.clone())
        .collect();
    ids.sort();
    ids
}

/// Whether everything the group holds shows in the cluster too: as many instances as it
/// wants, each running with its node registered (`nodes`: the pool's provider IDs). Only
/// then is every change to it seen without the cloud (a node joins or leaves); an instance
/// booting, terminating or never registered, or a launch not made yet, changes only in the
/// cloud's describe, so a pool waiting on one describes on every pass.
fn settled(group: &rota_core::cloud::GroupState, nodes: &[String]) -> bool {
    group.instances.len() == group.desired as usize
        && group.instances.iter().all(|i| {
            i.lifecycle == rota_core::cloud::Lifecycle::InService
                && nodes.binary_search(&i.provider_id).is_ok()
        })
}

/// How long a pool waiting on a batch's instances reuses a describe at most (controller
/// time; `--describe-lag` when that is longer): see [`waits_on_the_cluster`].
pub const WAIT_REUSE: std::time::Duration = std::time::Duration::from_secs(15);

/// Whether the pool waits on something whose end the cluster shows as soon as the cloud
/// does: a surge's instances, whose nodes register with their provider IDs (Surging,
/// WaitingReady, a pipelined next batch doing either while the current one soaks); old
/// instances terminating, whose nodes go away (Terminating). Such a pool reuses a describe
/// of an unsettled group for [`WAIT_REUSE`] at most: a node joining or leaving the pool
/// drops it at once (`Described::nodes`), and so does anything the plan would decide
/// (a stage, a capacity, a termination: the plan made from the kept describe stands only if
/// it calls the cloud for nothing and keeps the checkpoint). What only the cloud shows (a
/// launch that failed for a stock-out, an instance taken back, an instance gone before its
/// node) is seen at most [`WAIT_REUSE`] late, as a cloud whose describes lag that long
/// would show it (issue 25: these waits described on every pass, every 5-10 s).
fn waits_on_the_cluster(checkpoint: Option<&rota_core::rotate::Checkpoint>) -> bool {
    let Some(cp) = checkpoint else {
        return false;
    };
    let boots = |s: &Stage| matches!(s, Stage::Surging { .. } | Stage::WaitingReady { .. });
    boots(&cp.stage)
        || matches!(cp.stage, Stage::Terminating { .. })
        || (matches!(cp.stage, Stage::Soaking { .. }) && cp.next.as_deref().is_some_and(boots))
}

impl Controller {
    /// The pool observed with its last describe, when that may be reused now: taken under
    /// the same spec and leadership term, younger than [`DESCRIBE_REUSE`] (an idle pool's:
    /// `--idle-describe-interval`), and the pool's nodes are the ones it was taken with.
    /// `None`: describe again.
    pub(super) fn reusable(
        &mut self,
        npr: &NodePoolRotation,
        desired: &rota_core::fleet::resolved::DesiredPool,
        verdict: &GateVerdict,
        start_hold: &Option<String>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Option<rota_core::rotate::Observed> {
        // A managed pool is planned from its owner's state (or Karpenter's objects), which a
        // kept describe of the (empty) group does not hold: observed on every pass.
        if desired.group.managed().is_some() {
            return None;
        }
        let fence = self.leadership.fence();
        let state = self.pools.get(&npr.name_any())?;
        let d = state.described.as_ref()?;
        let checkpoint = npr.status.as_ref().and_then(|s| s.checkpoint.as_ref());
        let ttl = if !settled(&d.group, &d.nodes) {
            if !waits_on_the_cluster(checkpoint) {
                return None;
            }
            WAIT_REUSE.max(self.config.describe_lag)
        } else if d.idle {
            self.config.idle_describe_interval
        } else {
            DESCRIBE_REUSE
        };
        let age = (now - d.at).to_std().ok()?;
        if age >= ttl || d.generation != npr.metadata.generation || d.fence != fence {
            return None;
        }
        let mut observed = crate::kube::observe::observe_with(
            &self.index,
            d.group.clone(),
            desired,
            verdict.clone(),
            start_hold.clone(),
        )
        .ok()?;
        if node_ids(&observed) != d.nodes {
            return None;
        }
        observed.describe_lag = self.config.describe_lag;
        observed.cluster_autoscaler = self.config.cluster_autoscaler;
        observed.leading_since = self.term.as_ref().map(|(_, at)| *at);
        Some(observed)
    }

    /// Remember the describe `observed` holds, with what it was taken under.
    pub(super) fn remember_describe(
        &mut self,
        npr: &NodePoolRotation,
        observed: &rota_core::rotate::Observed,
        plan: &rota_core::rotate::Plan,
        now: chrono::DateTime<chrono::Utc>,
    ) {
        let desired_image = &npr.spec.image;
        let idle = plan.actions.is_empty()
            && plan.status.phase == Phase::Succeeded
            && plan
                .checkpoint
                .as_ref()
                .is_none_or(|c| c.stage == Stage::Done && c.target_image == *desired_image)
            && observed.group.template_image == *desired_image;
        let fence = self.leadership.fence();
        if let Some(state) = self.pools.get_mut(&npr.name_any()) {
            state.described = Some(Described {
                group: observed.group.clone(),
                at: now,
                generation: npr.metadata.generation,
                fence,
                nodes: node_ids(observed),
                idle,
            });
        }
    }

    /// Bring the pool's kept describe up to rota's own writes, all of which succeeded (see
    /// [`own_writes`]); drop it where their outcome is the cloud's to choose. Its time stays
    /// that of the describe: what the cloud did on its own since is no less late for it.
    pub(super) fn note_own_writes(
        &mut self,
        npr: &NodePoolRotation,
        actions: &[rota_core::rotate::Planned],
    ) {
        if let Some(state) = self.pools.get_mut(&npr.name_any()) {
            state.described = state.described.take().and_then(|mut d| {
                d.group = own_writes::applied(&d.group, actions)?;
                Some(d)
            });
        }
    }

    /// Drop the pool's last describe: rota changed its group (or may have), or a pass could
    /// not use it.
    pub(super) fn forget_describe(&mut self, npr: &NodePoolRotation) {
        if let Some(state) = self.pools.get_mut(&npr.name_any()) {
            state.described = None;
        }
    }
}
