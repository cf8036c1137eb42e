//! What a change to the fleet repo does to the agents: for every pool whose image changes
//! between two revisions, from which version to which, grouped by the wave of its cluster; every
//! other change an agent acts on (a pool's effective rollout policy, gates, mode, group or node
//! selector; pools and clusters added or removed; a cluster moving to another wave) and the
//! fleet-wide settings (the promotion guard, the waves and their soaks). This is the summary a
//! reviewer wants on a pull request (`rota diff --from main --to HEAD`).
//!
//! Settings are compared on the resolved pools, so a change at any level (fleet, cluster,
//! pool) shows on every pool it reaches, with the path of what changed in the pool's
//! effective settings (`rollout.batch: 10% -> 2`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::resolved::DesiredPool;
use super::valid::Fleet;

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
    /// Same image; other settings change (see [`PoolChange::settings`]).
    Settings,
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

/// One setting that changes: its path in the pool's effective settings (or the fleet's) and
/// both values as text (`unset` when absent).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SettingChange {
    pub field: String,
    pub from: String,
    pub to: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PoolChange {
    pub cluster: String,
    pub pool: String,
    /// What happens to the pool's image; `settings` when only its settings change.
    pub kind: ChangeKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<ImageRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<ImageRef>,
    /// Other settings of the pool that change (a pool in both revisions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<SettingChange>,
}

impl PoolChange {
    /// Whether the pool's image (or its existence) changes.
    pub fn changes_image(&self) -> bool {
        self.kind != ChangeKind::Settings
    }
}

/// A cluster that joins this wave from another one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Move {
    pub cluster: String,
    /// The wave it was in.
    pub from: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WaveChanges {
    pub wave: String,
    /// Position in the waves of the `to` revision (of `from` for a removed wave).
    pub index: usize,
    pub changes: Vec<PoolChange>,
    /// Clusters that move into this wave.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moved: Vec<Move>,
}

/// Every change between two revisions that agents act on, waves in rollout order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FleetDiff {
    pub waves: Vec<WaveChanges>,
    /// Fleet-wide settings: `promotion.guard`, `waves` (their order), `waves.NAME.soak`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fleet: Vec<SettingChange>,
}

impl FleetDiff {
    /// Nothing an agent acts on changes.
    pub fn is_empty(&self) -> bool {
        self.fleet.is_empty()
            && self
                .waves
                .iter()
                .all(|w| w.changes.is_empty() && w.moved.is_empty())
    }

    /// Pools whose image changes (or that are added or removed).
    pub fn change_count(&self) -> usize {
        self.waves
            .iter()
            .flat_map(|w| &w.changes)
            .filter(|c| c.changes_image())
            .count()
    }

    /// Pools whose other settings change.
    pub fn settings_count(&self) -> usize {
        self.waves
            .iter()
            .flat_map(|w| &w.changes)
            .filter(|c| !c.settings.is_empty())
            .count()
    }

    fn moved_count(&self) -> usize {
        self.waves.iter().map(|w| w.moved.len()).sum()
    }

    /// `5 pools change image`, then a line per other kind of change.
    fn summary(&self) -> Vec<String> {
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let n = self.change_count();
        let mut out = vec![if n == 0 {
            "no pool changes image".to_string()
        } else {
            plural(n, "pool changes image", "pools change image")
        }];
        let s = self.settings_count();
        if s > 0 {
            out.push(plural(s, "pool changes settings", "pools change settings"));
        }
        let m = self.moved_count();
        if m > 0 {
            out.push(plural(m, "cluster changes wave", "clusters change wave"));
        }
        if !self.fleet.is_empty() {
            out.push(plural(
                self.fleet.len(),
                "fleet setting changes",
                "fleet settings change",
            ));
        }
        out
    }

