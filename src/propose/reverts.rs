//! The pass's third step: a wave whose pools failed a gate or could not boot the version it
//! pins, pinned back to the version before, on `rota/revert/<wave>/<channel>-<version>`.

use rota_core::waves::RevertDecision;

use super::{Pass, Say};
use crate::promotion::revert;

impl Pass<'_> {
    /// The reverts the agents' records call for, one proposal per wave and channel; every
    /// check is said.
    pub(super) async fn reverts(&self, say: Say<'_>, failures: &mut Vec<String>) {
        let checks = match revert::checks_at(&self.query()).await {
            Ok(checks) => checks,
            Err(e) => return failures.push(format!("reverts: {e}")),
        };
        for c in &checks {
            say(c.describe());
            let RevertDecision::Revert(r) = &c.decision else {
                continue;
            };
            match revert::propose(&self.at(), r, &self.to).await {
                Ok(line) => say(format!("revert wave {} {}: {line}", r.wave, r.channel)),
                Err(e) => failures.push(format!("revert wave {} {}: {e}", r.wave, r.channel)),
            }
        }
    }
}
