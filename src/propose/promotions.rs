//! The pass's second step: each wave after the first promoted to what the wave before it
//! runs, when the promotion guard allows, on `rota/promote/<wave>`.

use super::{Pass, Say};
use crate::promotion::commit::propose;
use crate::promotion::{checks_at, describe};

impl Pass<'_> {
    /// The promotions the guard allows, one proposal per wave; every wave's checks are said.
    /// One read of the fleet and the agents' records answers for every wave.
    pub(super) async fn promotions(&self, say: Say<'_>, failures: &mut Vec<String>) {
        let all = match checks_at(&self.query(), self.now).await {
            Ok(all) => all,
            Err(e) => return failures.push(format!("promotions: {e}")),
        };
        for wave in self.fleet.waves().iter().skip(1) {
            let checks: Vec<_> = all
                .iter()
                .filter(|c| c.wave == wave.name)
                .cloned()
                .collect();
            if checks.is_empty() {
                say(format!(
                    "wave {}: nothing to promote: it pins what the wave before it runs",
                    wave.name
                ));
                continue;
            }
            for c in &checks {
                say(describe(c));
            }
            if !checks.iter().all(|c| c.decision.is_allowed()) {
                continue;
            }
            match propose(&self.at(), &wave.name, &checks, &self.to).await {
                Ok(line) => say(format!("wave {}: {line}", wave.name)),
                Err(e) => failures.push(format!("wave {}: {e}", wave.name)),
            }
        }
    }
}
