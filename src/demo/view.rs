//! What the demo shows while the story plays: every cluster and pool with the status its
//! agent last reported on the commit in force. Pure: from the agents' snapshots to lines; the
//! story prints them (a table redrawn in place on a terminal, one line per change otherwise).

use std::collections::BTreeMap;

use crate::report::{CommitStatus, State};

/// One cluster as its agent last reported it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterView {
    pub name: String,
    pub wave: String,
    /// The commit in force (full id).
    pub in_force: Option<String>,
    /// Cluster status first, then one per pool (as the agent reports them).
    pub statuses: Vec<CommitStatus>,
}

pub fn icon(state: State) -> &'static str {
    match state {
        State::Success => "✓",
        State::Pending => "…",
        State::Failure => "✗",
        State::Error => "!",
    }
}

/// `1h05m`, `12m`, `0m`: simulated time since the story started.
pub fn elapsed(d: chrono::Duration) -> String {
    let m = d.num_minutes().max(0);
    if m >= 60 {
        format!("{}h{:02}m", m / 60, m % 60)
    } else {
        format!("{m}m")
    }
}

/// The table: one line per cluster (wave, commit in force, summary), one per pool under it.
pub fn table(clusters: &[ClusterView]) -> Vec<String> {
    let mut out = Vec::new();
    for c in clusters {
        let commit = c.in_force.as_deref().map_or("-------", |s| &s[..7]);
        let (state, text) = c
            .statuses
            .first()
            .map_or(("·", "no commit in force yet"), |s| {
                (icon(s.state), s.description.as_str())
            });
        out.push(format!(
            "{state} {:<12} {:<7} {commit}  {text}",
            c.name, c.wave
        ));
        for s in c.statuses.iter().skip(1) {
            let pool = s.context.rsplit('/').next().unwrap_or(&s.context);
            out.push(format!(
                "    {} {:<10} {}",
                icon(s.state),
                pool,
                s.description
            ));
        }
    }
    out
}

/// Every context's (state, description) and the commit it is on, to spot changes.
pub type Seen = BTreeMap<String, (String, State, String)>;

/// The lines for what changed since `seen` (and updates `seen`): `canary-use1/general
/// pending batch 1/3 · 0/3 nodes on general@2026.11.2 (a1b2c3d)`.
pub fn changes(clusters: &[ClusterView], seen: &mut Seen) -> Vec<String> {
    let mut out = Vec::new();
    for c in clusters {
        let commit = c.in_force.as_deref().map_or("-------", |s| &s[..7]);
        for s in &c.statuses {
            // A countdown (`1h36m left (until ...)`) changes every pass: not news.
            let key = match s.description.find(" left (until ") {
                Some(i) => s.description[..i]
                    .rfind(": ")
                    .map_or(s.description.as_str(), |j| &s.description[..j])
                    .to_string(),
                None => s.description.clone(),
            };
            let now = (commit.to_string(), s.state, key);
            if seen.get(&s.context) == Some(&now) {
                continue;
            }
            let name = s.context.trim_start_matches("rota/");
            out.push(format!(
                "{} {name:<24} {:<7} {} ({commit})",
                icon(s.state),
                s.state.as_str(),
                s.description
            ));
            seen.insert(s.context.clone(), now);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> Vec<ClusterView> {
        vec![ClusterView {
            name: "canary-use1".into(),
            wave: "canary".into(),
            in_force: Some("0123456789abcdef0123456789abcdef01234567".into()),
            statuses: vec![
                CommitStatus::new("rota/canary-use1", State::Pending, "0/1 pools"),
                CommitStatus::new(
                    "rota/canary-use1/general",
                    State::Pending,
                    "batch 1/3 · 0/3 nodes on general@2026.11.2",
                ),
            ],
        }]
    }

    #[test]
    fn the_table_has_a_line_per_cluster_and_pool() {
        let t = table(&view());
        assert_eq!(t.len(), 2);
        assert!(
            t[0].starts_with("… canary-use1  canary  0123456  0/1 pools"),
            "{t:?}"
        );
        assert_eq!(
            t[1],
            "    … general    batch 1/3 · 0/3 nodes on general@2026.11.2"
        );
    }

    #[test]
    fn only_changes_are_printed_again() {
        let mut seen = Seen::new();
        assert_eq!(changes(&view(), &mut seen).len(), 2);
        assert!(changes(&view(), &mut seen).is_empty());
        let mut v = view();
        v[0].statuses[1].description = "batch 2/3 · 1/3 nodes on general@2026.11.2".into();
        let c = changes(&v, &mut seen);
        assert_eq!(c.len(), 1);
        assert!(c[0].contains("canary-use1/general"), "{c:?}");
    }

    #[test]
    fn elapsed_time_reads_like_a_clock() {
        assert_eq!(elapsed(chrono::Duration::minutes(65)), "1h05m");
        assert_eq!(elapsed(chrono::Duration::seconds(59)), "0m");
    }
}