    /// One line per change under a heading per wave.
    pub fn render_human(&self) -> String {
        if self.is_empty() {
            return "no pool changes image\n".to_string();
        }
        let mut out = String::new();
        for w in self
            .waves
            .iter()
            .filter(|w| !w.changes.is_empty() || !w.moved.is_empty())
        {
            let _ = writeln!(out, "wave {}: {}", w.index + 1, w.wave);
            for m in &w.moved {
                let _ = writeln!(out, "  {}: joins this wave (was in {})", m.cluster, m.from);
            }
            for c in w.changes.iter().filter(|c| !c.settings.is_empty()) {
                let _ = writeln!(
                    out,
                    "  {}/{}: {}",
                    c.cluster,
                    c.pool,
                    settings_text(&c.settings)
                );
            }
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
        if !self.fleet.is_empty() {
            let _ = writeln!(out, "fleet: {}", settings_text(&self.fleet));
        }
        for line in self.summary() {
            let _ = writeln!(out, "{line}");
        }
        out
    }
}

/// `rollout.batch: 10% -> 2, mode: reconcile -> readOnly`.
fn settings_text(settings: &[SettingChange]) -> String {
    settings
        .iter()
        .map(|s| format!("{}: {} -> {}", s.field, s.from, s.to))
        .collect::<Vec<_>>()
        .join(", ")
}

impl FleetDiff {
    /// A Markdown table per wave, for a pull request comment or a CI job summary.
    pub fn render_markdown(&self) -> String {
        if self.is_empty() {
            return "No pool changes image.\n".to_string();
        }
        let mut out = String::new();
        let _ = writeln!(out, "### rota: {}\n", self.summary().join(", "));
        for w in self
            .waves
            .iter()
            .filter(|w| !w.changes.is_empty() || !w.moved.is_empty())
        {
            let _ = writeln!(out, "#### Wave {}: {}\n", w.index + 1, w.wave);
            for m in &w.moved {
                let _ = writeln!(out, "- `{}` joins this wave (was in {})", m.cluster, m.from);
            }
            if !w.moved.is_empty() {
                out.push('\n');
            }
            if w.changes.is_empty() {
                continue;
            }
            let _ = writeln!(out, "| pool | change | from | to |");
            let _ = writeln!(out, "|---|---|---|---|");
            for c in &w.changes {
                if c.kind == ChangeKind::Settings {
                    for st in &c.settings {
                        let _ = writeln!(
                            out,
                            "| {}/{} | `{}` | {} | {} |",
                            c.cluster, c.pool, st.field, st.from, st.to
                        );
                    }
                    continue;
                }
                let side = |r: &Option<ImageRef>| {
                    r.as_ref()
                        .map(|r| format!("{}@{} (`{}`)", r.channel, r.version, r.image))
                        .unwrap_or_else(|| "–".to_string())
                };
                let kind = match c.kind {
                    ChangeKind::Changed => "changed",
                    ChangeKind::Added => "added",
                    ChangeKind::Removed => "removed",
                    ChangeKind::Settings => "settings",
                };
                let _ = writeln!(
                    out,
                    "| {}/{} | {kind} | {} | {} |",
                    c.cluster,
                    c.pool,
                    side(&c.from),
                    side(&c.to)
                );
                for st in &c.settings {
                    let _ = writeln!(
                        out,
                        "| {}/{} | `{}` | {} | {} |",
                        c.cluster, c.pool, st.field, st.from, st.to
                    );
                }
            }
            out.push('\n');
        }
        if !self.fleet.is_empty() {
            let _ = writeln!(out, "#### Fleet\n");
            let _ = writeln!(out, "| setting | from | to |");
            let _ = writeln!(out, "|---|---|---|");
            for st in &self.fleet {
                let _ = writeln!(out, "| `{}` | {} | {} |", st.field, st.from, st.to);
            }
            out.push('\n');
        }
        out
    }
}

/// Compare the resolved pools of two fleets. Clusters that cannot be resolved are skipped
/// (a loaded [`Fleet`] always resolves).
pub fn diff(from: &Fleet, to: &Fleet) -> FleetDiff {
    // (wave index, wave name) → changes and clusters moving in; the `to` side decides the
    // wave of a cluster.
    type Entry = (Vec<PoolChange>, Vec<Move>);
    let mut by_wave: BTreeMap<(usize, String), Entry> = BTreeMap::new();
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
        let desired = |c: Option<&super::resolved::DesiredCluster>, pool: &str| {
            c.and_then(|c| c.pools.iter().find(|p| p.name == pool).cloned())
        };
        let pool_names: std::collections::BTreeSet<&String> = op.keys().chain(np.keys()).collect();
        for pool in pool_names {
            let (f, t) = (op.get(pool).cloned(), np.get(pool).cloned());
            let settings = match (desired(o, pool), desired(n, pool)) {
                (Some(a), Some(b)) => pool_settings(&a, &b),
                _ => Vec::new(),
            };
            let kind = match (&f, &t) {
                (Some(a), Some(b)) if a == b && settings.is_empty() => continue,
                (Some(a), Some(b)) if a == b => ChangeKind::Settings,
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
                settings,
            });
        }
        let entry = by_wave.entry(wave.clone()).or_default();
        entry.0.extend(changes);
        if let (Some(o), Some(_)) = (o, n)
            && o.wave != wave.1
        {
            entry.1.push(Move {
                cluster: name.clone(),
                from: o.wave.clone(),
            });
        }
    }
    FleetDiff {
        waves: by_wave
            .into_iter()
            .map(|((index, wave), (changes, moved))| WaveChanges {
                wave,
                index,
                changes,
                moved,
            })
            .collect(),
        fleet: fleet_settings(from, to),
    }
}

