//! The control plane's live version, read from the API server's `/version` before the first
//! surge of a rotation onto a version that declares its kubelet (`rotate::skew` decides
//! whether the pool waits). One read serves every pool of the cluster for [`FRESH`]: a
//! control plane upgrade shows within that, and a rotation that waits on one costs one
//! request a minute, not one per pool per pass.

use rota_core::fleet::kubernetes::KubeMinor;
use tokio::time::Instant;

/// How long one read of `/version` answers for the whole cluster.
pub const FRESH: std::time::Duration = std::time::Duration::from_secs(60);

/// The last read, shared by the pools of one controller.
#[derive(Default)]
pub struct ControlPlane {
    last: Option<(Instant, Result<KubeMinor, String>)>,
}

impl ControlPlane {
    /// The control plane's minor, or why it could not be read (a failed call holds the
    /// pool like a violation: a kubelet nobody could check is not surged).
    pub async fn read(&mut self, client: &kube::Client) -> Result<KubeMinor, String> {
        if let Some((at, v)) = &self.last
            && at.elapsed() < FRESH
        {
            return v.clone();
        }
        let v = match client.apiserver_version().await {
            Ok(info) => KubeMinor::of_version_info(&info.major, &info.minor).ok_or_else(|| {
                format!(
                    "/version answered major {:?} minor {:?} ({})",
                    crate::sanitize::line(&info.major),
                    crate::sanitize::line(&info.minor),
                    crate::sanitize::line(&info.git_version)
                )
            }),
            Err(e) => Err(format!("GET /version: {e}")),
        };
        if let Err(why) = &v {
            tracing::warn!("control plane version unknown: {why}");
        }
        self.last = Some((Instant::now(), v.clone()));
        v
    }
}
