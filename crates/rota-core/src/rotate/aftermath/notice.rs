//! What a rollout is worth telling people in chat (rollout started, batch failed, paused,
//! completed), decided from two statuses of a pool; `rota::notify` coalesces and posts them.

use crate::fleet::model::NoticeKindName;

/// Something worth telling people about one pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub cluster: String,
    pub pool: String,
    pub kind: NoticeKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoticeKind {
    RolloutStarted { version: String },
    BatchFailed { batch: u32, reason: String },
    Paused { reason: String },
    Completed { version: String },
}

impl NoticeKind {
    pub fn name(&self) -> NoticeKindName {
        match self {
            NoticeKind::RolloutStarted { .. } => NoticeKindName::RolloutStarted,
            NoticeKind::BatchFailed { .. } => NoticeKindName::BatchFailed,
            NoticeKind::Paused { .. } => NoticeKindName::Paused,
            NoticeKind::Completed { .. } => NoticeKindName::Completed,
        }
    }
}

/// What a status change of one pool is worth telling (pure): [`super::of`] calls this with
/// the status before and after each reconcile that writes it.
/// - rollout started: the pool enters `Rotating` from anything but a rotation or a pause;
/// - batch failed: it enters `Failed` or `RollingBack` (a gate or a timeout failed a batch);
/// - paused: it enters `Paused` (halted by rota, or asked for in git);
/// - completed: it enters `Succeeded` from a rotation (not a pool that was already there).
pub fn notices_for(
    spec: &crate::rotate::resource::NodePoolRotationSpec,
    before: Option<&crate::rotate::resource::NodePoolRotationStatus>,
    after: &crate::rotate::resource::NodePoolRotationStatus,
) -> Vec<Notice> {
    use crate::rotate::phase::Phase;
    let was = before.map(|b| b.phase).unwrap_or_default();
    let now = after.phase;
    if was == now {
        return Vec::new();
    }
    let rotating = |p: Phase| matches!(p, Phase::Rotating | Phase::Soaking | Phase::RollingBack);
    let batch = after
        .checkpoint
        .as_ref()
        .and_then(|c| c.stage.batch())
        .or_else(|| {
            before
                .and_then(|b| b.checkpoint.as_ref())
                .and_then(|c| c.stage.batch())
        })
        .map(|b| b.number)
        .unwrap_or(0);
    let kind = match now {
        Phase::Rotating if !rotating(was) && was != Phase::Paused => NoticeKind::RolloutStarted {
            version: spec.version.clone(),
        },
        Phase::Failed | Phase::RollingBack if was != Phase::Failed => NoticeKind::BatchFailed {
            batch,
            reason: after.message.clone(),
        },
        Phase::Paused => NoticeKind::Paused {
            reason: after.message.clone(),
        },
        Phase::Succeeded if rotating(was) => NoticeKind::Completed {
            version: spec.version.clone(),
        },
        _ => return Vec::new(),
    };
    vec![Notice {
        cluster: spec.cluster.clone(),
        pool: spec.pool.clone(),
        kind,
    }]
}
