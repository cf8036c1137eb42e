//! The pass's observation, in one step: the pool as the pass plans from it and the plan made
//! from it ([`Controller::observe_and_plan`]). The index and the group's describe (the kept
//! one where it may be reused, `describe`), a managed pool's owner (`owner_pools`) and
//! Karpenter's objects (`drift`), the leadership term, then what the pass knows besides
//! ([`Controller::look_further`]: the image check, the control plane's version, the owner's
//! refusal remembered); the plan (`rotate::plan`, pure) with an operator's request as one
//! more input. `reconcile_pool` hands off here once and gets the observation and the plan
//! back.
//!
//! Why a pass may plan twice: a plan made from the kept describe stands only if it calls
//! the cloud for nothing and keeps the checkpoint (`own_writes::may_stand_on_kept_describe`),
//! which only the plan says: whether a soak ends, a gate fails, a drain finishes or a window
//! closes on this pass is the planner's to decide from the whole observation, so no rule on
//! the kept describe and the last pass's writes alone can tell beforehand. The first plan is
//! pure and costs no call; only a pass whose plan would act describes again.

use kube::ResourceExt;
use tokio::time::Instant;

use super::pool_state::ImageChecked;
use super::state::Controller;
use super::{drift, owner_pools};
use crate::kube::crd::NodePoolRotation;
use crate::kube::observe::{ObserveError, observe};
use rota_core::rotate::aftermath::own_writes;
use rota_core::rotate::operator::{OperatorError, Request};
use rota_core::rotate::{GateVerdict, Stage, plan};

/// Whether the next plan of this pool could surge onto the desired image: no rotation on it
/// under way, and not settled on it; only a reconciling pool surges. The image and the
/// control plane's version are checked only then (`image_hold`, `control_plane`).
fn surge_may_follow(
    npr: &NodePoolRotation,
    desired: &rota_core::fleet::resolved::DesiredPool,
    observed: &rota_core::rotate::Observed,
) -> bool {
    let checkpoint = npr.status.as_ref().and_then(|s| s.checkpoint.as_ref());
    let on_it =
        checkpoint.is_some_and(|c| c.stage != Stage::Done && c.target_image == desired.image);
    let settled = checkpoint
        .is_some_and(|c| c.stage == Stage::Done && c.target_image == desired.image)
        && observed.group.template_image == desired.image;
    // A managed pool is its owner's to surge and its image the owner's to check: nothing asks
    // a self-managed cloud about it.
    !(on_it
        || settled
        || desired.mode != rota_core::fleet::resolved::Mode::Reconcile
        || desired.group.managed().is_some())
}

/// A pool observed and planned: what was observed, the plan, what an operator's request
/// steered.
type Looked = (
    rota_core::rotate::Observed,
    rota_core::rotate::Plan,
    Option<String>,
);

/// How long an image the cloud could not launch is held before it is asked about again.
pub(super) const IMAGE_RECHECK: std::time::Duration = std::time::Duration::from_secs(15);

