//! Fleet-wide series that no single agent can export: each agent knows its own cluster, only
//! the fleet view knows the waves. `rota ui` serves them on `/metrics` (Prometheus text
//! format) from the same view model as the page, for the dashboard's per-wave panel. Pure.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::model::FleetPage;

/// Every series name rendered here (tests check the dashboard only queries known names).
pub const NAMES: [&str; 5] = [
    "rota_wave_nodes",
    "rota_wave_nodes_on_target",
    "rota_wave_pools",
    "rota_ui_page_answers_total",
    "rota_ui_page_builds_total",
];

/// What the page server itself did: answers to the page and its live fragment, rendered or
/// `304 Not Modified` (an open tab with nothing new), and the builds of its model.
#[derive(Debug, Default)]
pub struct Served {
    pub rendered: std::sync::atomic::AtomicU64,
    pub not_modified: std::sync::atomic::AtomicU64,
    pub builds: std::sync::atomic::AtomicU64,
    /// Whole-fleet answers refused with `503` because `max_heavy` were under way.
    pub busy: std::sync::atomic::AtomicU64,
}

impl Served {
    /// Its series, in the text format.
    pub fn render(&self) -> String {
        use std::sync::atomic::Ordering::Relaxed;
        format!(
            "# HELP rota_ui_page_answers_total Answers to the fleet page and its live fragment, by whether anything was rendered.\n# TYPE rota_ui_page_answers_total counter\nrota_ui_page_answers_total{{answer=\"rendered\"}} {}\nrota_ui_page_answers_total{{answer=\"not_modified\"}} {}\n# HELP rota_ui_page_builds_total Builds of the page's model (a commit or notes change, or the clock).\n# TYPE rota_ui_page_builds_total counter\nrota_ui_page_builds_total {}\n# HELP rota_ui_whole_fleet_busy_total Answers holding the whole fleet refused with 503 while the most allowed at once were under way.\n# TYPE rota_ui_whole_fleet_busy_total counter\nrota_ui_whole_fleet_busy_total {}\n",
            self.rendered.load(Relaxed),
            self.not_modified.load(Relaxed),
            self.builds.load(Relaxed),
            self.busy.load(Relaxed),
        )
    }
}

fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The Prometheus text exposition of `page`.
pub fn render(page: &FleetPage) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# HELP rota_wave_nodes Nodes in the wave's pools, as their agents last reported (rota ui).\n# TYPE rota_wave_nodes gauge"
    );
    for (i, w) in page.waves.iter().enumerate() {
        let _ = writeln!(
            out,
            "rota_wave_nodes{{wave=\"{}\",order=\"{}\"}} {}",
            label(&w.name),
            i + 1,
            w.total
        );
    }
    let _ = writeln!(
        out,
        "# HELP rota_wave_nodes_on_target Nodes of the wave on their pool's desired image (rota ui).\n# TYPE rota_wave_nodes_on_target gauge"
    );
    for (i, w) in page.waves.iter().enumerate() {
        let _ = writeln!(
            out,
            "rota_wave_nodes_on_target{{wave=\"{}\",order=\"{}\"}} {}",
            label(&w.name),
            i + 1,
            w.on_target
        );
    }
    let _ = writeln!(
        out,
        "# HELP rota_wave_pools Pools of the wave by phase (rota ui).\n# TYPE rota_wave_pools gauge"
    );
    for (i, w) in page.waves.iter().enumerate() {
        let mut by_phase: BTreeMap<&str, u32> = BTreeMap::new();
        for p in w.clusters.iter().flat_map(|c| &c.pools) {
            *by_phase.entry(p.phase.label()).or_default() += 1;
        }
        for (phase, n) in by_phase {
            let _ = writeln!(
                out,
                "rota_wave_pools{{wave=\"{}\",order=\"{}\",phase=\"{}\"}} {n}",
                label(&w.name),
                i + 1,
                label(phase)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::model::{ClusterPanel, Phase, PoolPanel, WavePanel};

    #[test]
    fn waves_are_exported_in_order_with_their_counts() {
        let pool = |phase| PoolPanel {
            cluster: "c1".into(),
            name: "general".into(),
            channel: "general".into(),
            target: "2".into(),
            in_force: None,
            phase,
            state: "pending".into(),
            description: String::new(),
            batch: None,
            nodes: None,
            hold: None,
            since: None,
            stop: None,
        };
        let page = FleetPage {
            fleet: "acme".into(),
            commit: "abc".into(),
            now: chrono::Utc::now(),
            waves: vec![WavePanel {
                name: "can\"ary".into(),
                soak: "1h".into(),
                pins: Default::default(),
                clusters: vec![ClusterPanel {
                    name: "c1".into(),
                    labels: Default::default(),
                    state: "pending".into(),
                    description: String::new(),
                    pools: vec![
                        pool(Phase::Rotating),
                        pool(Phase::Rotating),
                        pool(Phase::Held),
                    ],
                }],
                on_target: 14,
                total: 40,
            }],
            channels: Vec::new(),
            overdue: Vec::new(),
            unjudged: Vec::new(),
            max_age_channels: Default::default(),
            declared: Default::default(),
        };
        let text = render(&page);
        assert!(
            text.contains(r#"rota_wave_nodes{wave="can\"ary",order="1"} 40"#),
            "{text}"
        );
        assert!(text.contains(r#"rota_wave_nodes_on_target{wave="can\"ary",order="1"} 14"#));
        assert!(text.contains(r#"rota_wave_pools{wave="can\"ary",order="1",phase="rotating"} 2"#));
        assert!(text.contains(r#"rota_wave_pools{wave="can\"ary",order="1",phase="held"} 1"#));
        let served = Served::default();
        served
            .not_modified
            .fetch_add(3, std::sync::atomic::Ordering::Relaxed);
        let text = text + &served.render();
        assert!(text.contains(r#"rota_ui_page_answers_total{answer="not_modified"} 3"#));
        for name in NAMES {
            assert!(
                text.contains(&format!("# TYPE {name} gauge"))
                    || text.contains(&format!("# TYPE {name} counter")),
                "{name}"
            );
        }
    }
}
