//! The version-skew hold: no rotation starts onto (or switches to) a version whose kubelet
//! the cluster's live control plane would refuse under the Kubernetes version-skew policy
//! (`fleet::kubernetes`). The edge reads the API server's `/version` before the first surge
//! of a rotation (`Observed::control_plane`); this decides, purely, whether the pool waits
//! and says why, naming both versions.
//!
//! Nothing is checkpointed: the hold is decided again from the desired pool and the live
//! version on every pass, so a crash and resume holds the same way, and an upgraded control
//! plane (or a commit pinning another version) lets the rotation start at the next pass.

use crate::fleet::kubernetes::{KubeMinor, accepted_range, skew};
use crate::fleet::resolved::DesiredPool;

/// Why `desired` may not be surged on a control plane of `control_plane` (as the edge read
/// it: a minor, or why it could not), or `None` when it may. A version that declares no
/// kubelet minor is not checked: rota cannot know what it carries.
pub fn hold(
    desired: &DesiredPool,
    control_plane: Option<&Result<KubeMinor, String>>,
) -> Option<String> {
    let declared = desired.kubelet.as_deref()?;
    let what = format!("{}@{}", desired.channel, desired.version);
    let Some(kubelet) = KubeMinor::parse(declared) else {
        return Some(format!(
            "{what} declares kubernetes `{declared}`, which is not a major.minor; nothing is surged until a commit fixes it"
        ));
    };
    match control_plane {
        // The edge did not look (it looks only when a surge may follow): nothing to hold.
        None => None,
        Some(Err(why)) => Some(format!(
            "{what} carries kubelet {kubelet}; the control plane's version could not be read ({why}); nothing is surged until it can be checked"
        )),
        Some(Ok(cp)) => skew(kubelet, *cp).map(|s| {
            format!(
                "{what} carries kubelet {kubelet}, {} the control plane {cp} (the API server's /version): the version-skew policy allows {}; nothing is surged",
                s.describe(),
                accepted_range(*cp)
            )
        }),
    }
}