impl Controller {
    /// The pool observed and planned: from its kept describe where that may be reused (see
    /// `Described`; the plan made from it stands only if it calls the cloud for nothing and
    /// keeps the checkpoint), else described and planned again. Returns what the operator's
    /// request steered too.
    pub(super) async fn observe_and_plan(
        &mut self,
        npr: &NodePoolRotation,
        desired: &rota_core::fleet::resolved::DesiredPool,
        verdict: GateVerdict,
        start_hold: Option<String>,
        request: Option<&Result<Request, OperatorError>>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Looked, ObserveError> {
        let previous = npr.status.as_ref().and_then(|s| s.checkpoint.as_ref());
        if let Some(mut observed) = self.reusable(npr, desired, &verdict, &start_hold, now) {
            self.look_further(npr, desired, &mut observed).await;
            let (plan, steered) = self.plan(npr, desired, &observed, request, now);
            if own_writes::may_stand_on_kept_describe(&plan, previous) {
                return Ok((observed, plan, steered));
            }
        }
        self.forget_describe(npr);
        let mut observed = self
            .observe(desired, previous, verdict, start_hold, now)
            .await?;
        self.look_further(npr, desired, &mut observed).await;
        let (plan, steered) = self.plan(npr, desired, &observed, request, now);
        self.remember_describe(npr, &observed, &plan, now);
        Ok((observed, plan, steered))
    }

    /// What the pass knows of the pool besides the index and the group: whether its image can
    /// launch, the control plane's version (both asked only when a surge could follow), and
    /// the owner's refusal of its last request (this controller's memory of it, else the one
    /// the status kept across a restart), which the planner and the composer both read.
    async fn look_further(
        &mut self,
        npr: &NodePoolRotation,
        desired: &rota_core::fleet::resolved::DesiredPool,
        observed: &mut rota_core::rotate::Observed,
    ) {
        observed.image_hold = self.image_hold(npr, desired, observed).await;
        observed.control_plane = self.control_plane(npr, desired, observed).await;
        let memory = self
            .pools
            .get(&npr.name_any())
            .and_then(|s| s.refused.as_ref());
        let kept = npr.status.as_ref().and_then(|s| s.refused.as_ref());
        observed.refused = memory.or(kept).cloned();
    }

    /// Whether the desired image can launch in the pool's group, asked of the cloud only when
    /// the next plan could surge it (no rotation on it yet) and remembered: a usable image is
    /// not asked about again, an unusable one every [`IMAGE_RECHECK`] until it appears. A
    /// check that fails (the call, not the image) holds too, naming the error: an image
    /// nobody could check is not launched.
    async fn image_hold(
        &mut self,
        npr: &NodePoolRotation,
        desired: &rota_core::fleet::resolved::DesiredPool,
        observed: &rota_core::rotate::Observed,
    ) -> Option<(String, String)> {
        if !surge_may_follow(npr, desired, observed) {
            return None;
        }
        let state = self.pools.get_mut(&npr.name_any()).expect("prepared");
        if let Some(c) = &state.image_check
            && c.image == desired.image
            && (c.hold.is_none() || c.at.elapsed() < IMAGE_RECHECK)
        {
            return c.hold.clone();
        }
        let hold = match self
            .groups
            .check_image(&desired.group, &desired.image, desired.arch)
            .await
        {
            Ok(rota_core::cloud::ImageCheck::Usable) => None,
            Ok(rota_core::cloud::ImageCheck::Unusable { reason, message }) => {
                Some((reason, message))
            }
            Err(e) => Some((
                "ImageUnavailable".to_string(),
                format!("could not check image {}: {e}", desired.image),
            )),
        };
        if let Some((reason, message)) = &hold {
            tracing::warn!(pool = %npr.name_any(), image = %desired.image, %reason, "{message}");
        }
        let state = self.pools.get_mut(&npr.name_any()).expect("prepared");
        state.image_check = Some(ImageChecked {
            image: desired.image.clone(),
            at: Instant::now(),
            hold: hold.clone(),
        });
        hold
    }

    /// The control plane's version, read (see [`skew`]) only when the next plan could surge
    /// onto a version that declares its kubelet; `None` otherwise.
    async fn control_plane(
        &mut self,
        npr: &NodePoolRotation,
        desired: &rota_core::fleet::resolved::DesiredPool,
        observed: &rota_core::rotate::Observed,
    ) -> Option<Result<rota_core::fleet::kubernetes::KubeMinor, String>> {
        if desired.kubelet.is_none() || !surge_may_follow(npr, desired, observed) {
            return None;
        }
        Some(self.control_plane.read(&self.client).await)
    }

    /// The pool as observed now (the index and the cloud group), with the leadership term it
    /// is acted on under.
    async fn observe(
        &mut self,
        desired: &rota_core::fleet::resolved::DesiredPool,
        checkpoint: Option<&rota_core::rotate::Checkpoint>,
        verdict: GateVerdict,
        start_hold: Option<String>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<rota_core::rotate::Observed, ObserveError> {
        let mut observed = observe(
            &self.index,
            self.groups.as_ref(),
            desired,
            verdict,
            start_hold,
        )
        .await?;
        observed.describe_lag = self.config.describe_lag;
        observed.cluster_autoscaler = self.config.cluster_autoscaler;
        // A managed pool whose owner this controller drives: the owner's state, described
        // on every pass (the planner decides from it; nothing is reused across passes).
        if let Some(o) = self.owners.of(&desired.group) {
            owner_pools::observe(&mut observed, &self.index, desired, o, checkpoint).await?;
        }
        drift::observe(Some(self.drift.as_ref()), desired, &mut observed).await?;
        // A new term (this replica took over, or won the lease back) restarts the waits that
        // are measured from times another replica may have written on its own clock.
        match (&self.leadership.fence(), &self.term) {
            (Some(f), Some((t, _))) if f == t => {}
            (Some(f), _) => self.term = Some((f.clone(), now)),
            (None, _) => self.term = None,
        }
        observed.leading_since = self.term.as_ref().map(|(_, at)| *at);
        Ok(observed)
    }

    /// The plan (pure), with an operator's request (`rota ctl`, an annotation) as one more
    /// input; returns what the request steered, if anything.
    fn plan(
        &self,
        npr: &NodePoolRotation,
        desired: &rota_core::fleet::resolved::DesiredPool,
        observed: &rota_core::rotate::Observed,
        request: Option<&Result<Request, OperatorError>>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> (rota_core::rotate::Plan, Option<String>) {
        let checkpoint = npr.status.as_ref().and_then(|s| s.checkpoint.as_ref());
        match request {
            Some(Ok(r)) => {
                rota_core::rotate::plan_with(desired, observed, checkpoint, Some(r), now)
            }
            _ => (plan(desired, observed, checkpoint, now), None),
        }
    }
}
