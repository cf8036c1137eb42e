//! What a change to the fleet repo does to machine images: for every pool whose image changes
//! between two revisions, from which version to which, grouped by the wave of its cluster. This
//! is the summary a reviewer wants on a pull request (`rota diff --from main --to HEAD`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::Fleet;
use super::resolved::DesiredPool;

/// How a pool's image changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ChangeKind {
    /// Same pool, another image.
    Changed,
    /// The pool (or its cluster) appears.
    Added,
    /// The pool (or its cluster) disappears: rota stops managing it (nodes stay).
    Removed,
}

/// The image side of a pool at one revision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ImageRef {
    pub channel: String,
    pub version: String,
    pub image: String,
}

impl From<&DesiredPool> for ImageRef {
    fn from(p: &DesiredPool) -> Self {
        ImageRef {
            channel: p.channel.clone(),
            version: p.version.clone(),
            image: p.image.clone(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PoolChange {
    pub cluster: String,
    pub pool: String,
    pub kind: ChangeKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<ImageRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<ImageRef>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WaveChanges {
    pub wave: String,
    /// Position in the waves of the `to` revision (of `from` for a removed wave).
    pub index: usize,
    pub changes: Vec<PoolChange>,
}

/// Every image change between two revisions, waves in rollout order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FleetDiff {
    pub waves: Vec<WaveChanges>,
}

impl FleetDiff {
    pub fn is_empty(&self) -> bool {
        self.waves.iter().all(|w| w.changes.is_empty())
    }

    pub fn change_count(&self) -> usize {
        self.waves.iter().map(|w| w.changes.len()).sum()
    }

    /// One line per change under a heading per wave.
    pub fn render_human(&self) -> String {
        if self.is_empty() {
            return "no pool changes image\n".to_string();
        }
        let mut out = String::new();
        for w in self.waves.iter().filter(|w| !w.changes.is_empty()) {
            let _ = writeln!(out, "wave {}: {}", w.index + 1, w.wave);
            for c in &w.changes {
                let name = format!("{}/{}", c.cluster, c.pool);
                let _ = match (&c.kind, &c.from, &c.to) {
                    (ChangeKind::Changed, Some(f), Some(t)) if f.channel == t.channel => writeln!(
                        out,
                        "  {name}: {} {} -> {} ({} -> {})",
                        t.channel, f.version, t.version, f.image, t.image
                    ),
                    (ChangeKind::Changed, Some(f), Some(t)) => writeln!(
                        out,
                        "  {name}: {}@{} -> {}@{} ({} -> {})",
                        f.channel, f.version, t.channel, t.version, f.image, t.image
                    ),
                    (_, None, Some(t)) => writeln!(
                        out,
                        "  {name}: added on {}@{} ({})",
                        t.channel, t.version, t.image
                    ),
                    (_, Some(f), None) => writeln!(
                        out,
                        "  {name}: removed (was {}@{}; rota stops managing it, nodes stay)",
                        f.channel, f.version
                    ),
                    _ => Ok(()),
                };
            }
        }
        let n = self.change_count();
        let _ = writeln!(
            out,
            "{n} pool{} change image",
            if n == 1 { "" } else { "s" }
        );
        out
    }
}

impl FleetDiff {
    /// A Markdown table per wave, for a pull request comment or a CI job summary.
    pub fn render_markdown(&self) -> String {
        if self.is_empty() {
            return "No pool changes image.\n".to_string();
        }
        let mut out = String::new();
        let n = self.change_count();
        let _ = writeln!(
            out,
            "### rota: {n} pool{} change image\n",
            if n == 1 { "" } else { "s" }
        );
        for w in self.waves.iter().filter(|w| !w.changes.is_empty()) {
            let _ = writeln!(out, "#### Wave {}: {}\n", w.index + 1, w.wave);
            let _ = writeln!(out, "| pool | change | from | to |");
            let _ = writeln!(out, "|---|---|---|---|");
            for c in &w.changes {
                let side = |r: &Option<ImageRef>| {
                    r.as_ref()
                        .map(|r| format!("{}@{} (`{}`)", r.channel, r.version, r.image))
                        .unwrap_or_else(|| "–".to_string())
                };
                let kind = match c.kind {
                    ChangeKind::Changed => "changed",
                    ChangeKind::Added => "added",
                    ChangeKind::Removed => "removed",
                };
                let _ = writeln!(
                    out,
                    "| {}/{} | {kind} | {} | {} |",
                    c.cluster,
                    c.pool,
                    side(&c.from),
                    side(&c.to)
                );
            }
            out.push('\n');
        }
        out
    }
}

/// Compare the resolved pools of two fleets. Clusters that cannot be resolved are skipped
/// (a loaded [`Fleet`] always resolves).
pub fn diff(from: &Fleet, to: &Fleet) -> FleetDiff {
    // (wave index, wave name) → changes; the `to` side decides the wave of a cluster.
    let mut by_wave: BTreeMap<(usize, String), Vec<PoolChange>> = BTreeMap::new();
    for (i, w) in to.waves().iter().enumerate() {
        by_wave.entry((i, w.name.clone())).or_default();
    }
    let resolve = |f: &Fleet| -> BTreeMap<String, super::resolved::DesiredCluster> {
        f.clusters
            .keys()
            .filter_map(|n| f.resolve_cluster(n).ok().map(|c| (n.clone(), c)))
            .collect()
    };
    let (old, new) = (resolve(from), resolve(to));
    let names: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for name in names {
        let (o, n) = (old.get(name), new.get(name));
        let wave = n
            .or(o)
            .map(|c| (c.wave_index, c.wave.clone()))
            .expect("in one side");
        let mut changes = Vec::new();
        let pools = |c: Option<&super::resolved::DesiredCluster>| -> BTreeMap<String, ImageRef> {
            c.map(|c| c.pools.iter().map(|p| (p.name.clone(), p.into())).collect())
                .unwrap_or_default()
        };
        let (op, np) = (pools(o), pools(n));
        let pool_names: std::collections::BTreeSet<&String> = op.keys().chain(np.keys()).collect();
        for pool in pool_names {
            let (f, t) = (op.get(pool).cloned(), np.get(pool).cloned());
            let kind = match (&f, &t) {
                (Some(a), Some(b)) if a == b => continue,
                (Some(_), Some(_)) => ChangeKind::Changed,
                (None, _) => ChangeKind::Added,
                (_, None) => ChangeKind::Removed,
            };
            changes.push(PoolChange {
                cluster: name.clone(),
                pool: pool.clone(),
                kind,
                from: f,
                to: t,
            });
        }
        by_wave.entry(wave).or_default().extend(changes);
    }
    FleetDiff {
        waves: by_wave
            .into_iter()
            .map(|((index, wave), changes)| WaveChanges {
                wave,
                index,
                changes,
            })
            .collect(),
    }
}
