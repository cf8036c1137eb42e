//! The demo's managed pool: prod-use1/system, an EKS managed node group the demo adds to the
//! example fleet before the agents start. Wave early's promotion, (b), moves it to general
//! 2026.11.2 like the other pools, but through EKS's own update (`UpdateNodegroupVersion`
//! with the new AMI), which the simulated EKS rolls; rota never writes its launch template.
//! The story says so in one line, from the simulated EKS's own record of its updates.

use rota_core::cloud::GroupRef;

use super::story::{Story, blocking};

/// The managed pool, `cluster/pool`.
pub const CLUSTER: &str = "prod-use1";
pub const POOL: &str = "system";

impl Story<'_> {
    /// Every update EKS made of prod-use1/system, `image status` each, oldest first, and the
    /// story's line about them.
    pub(super) async fn managed_updates(&mut self) -> Result<Vec<String>, String> {
        let origin = self.repo.origin.clone();
        let fleet = blocking(move || {
            crate::source::read::load_git(&origin, "refs/heads/main").map_err(|d| d.to_string())
        })
        .await?;
        let clusters = fleet.resolve_all().map_err(|e| e.to_string())?;
        let group = clusters
            .iter()
            .filter(|c| c.name == CLUSTER)
            .flat_map(|c| &c.pools)
            .find(|p| p.name == POOL)
            .map(|p| p.group.clone())
            .ok_or_else(|| format!("demo: no pool {CLUSTER}/{POOL} in the fleet"))?;
        let GroupRef::Managed(group) = group else {
            return Err(format!(
                "demo: {CLUSTER}/{POOL} is not a managed pool: {group:?}"
            ));
        };
        let updates: Vec<String> = self
            .fleet
            .sim
            .cloud
            .eks_updates(&group)
            .iter()
            .map(|u| format!("{} {:?}", u.image, u.status))
            .collect();
        self.note(&format!(
            "{CLUSTER}/{POOL} is an EKS managed node group: rota rotated it through EKS's own update (UpdateNodegroupVersion: {}), never its launch template",
            if updates.is_empty() {
                "none".to_string()
            } else {
                updates.join(", ")
            }
        ));
        Ok(updates)
    }
}