/// What changes in a pool's settings other than its image: the effective rollout policy
/// (`rollout.*`), its gates (added, removed, or a definition changed), mode, group and node
/// selector.
fn pool_settings(a: &DesiredPool, b: &DesiredPool) -> Vec<SettingChange> {
    let mut out = Vec::new();
    // Who owns the pool and how it is replaced, named first: a pool moving from its ASG to
    // an EKS managed node group (or from `service` to `blueGreen`) changes everything rota
    // does to it. Both are the same for two self-managed pools and then not shown.
    for (field, from, to) in [
        ("owner", a.owner().to_string(), b.owner().to_string()),
        (
            "strategy",
            a.strategy().to_string(),
            b.strategy().to_string(),
        ),
    ] {
        if from != to {
            out.push(SettingChange {
                field: field.into(),
                from,
                to,
            });
        }
    }
    // The image itself shows as the pool's image change; what shows here is a change of the
    // form the owner takes (a GKE pool from GKE's node image to a custom one).
    let form = |p: &DesiredPool| {
        p.owner_image
            .as_ref()
            .map(|o| o.form().to_string())
            .unwrap_or_else(|| "unset".into())
    };
    if form(a) != form(b) {
        out.push(SettingChange {
            field: "ownerImage".into(),
            from: form(a),
            to: form(b),
        });
    }
    leaf_diff("rollout", &json(&a.policy), &json(&b.policy), &mut out);
    leaf_diff("mode", &json(&a.mode), &json(&b.mode), &mut out);
    leaf_diff("group", &json(&a.group), &json(&b.group), &mut out);
    leaf_diff(
        "nodeSelector",
        &json(&a.node_selector),
        &json(&b.node_selector),
        &mut out,
    );
    let names = |p: &DesiredPool| p.gates.iter().map(|g| g.name.clone()).collect::<Vec<_>>();
    if names(a) != names(b) {
        out.push(SettingChange {
            field: "gates".into(),
            from: list(&names(a)),
            to: list(&names(b)),
        });
    }
    for g in &b.gates {
        if let Some(old) = a.gates.iter().find(|o| o.name == g.name)
            && old != g
        {
            leaf_diff(&format!("gate.{}", g.name), &json(old), &json(g), &mut out);
        }
    }
    out
}

/// The fleet-wide settings agents act on: the promotion guard, the waves' order and soaks.
fn fleet_settings(from: &Fleet, to: &Fleet) -> Vec<SettingChange> {
    let mut out = Vec::new();
    let (ga, gb) = (from.promotion_guard(), to.promotion_guard());
    if ga != gb {
        out.push(SettingChange {
            field: "promotion.guard".into(),
            from: ga.to_string(),
            to: gb.to_string(),
        });
    }
    let names = |f: &Fleet| f.waves().iter().map(|w| w.name.clone()).collect::<Vec<_>>();
    if names(from) != names(to) {
        out.push(SettingChange {
            field: "waves".into(),
            from: list(&names(from)),
            to: list(&names(to)),
        });
    }
    for w in to.waves() {
        if let Some(old) = from.waves().iter().find(|o| o.name == w.name)
            && old.soak != w.soak
        {
            let show = |s: &Option<super::duration::GoDuration>| {
                s.map(|d| d.to_string()).unwrap_or_else(|| "unset".into())
            };
            out.push(SettingChange {
                field: format!("waves.{}.soak", w.name),
                from: show(&old.soak),
                to: show(&w.soak),
            });
        }
    }
    out
}

fn list(items: &[String]) -> String {
    format!("[{}]", items.join(", "))
}

/// Every leaf that differs between `a` and `b` (objects are walked, anything else compared
/// whole), as `prefix.path: from -> to`.
fn leaf_diff(
    prefix: &str,
    a: &serde_json::Value,
    b: &serde_json::Value,
    out: &mut Vec<SettingChange>,
) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let null = Value::Null;
                leaf_diff(
                    &format!("{prefix}.{k}"),
                    x.get(k).unwrap_or(&null),
                    y.get(k).unwrap_or(&null),
                    out,
                );
            }
        }
        _ if a != b => out.push(SettingChange {
            field: prefix.to_string(),
            from: show(a),
            to: show(b),
        }),
        _ => {}
    }
}

fn show(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "unset".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A resolved value as JSON, for [`leaf_diff`] (they are all plain data).
fn json<T: Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}
