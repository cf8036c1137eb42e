//! What the fleet page shows, as data: waves in order with their clusters and pools (target,
//! version in force, progress, phase, what holds a held pool), a version timeline per channel
//! and the statuses of one commit. Pure: a function of the fleet at one commit, the agents'
//! note documents and the clock; the terminal views (`rota status --fleet`, `rota where`) and
//! the web page (`rota ui`) both render it, so they cannot disagree.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::agent::progress::WINDOW_WAIT;
use crate::report::note_doc::{NoteDoc, NoteStatus};
use crate::report::{cluster_context, pool_context};
use rota_core::fleet::Fleet;
use rota_core::fleet::model::Wave;
use rota_core::fleet::resolved::{DesiredCluster, DesiredPool};
use rota_core::rotate::stop::StopNote;
use rota_core::waves::{GuardDecision, PoolRecord, Promotion, Wait, promotion_guard};
use rota_core::waves::{WaveView, wave_views};

/// Everything the view is computed from.
pub struct Inputs<'a> {
    pub fleet: &'a Fleet,
    /// `fleet` resolved (every cluster's desired state).
    pub clusters: &'a [DesiredCluster],
    /// The agents' note documents on the fleet's commit (their statuses).
    pub docs: &'a [NoteDoc],
    /// The newest records of each pool (completions, gate failures), which may come from
    /// older commits when the agents have not acted on this one yet.
    pub records: &'a [PoolRecord],
    pub now: DateTime<Utc>,
    /// The records are signature-checked (`--agent-signers`): a pool counts as done only
    /// when a verified record shows it completed its target, never on its (unsigned) status
    /// alone.
    pub verified: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetPage {
    pub fleet: String,
    pub commit: String,
    pub now: DateTime<Utc>,
    pub waves: Vec<WavePanel>,
    pub channels: Vec<ChannelTimeline>,
    /// Pools whose image in force was released longer ago than their channel's `maxAge`,
    /// the oldest first (what the page and `rota status --fleet --overdue` lead with).
    pub overdue: Vec<OverduePool>,
    /// Pools of a channel with a `maxAge` that `overdue` could not judge: no report of the
    /// version in force yet, or a version the repo gives no `released` date (`rota status
    /// --fleet --overdue` names them rather than calling the fleet on time).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unjudged: Vec<UnjudgedPool>,
    /// The channels that set a `maxAge` (what `--overdue` judges pools against).
    #[serde(skip)]
    pub max_age_channels: BTreeSet<String>,
    /// Every channel the repo declares and its versions: a version or channel asked for
    /// that is not here is an error, never an empty answer.
    #[serde(skip)]
    pub declared: BTreeMap<String, Vec<String>>,
}

impl FleetPage {
    /// Whether `other` holds what this page holds but for the moment it was built (`now`).
    /// Every decision the clock makes is data of the page (a soak under way, a hold that
    /// ended, the overdue pools, an agent gone silent in the summary), so two such pages
    /// render the same but for the "as of" stamp and the first text of the countdowns, which
    /// the page's script keeps current. The server keeps a tab's `ETag` across a rebuild for
    /// the clock that changed nothing else (`ui::view`).
    pub fn same_but_now(&self, other: &FleetPage) -> bool {
        // Every field by name, so that a field added to the page is compared (or said not to
        // be) here: a field left out would keep showing a tab its old value.
        let FleetPage {
            fleet,
            commit,
            now: _,
            waves,
            channels,
            overdue,
            unjudged,
            max_age_channels,
            declared,
        } = self;
        *fleet == other.fleet
            && *commit == other.commit
            && *waves == other.waves
            && *channels == other.channels
            && *overdue == other.overdue
            && *unjudged == other.unjudged
            && *max_age_channels == other.max_age_channels
            && *declared == other.declared
    }
}

/// A pool whose age against its channel's `maxAge` is unknown, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnjudgedPool {
    pub cluster: String,
    pub pool: String,
    pub channel: String,
    /// Why it cannot be judged, in words.
    pub why: String,
}

/// A pool past its channel's patch deadline.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OverduePool {
    pub cluster: String,
    pub pool: String,
    pub channel: String,
    /// The version the pool runs (its newest completion).
    pub version: String,
    pub released: DateTime<Utc>,
    /// The channel's `maxAge`, as the repo writes it.
    pub max_age: String,
    /// The deadline that passed (`released + maxAge`).
    pub due: DateTime<Utc>,
}

/// The pools of `waves` that run a version released longer ago than their channel's
/// `maxAge` (a pool with no completion, or a version without `released`, cannot be judged
/// and is left out: see [`unjudged_pools`]), the oldest release first.
pub fn overdue_pools(fleet: &Fleet, waves: &[WavePanel], now: DateTime<Utc>) -> Vec<OverduePool> {
    let mut out = Vec::new();
    for p in waves
        .iter()
        .flat_map(|w| &w.clusters)
        .flat_map(|c| &c.pools)
    {
        let Some(version) = &p.in_force else {
            continue;
        };
        let Some(ch) = fleet.spec.images.get(&p.channel) else {
            continue;
        };
        let (Some(max), Some(released)) = (
            ch.max_age,
            ch.versions.get(version).and_then(|v| v.released),
        ) else {
            continue;
        };
        let Ok(max_d) = chrono::Duration::from_std(max.as_duration()) else {
            continue;
        };
        let due = released + max_d;
        if now > due {
            out.push(OverduePool {
                cluster: p.cluster.clone(),
                pool: p.name.clone(),
                channel: p.channel.clone(),
                version: version.clone(),
                released,
                max_age: max.to_string(),
                due,
            });
        }
    }
    out.sort_by(|a, b| (a.released, &a.cluster, &a.pool).cmp(&(b.released, &b.cluster, &b.pool)));
    out
}

/// The pools of `waves` on a channel with a `maxAge` whose age [`overdue_pools`] cannot
/// judge: no completion reported (the version in force is unknown), or a version in force
/// without `released`. In wave, cluster and pool order.
pub fn unjudged_pools(fleet: &Fleet, waves: &[WavePanel]) -> Vec<UnjudgedPool> {
    let mut out = Vec::new();
    for p in waves
        .iter()
        .flat_map(|w| &w.clusters)
        .flat_map(|c| &c.pools)
    {
        let Some(ch) = fleet.spec.images.get(&p.channel) else {
            continue;
        };
        if ch.max_age.is_none() {
            continue;
        }
        let why = match &p.in_force {
            None => "no report of the version it runs yet".to_string(),
            Some(v) if ch.versions.get(v).and_then(|r| r.released).is_none() => {
                format!("{}@{v} has no released date in the repo", p.channel)
            }
            Some(_) => continue,
        };
        out.push(UnjudgedPool {
            cluster: p.cluster.clone(),
            pool: p.name.clone(),
            channel: p.channel.clone(),
            why,
        });
    }
    out
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WavePanel {
    pub name: String,
    /// `1h` after the wave completes a version, before later waves may take it.
    pub soak: String,
    pub pins: BTreeMap<String, String>,
    pub clusters: Vec<ClusterPanel>,
    /// Nodes on their pool's target, over all pools of the wave that reported counts.
    pub on_target: u32,
    pub total: u32,
}

impl WavePanel {
    /// The wave without its clusters (a page of them is put back by the caller).
    pub fn clone_header(&self) -> WavePanel {
        WavePanel {
            name: self.name.clone(),
            soak: self.soak.clone(),
            pins: self.pins.clone(),
            clusters: Vec::new(),
            on_target: self.on_target,
            total: self.total,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPanel {
    pub name: String,
    /// The cluster's labels, as declared (what `--label k=v` selects on).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    pub state: String,
    pub description: String,
    pub pools: Vec<PoolPanel>,
}

/// What a pool is doing, in one word a reader can filter on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// No agent reported on this commit yet.
    Unknown,
    Held,
    Planning,
    Rotating,
    Soaking,
    RollingBack,
    Paused,
    Failed,
    Done,
    Ignored,
}

impl Phase {
    /// Every phase, in the order a summary lists them (what needs attention first).
    pub const ALL: [Phase; 10] = [
        Phase::Failed,
        Phase::Paused,
        Phase::RollingBack,
        Phase::Held,
        Phase::Rotating,
        Phase::Soaking,
        Phase::Planning,
        Phase::Unknown,
        Phase::Ignored,
        Phase::Done,
    ];

    /// Whether the agent reported trouble: failed, rolling back or paused. No hold the
    /// views derive (the promotion guard) may hide such a report.
    pub fn reports_trouble(self) -> bool {
        matches!(self, Phase::Failed | Phase::RollingBack | Phase::Paused)
    }

    /// The phase's name in JSON and on the command line (`--state rolling-back`).
    pub fn key(self) -> &'static str {
        match self {
            Phase::Unknown => "unknown",
            Phase::Held => "held",
            Phase::Planning => "planning",
            Phase::Rotating => "rotating",
            Phase::Soaking => "soaking",
            Phase::RollingBack => "rolling-back",
            Phase::Paused => "paused",
            Phase::Failed => "failed",
            Phase::Done => "done",
            Phase::Ignored => "ignored",
        }
    }

    /// The phase named `s` (its key, or its label: `no report` is `unknown`).
    pub fn parse(s: &str) -> Option<Phase> {
        Phase::ALL
            .into_iter()
            .find(|p| p.key() == s || p.label() == s)
    }

    pub fn label(self) -> &'static str {
        match self {
            Phase::Unknown => "no report",
            Phase::Held => "held",
            Phase::Planning => "planning",
            Phase::Rotating => "rotating",
            Phase::Soaking => "soaking",
            Phase::RollingBack => "rolling back",
            Phase::Paused => "paused",
            Phase::Failed => "failed",
            Phase::Done => "done",
            Phase::Ignored => "ignored",
        }
    }
}

/// Why a held pool does not move, in words, with the moment it may move when one is known.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hold {
    /// `guard`, `soak`, `gate`, `window`, `paused`.
    pub kind: String,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolPanel {
    pub cluster: String,
    pub name: String,
    pub channel: String,
    /// The version git pins for the pool's wave at this commit.
    pub target: String,
    /// The newest version the pool completed (its records), if any.
    pub in_force: Option<String>,
    pub phase: Phase,
    pub state: String,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<(u32, u32)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<(u32, u32)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold: Option<Hold>,
    /// When the agent last wrote the pool's status on this commit (agents write on change,
    /// so for a held pool: since when its status says so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// Why the pool is stopped or waits, what holds it, who moves it on and how: the
    /// agent's stop note (sanitized when read), or the guard's own when the page finds the
    /// pool held.
    /// Boxed: most pools have none, and 50,000 panels each with room for a note inline
    /// were 5 MB of a 10,000-cluster page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<Box<StopNote>>,
}

impl PoolPanel {
    /// `batch 3/8 · 14/40 nodes`, or the part of it that is known.
    pub fn progress_text(&self) -> String {
        let mut parts = Vec::new();
        if let Some((a, b)) = self.batch {
            parts.push(format!("batch {a}/{b}"));
        }
        if let Some((a, b)) = self.nodes {
            parts.push(format!("{a}/{b} nodes"));
        }
        parts.join(" · ")
    }
}

/// Per channel, per version, per wave: how far the wave got with the version.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelTimeline {
    pub channel: String,
    /// Newest version first.
    pub versions: Vec<VersionRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionRow {
    pub version: String,
    /// One per wave, in wave order.
    pub waves: Vec<WaveStep>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaveStep {
    pub wave: String,
    /// The wave's pools following the channel, and how many completed the version.
    pub pools: u32,
    pub completed: u32,
    /// The first and the last completion of the version in the wave.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_completion: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<DateTime<Utc>>,
    /// When the wave's soak of the version ends (later waves may take it from then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soaked_at: Option<DateTime<Utc>>,
    /// The soak had not ended at the page's `now`. Decided here, not by each view reading
    /// the clock: the model carries every decision the clock makes, so two models that are
    /// equal but for `now` show the same (the page's `ETag` rests on it, `ui::view`).
    pub soaking: bool,
    /// Gate failures on the version in the wave (each stopped or rolled back a pool).
    pub gate_failures: Vec<String>,
    /// The wave pins this version now.
    pub pinned: bool,
}

/// `batch 3/8` and `14/40 nodes` in a status description.
pub fn counts_of(description: &str, word: &str) -> Option<(u32, u32)> {
    let words: Vec<&str> = description
        .split(|c: char| c.is_whitespace() || c == '·')
        .filter(|w| !w.is_empty())
        .collect();
    words.windows(2).find_map(|w| {
        let (pair, label) = if word == "batch" {
            (w[1], w[0])
        } else {
            (w[0], w[1])
        };
        if label != word {
            return None;
        }
        let (a, b) = pair.split_once('/')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    })
}

/// The phase a status says a pool is in (the wording of `agent::progress::pool_status`).
pub fn phase_of(state: Option<&str>, description: &str) -> Phase {
    let d = description
        .strip_prefix("readOnly: ")
        .unwrap_or(description);
    match state {
        None => Phase::Unknown,
        Some(_) if d.starts_with("ignored") => Phase::Ignored,
        Some("success") => Phase::Done,
        Some(_) if d.starts_with("failed") => Phase::Failed,
        Some(_) if d.starts_with("paused") => Phase::Paused,
        Some(_) if d.starts_with("rolling back") => Phase::RollingBack,
        Some(_) if d.starts_with("planning") || d.starts_with("waiting for the controller") => {
            Phase::Planning
        }
        Some(_) if d.starts_with(WINDOW_WAIT) || d.starts_with("wait") => Phase::Held,
        Some(_) if d.ends_with("soaking") => Phase::Soaking,
        Some(_) if d.contains(" nodes") => Phase::Rotating,
        Some("failure") | Some("error") => Phase::Failed,
        Some(_) => Phase::Planning,
    }
}

/// The page for `inputs`: a panel per wave, a cluster's panel in its wave, a pool's in its
/// cluster's, then the fleet-wide lists (timelines, overdue and unjudged pools, channels).
pub fn fleet_page(inputs: &Inputs<'_>) -> FleetPage {
    let mut lookup = Lookup::new(inputs);
    let waves: Vec<WavePanel> = inputs
        .fleet
        .waves()
        .iter()
        .map(|w| lookup.wave_panel(w))
        .collect();
    FleetPage {
        fleet: inputs.fleet.name().to_string(),
        commit: inputs.fleet.commit().unwrap_or_default().to_string(),
        now: inputs.now,
        channels: timelines(inputs),
        overdue: overdue_pools(inputs.fleet, &waves, inputs.now),
        unjudged: unjudged_pools(inputs.fleet, &waves),
        max_age_channels: inputs
            .fleet
            .spec
            .images
            .iter()
            .filter(|(_, ch)| ch.max_age.is_some())
            .map(|(name, _)| name.clone())
            .collect(),
        declared: inputs
            .fleet
            .spec
            .images
            .iter()
            .map(|(name, ch)| (name.clone(), ch.versions.keys().cloned().collect()))
            .collect(),
        waves,
    }
}

/// What the page looks up for every cluster and pool, indexed once: the statuses by context,
/// the agents' records by pool, the waves as the guard sees them, and the guard's answers.
struct Lookup<'a> {
    inputs: &'a Inputs<'a>,
    // Hashed, not ordered: 60,000 contexts sharing long prefixes made the ordered maps'
    // comparisons a tenth of a 10,000-cluster page. The last note listing a context wins.
    by_context: HashMap<&'a str, &'a NoteStatus>,
    records: HashMap<(&'a str, &'a str), &'a PoolRecord>,
    views: Vec<WaveView>,
    guard_on: bool,
    // The guard's answer depends on (wave, channel, version) only: asked once per triple,
    // not once per pool (it indexes every record each time).
    decisions: BTreeMap<(String, String, String), GuardDecision>,
}

impl<'a> Lookup<'a> {
    fn new(inputs: &'a Inputs<'a>) -> Self {
        Lookup {
            inputs,
            by_context: inputs
                .docs
                .iter()
                .flat_map(|d| &d.statuses)
                .map(|s| (s.context.as_str(), s))
                .collect(),
            records: inputs
                .records
                .iter()
                .map(|r| ((r.cluster.as_str(), r.pool.as_str()), r))
                .collect(),
            views: wave_views(inputs.fleet, inputs.clusters),
            guard_on: inputs.fleet.promotion_guard(),
            decisions: BTreeMap::new(),
        }
    }

    /// The (state, description) of the status noted under `context`.
    fn status(&self, context: &str) -> Option<(&'a str, &'a str)> {
        self.by_context
            .get(context)
            .map(|s| (s.state.as_str(), s.description.as_str()))
    }

    /// A wave's panel: its pins and soak, its clusters, and the nodes on target over them.
    fn wave_panel(&mut self, w: &Wave) -> WavePanel {
        let mut panel = WavePanel {
            name: w.name.clone(),
            soak: w.soak.map(|s| s.to_string()).unwrap_or_else(|| "0s".into()),
            pins: w.images.clone(),
            clusters: Vec::new(),
            on_target: 0,
            total: 0,
        };
        let inputs = self.inputs;
        for c in inputs.clusters.iter().filter(|c| c.wave == w.name) {
            let (state, description) = self
                .status(&cluster_context(&c.name))
                .unwrap_or(("none", "no status yet"));
            let mut cluster = ClusterPanel {
                name: c.name.clone(),
                labels: c.labels.clone(),
                state: state.into(),
                description: description.into(),
                // Exactly the pools' room: grown one push at a time, 5 pools took room for
                // 8, and a pool's panel is a few hundred bytes (at 10,000 clusters, 11 MB).
                pools: Vec::with_capacity(c.pools.len()),
            };
            for p in &c.pools {
                let pool = self.pool_panel(c, p);
                if let Some((a, b)) = pool.nodes {
                    panel.on_target += a;
                    panel.total += b;
                }
                cluster.pools.push(pool);
            }
            panel.clusters.push(cluster);
        }
        panel
    }

    /// A pool's panel: its status as the agent noted it, checked against the signed records
    /// when they are verified, and the hold that keeps it from its target.
    fn pool_panel(&mut self, c: &DesiredCluster, p: &DesiredPool) -> PoolPanel {
        let context = pool_context(&c.name, &p.name);
        let noted = self.by_context.get(context.as_str()).copied();
        let status = self.status(&context);
        let (state, description) = status.unwrap_or(("none", "no status yet"));
        let record = self
            .records
            .get(&(c.name.as_str(), p.name.as_str()))
            .copied();
        let in_force = record.and_then(|r| {
            r.completions
                .iter()
                .filter(|x| x.channel == p.channel)
                .max_by_key(|x| x.completed_at)
                .map(|x| x.version.clone())
        });
        let mut phase = phase_of(status.map(|s| s.0), description);
        let completed_target = record
            .and_then(|r| r.latest(&p.channel, &p.version))
            .is_some();
        let unverified;
        let mut stop = noted.and_then(|n| n.stop.clone()).map(Box::new);
        let (state, description) =
            if self.inputs.verified && phase == Phase::Done && !completed_target {
                // An unsigned status says done; no signed record does: shown as no report,
                // saying why.
                phase = Phase::Unknown;
                stop = None;
                unverified = format!(
                    "unverified: reports {}, but no signed record shows {}@{} completed",
                    state, p.channel, p.version
                );
                ("none", unverified.as_str())
            } else {
                (state, description)
            };
        let hold = if in_force.as_deref() == Some(p.version.as_str()) {
            None
        } else {
            self.guard_hold_of(c, p, &mut phase, &mut stop)
        };
        let hold = hold.or_else(|| status_hold(phase, description));
        PoolPanel {
            cluster: c.name.clone(),
            name: p.name.clone(),
            channel: p.channel.clone(),
            target: p.version.clone(),
            in_force,
            phase,
            state: state.into(),
            description: description.into(),
            batch: counts_of(description, "batch"),
            nodes: counts_of(description, "nodes"),
            hold,
            since: noted.map(|n| n.updated_at),
            stop,
        }
    }

    /// The promotion guard's hold on a pool that does not run its target yet, if any; a hold
    /// on a pool that is not done shows it as held, with the guard's wait as its stop.
    fn guard_hold_of(
        &mut self,
        c: &DesiredCluster,
        p: &DesiredPool,
        phase: &mut Phase,
        stop: &mut Option<Box<StopNote>>,
    ) -> Option<Hold> {
        let inputs = self.inputs;
        let promotion = Promotion {
            wave: &c.wave,
            channel: &p.channel,
            version: &p.version,
        };
        let (guard_on, views) = (self.guard_on, &self.views);
        let decision = self
            .decisions
            .entry((c.wave.clone(), p.channel.clone(), p.version.clone()))
            .or_insert_with(|| {
                promotion_guard(guard_on, views, promotion, inputs.records, inputs.now)
            })
            .clone();
        match decision {
            // The agent's own failure or stop report wins over a hold the page derives: the
            // pool failed, rolled back or waits for a person on what it runs, and that is
            // what an on-call must see (the guard's hold stays attached, for what comes after).
            GuardDecision::Waiting(wait) if phase.reports_trouble() => {
                Some(guard_hold(&wait, &p.channel, &p.version))
            }
            GuardDecision::Waiting(wait) if *phase != Phase::Done => {
                *phase = Phase::Held;
                let mut note = wait.stop_note(&p.channel, &p.version);
                note.cause = wait_words(&wait, &p.channel, &p.version);
                *stop = Some(Box::new(note));
                Some(guard_hold(&wait, &p.channel, &p.version))
            }
            _ => None,
        }
    }
}

fn guard_hold(wait: &Wait, channel: &str, version: &str) -> Hold {
    let (kind, until) = match wait {
        Wait::Soak { until, .. } => ("soak", Some(*until)),
        Wait::GateFailure { .. } => ("gate", None),
        Wait::Completion { .. } | Wait::UnknownWave { .. } | Wait::NeverReported { .. } => {
            ("guard", None)
        }
    };
    Hold {
        kind: kind.into(),
        text: wait_words(wait, channel, version),
        until,
    }
}

/// The guard's wait in words, as the views show it: the guard's own (`Wait::describe`), but
/// a soak said by its end, not by the time left. "1h30m left" changed with every build of
/// the model, and so did the page of every tab during a soak; the views count down from the
/// end themselves ([`Hold::until`]: the page's script, `rota status`'s "(1h29m left)").
fn wait_words(wait: &Wait, channel: &str, version: &str) -> String {
    match wait {
        Wait::Soak { wave, until, .. } => format!(
            "waiting for wave {wave} to soak {channel}@{version} until {}",
            until.format("%Y-%m-%dT%H:%MZ")
        ),
        _ => wait.describe(channel, version),
    }
}

/// A hold the agent reported (window, pause, a stop for a human).
fn status_hold(phase: Phase, description: &str) -> Option<Hold> {
    let d = description
        .strip_prefix("readOnly: ")
        .unwrap_or(description);
    let kind = if d.starts_with(WINDOW_WAIT) {
        "window"
    } else if phase == Phase::Paused {
        "paused"
    } else if phase == Phase::Failed && d.contains("gate") {
        "gate"
    } else if phase == Phase::Held {
        "guard"
    } else {
        return None;
    };
    Some(Hold {
        kind: kind.into(),
        text: d.into(),
        until: None,
    })
}

fn timelines(inputs: &Inputs<'_>) -> Vec<ChannelTimeline> {
    let waves = inputs.fleet.waves();
    // Indexed once: every (version, wave) step looks up each of the wave's pools.
    let records: HashMap<(&str, &str), &PoolRecord> = inputs
        .records
        .iter()
        .map(|r| ((r.cluster.as_str(), r.pool.as_str()), r))
        .collect();
    let mut channels: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for c in inputs.clusters {
        for p in &c.pools {
            channels
                .entry(p.channel.clone())
                .or_default()
                .insert(p.version.clone());
        }
    }
    for r in inputs.records {
        for c in &r.completions {
            if let Some(v) = channels.get_mut(&c.channel) {
                v.insert(c.version.clone());
            }
        }
    }
    channels
        .into_iter()
        .map(|(channel, versions)| {
            let mut versions: Vec<VersionRow> = versions
                .into_iter()
                .map(|version| VersionRow {
                    waves: waves
                        .iter()
                        .map(|w| wave_step(inputs, &records, w, &channel, &version))
                        .collect(),
                    version,
                })
                .collect();
            // Versions are CalVer or SemVer-like: newest first by numeric parts.
            versions.sort_by_key(|v| std::cmp::Reverse(version_key(&v.version)));
            ChannelTimeline { channel, versions }
        })
        .collect()
}

fn version_key(v: &str) -> Vec<(u64, String)> {
    v.split(['.', '-', '+'])
        .map(|p| (p.parse().unwrap_or(0), p.to_string()))
        .collect()
}

fn wave_step(
    inputs: &Inputs<'_>,
    records: &HashMap<(&str, &str), &PoolRecord>,
    wave: &Wave,
    channel: &str,
    version: &str,
) -> WaveStep {
    let pools: Vec<(&str, &str)> = inputs
        .clusters
        .iter()
        .filter(|c| c.wave == wave.name)
        .flat_map(|c| {
            c.pools
                .iter()
                .filter(|p| p.channel == channel)
                .map(|p| (c.name.as_str(), p.name.as_str()))
        })
        .collect();
    let mut done = Vec::new();
    let mut gate_failures = Vec::new();
    for (cluster, pool) in &pools {
        let Some(r) = records.get(&(*cluster, *pool)) else {
            continue;
        };
        if let Some(at) = r.latest_completion(channel, version) {
            done.push(at);
        }
        for g in r
            .gate_failures
            .iter()
            .filter(|g| g.channel == channel && g.version == version)
        {
            gate_failures.push(format!(
                "{} on {cluster}/{pool} at {}",
                g.what(),
                g.at.format("%Y-%m-%d %H:%M UTC")
            ));
        }
    }
    let all = !pools.is_empty() && done.len() == pools.len();
    let completed_at = all.then(|| done.iter().max().copied()).flatten();
    let soak = wave
        .soak
        .map(|s| chrono::Duration::from_std(s.as_duration()).unwrap_or_default())
        .unwrap_or_default();
    // Saturating: a record may be dated near the end of time (the note reader bounds
    // dates, this keeps the arithmetic total whatever it is handed).
    let soaked_at = completed_at.map(|t| {
        t.checked_add_signed(soak)
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    });
    WaveStep {
        wave: wave.name.clone(),
        pools: pools.len() as u32,
        completed: done.len() as u32,
        first_completion: done.iter().min().copied(),
        completed_at,
        soaked_at,
        soaking: soaked_at.is_some_and(|t| t > inputs.now),
        gate_failures,
        pinned: wave.images.get(channel).map(String::as_str) == Some(version),
    }
}

/// `rota where CHANNEL@VERSION`: where one pool stands with `version`.
pub fn relation(pool: &PoolPanel, version: &str) -> &'static str {
    let on = pool.in_force.as_deref() == Some(version);
    match (pool.target == version, on) {
        (true, true) if pool.phase == Phase::Done => "on it",
        (true, true) => "on it, reporting",
        (true, false) if pool.hold.is_some() => "held before it",
        (true, false) if pool.phase == Phase::Done => "on it",
        (true, false) => "moving to it",
        (false, true) => "left it (git pins another version)",
        (false, false) => "not pinned to it",
    }
}

/// `rota where CHANNEL@VERSION`: every pool following `channel`, by wave in order (waves
/// with no such pool left out).
pub fn pools_following<'p>(
    page: &'p FleetPage,
    channel: &str,
) -> Vec<(&'p WavePanel, Vec<&'p PoolPanel>)> {
    page.waves
        .iter()
        .map(|w| {
            let pools: Vec<&PoolPanel> = w
                .clusters
                .iter()
                .flat_map(|c| &c.pools)
                .filter(|p| p.channel == channel)
                .collect();
            (w, pools)
        })
        .filter(|(_, pools)| !pools.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::State;
    use crate::report::note_doc::NoteStatus;

    fn example() -> (Fleet, Vec<DesiredCluster>) {
        let fleet = crate::source::read::load_dir(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo"),
        )
        .unwrap();
        let clusters = fleet.resolve_all().unwrap();
        (fleet, clusters)
    }

    fn now() -> DateTime<Utc> {
        "2026-11-23T12:00:00Z".parse().unwrap()
    }

    fn doc(cluster: &str, pools: &[(&str, State, &str)]) -> NoteDoc {
        NoteDoc {
            cluster: cluster.into(),
            statuses: pools
                .iter()
                .map(|(p, state, d)| NoteStatus {
                    context: pool_context(cluster, p),
                    state: *state,
                    description: (*d).into(),
                    target_url: None,
                    updated_at: now(),
                    stop: None,
                })
                .collect(),
            pools: Vec::new(),
            signed: None,
        }
    }

    fn pool<'p>(page: &'p FleetPage, cluster: &str, name: &str) -> &'p PoolPanel {
        page.waves
            .iter()
            .flat_map(|w| &w.clusters)
            .flat_map(|c| &c.pools)
            .find(|p| p.cluster == cluster && p.name == name)
            .unwrap()
    }

    #[test]
    fn statuses_read_as_phases_and_counts() {
        let rotating = "batch 3/8 · 14/40 nodes on general@2026.11.2";
        assert_eq!(counts_of(rotating, "batch"), Some((3, 8)));
        assert_eq!(counts_of(rotating, "nodes"), Some((14, 40)));
        assert_eq!(phase_of(Some("pending"), rotating), Phase::Rotating);
        assert_eq!(
            phase_of(Some("pending"), "batch 8/8 · 40/40 nodes on g@1 · soaking"),
            Phase::Soaking
        );
        assert_eq!(
            phase_of(Some("failure"), "paused: gate pods-healthy failed"),
            Phase::Paused
        );
        assert_eq!(
            phase_of(
                Some("pending"),
                "waiting for a maintenance window · 0/4 nodes on g@1"
            ),
            Phase::Held
        );
        assert_eq!(
            phase_of(Some("pending"), "waiting for the controller to take g@1"),
            Phase::Planning
        );
        assert_eq!(phase_of(Some("success"), "40/40 nodes on g@1"), Phase::Done);
        assert_eq!(phase_of(None, "no status yet"), Phase::Unknown);
    }

    #[test]
    fn waves_come_in_fleet_order_with_progress_summed() {
        let (fleet, clusters) = example();
        let docs = [doc(
            "canary-use1",
            &[
                (
                    "general",
                    State::Pending,
                    "batch 1/4 · 3/12 nodes on general@2026.11.2",
                ),
                ("gpu", State::Success, "4/4 nodes on gpu@2026.11.1"),
            ],
        )];
        let page = fleet_page(&Inputs {
            fleet: &fleet,
            clusters: &clusters,
            docs: &docs,
            records: &[],
            now: now(),
            verified: false,
        });
        let names: Vec<&str> = page.waves.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["canary", "early", "main"]);
        assert_eq!((page.waves[0].on_target, page.waves[0].total), (7, 16));
        let g = pool(&page, "canary-use1", "general");
        assert_eq!((g.batch, g.nodes), (Some((1, 4)), Some((3, 12))));
        assert_eq!(g.progress_text(), "batch 1/4 · 3/12 nodes");
        assert_eq!(g.hold, None, "the first wave is never held by the guard");
        assert_eq!(pool(&page, "dev-usc1", "general").phase, Phase::Unknown);
    }

    /// The example's `general` has `maxAge: 30d`; 2026.11.1 was released 2026-11-03T08:00Z.
    #[test]
    fn pools_past_the_patch_deadline_are_listed_oldest_first_and_only_those() {
        let (fleet, clusters) = example();
        let done: DateTime<Utc> = "2026-11-10T00:00:00Z".parse().unwrap();
        let records = vec![
            PoolRecord::new("prod-use1", "general").completed("general", "2026.11.1", done),
            PoolRecord::new("canary-use1", "general").completed("general", "2026.11.2", done),
            // gpu has no maxAge: never overdue.
            PoolRecord::new("prod-use1", "gpu").completed("gpu", "2026.10.3", done),
        ];
        let page_at = |now: &str| {
            fleet_page(&Inputs {
                fleet: &fleet,
                clusters: &clusters,
                docs: &[],
                records: &records,
                now: now.parse().unwrap(),
                verified: false,
            })
        };
        // A day before 2026.11.1's deadline (2026-12-03T08:00Z): none.
        assert_eq!(page_at("2026-12-02T08:00:00Z").overdue, vec![]);
        let page = page_at("2026-12-05T08:00:00Z");
        let listed: Vec<(&str, &str, &str)> = page
            .overdue
            .iter()
            .map(|o| (o.cluster.as_str(), o.pool.as_str(), o.version.as_str()))
            .collect();
        assert_eq!(listed, [("prod-use1", "general", "2026.11.1")]);
        assert_eq!(page.overdue[0].max_age, "30d");
        let r = crate::ui::text::overdue(&page, &Default::default()).unwrap();
        let text = r.text;
        assert_eq!(r.overdue, 1);
        assert!(
            text.contains("prod-use1/general  general@2026.11.1  released 2026-11-03 08:00 UTC (32d 0h ago), maxAge 30d, overdue for 2d 0h"),
            "{text}"
        );
        // Later, 2026.11.2 (released 2026-11-20) is overdue too, listed after the older one.
        let page = page_at("2026-12-25T08:00:00Z");
        assert_eq!(page.overdue.len(), 2);
        assert_eq!(page.overdue[0].version, "2026.11.1");
        assert!(
            crate::ui::html::fragment(&page, &[])
                .contains(r#"<h2 id="overdue-h">Overdue images</h2>"#)
        );
    }

    /// `--overdue` names what it cannot judge, and says so rather than "none overdue" when
    /// it judged nothing (pins 59 days old, `maxAge: 30d`, no reports yet).
    #[test]
    fn overdue_names_the_pools_it_cannot_judge_and_never_says_none_of_none() {
        let (fleet, clusters) = example();
        let page_with = |records: &[PoolRecord], now: &str| {
            fleet_page(&Inputs {
                fleet: &fleet,
                clusters: &clusters,
                docs: &[],
                records,
                now: now.parse().unwrap(),
                verified: false,
            })
        };
        // No reports: every pool on `general` (maxAge 30d) is unjudged, none is judged.
        let page = page_with(&[], "2027-01-01T08:00:00Z");
        let general: Vec<_> = page
            .waves
            .iter()
            .flat_map(|w| &w.clusters)
            .flat_map(|c| &c.pools)
            .filter(|p| p.channel == "general")
            .map(|p| (p.cluster.clone(), p.name.clone()))
            .collect();
        assert!(!general.is_empty());
        let named: Vec<_> = page
            .unjudged
            .iter()
            .map(|u| (u.cluster.clone(), u.pool.clone()))
            .collect();
        assert_eq!(
            named, general,
            "exactly the pools of channels with a maxAge"
        );
        let r = crate::ui::text::overdue(&page, &Default::default()).unwrap();
        assert_eq!((r.overdue, r.judged), (0, 0));
        assert!(
            r.text
                .starts_with("no pool could be judged against its channel's maxAge\n"),
            "{}",
            r.text
        );
        assert!(
            r.text
                .contains("prod-use1/general  general: no report of the version it runs yet"),
            "{}",
            r.text
        );
        // One report on time... judged, and the others still named.
        let done: DateTime<Utc> = "2026-11-25T00:00:00Z".parse().unwrap();
        let records =
            [PoolRecord::new("prod-use1", "general").completed("general", "2026.11.2", done)];
        let page = page_with(&records, "2026-12-01T00:00:00Z");
        let r = crate::ui::text::overdue(&page, &Default::default()).unwrap();
        assert_eq!((r.overdue, r.judged), (0, 1), "{}", r.text);
        assert_eq!(r.unjudged, general.len() - 1);
        assert!(!r.text.contains("prod-use1/general"), "{}", r.text);
    }

    #[test]
    fn a_soaking_earlier_wave_holds_the_next_with_a_countdown() {
        let (fleet, clusters) = example();
        let done = now() - chrono::Duration::minutes(30);
        let records: Vec<PoolRecord> = ["canary-use1", "dev-usc1"]
            .iter()
            .map(|c| PoolRecord::new(c, "general").completed("general", "2026.11.2", done))
            .chain([PoolRecord::new("prod-use1", "general").completed(
                "general",
                "2026.11.1",
                done - chrono::Duration::days(3),
            )])
            .collect();
        let page = fleet_page(&Inputs {
            fleet: &fleet,
            clusters: &clusters,
            docs: &[],
            records: &records,
            now: now(),
            verified: false,
        });
        let p = pool(&page, "prod-use1", "general");
        assert_eq!(p.phase, Phase::Held);
        assert_eq!(p.in_force.as_deref(), Some("2026.11.1"));
        let hold = p.hold.as_ref().unwrap();
        assert_eq!(hold.kind, "soak");
        // canary soaks 2h from its last completion, 30 minutes ago.
        assert_eq!(hold.until, Some(done + chrono::Duration::hours(2)));
        // Said by its end: the time left is counted down by the views.
        assert_eq!(
            hold.text,
            format!(
                "waiting for wave canary to soak general@2026.11.2 until {}",
                (done + chrono::Duration::hours(2)).format("%Y-%m-%dT%H:%MZ")
            )
        );
        assert_eq!(p.stop.as_ref().unwrap().cause, hold.text);
        assert_eq!(
            relation(p, "2026.11.2"),
            "held before it",
            "rota where general@2026.11.2"
        );
        // The canary pools are on it.
        let c = pool(&page, "canary-use1", "general");
        assert_eq!(c.hold, None);
        assert_eq!(c.in_force.as_deref(), Some("2026.11.2"));
        // The timeline: canary completed 2026.11.2 and soaks until +2h; early has not.
        let general = page
            .channels
            .iter()
            .find(|c| c.channel == "general")
            .unwrap();
        assert_eq!(general.versions[0].version, "2026.11.2", "newest first");
        let canary = &general.versions[0].waves[0];
        assert_eq!((canary.completed, canary.pools), (2, 2));
        assert_eq!(canary.completed_at, Some(done));
        assert_eq!(canary.soaked_at, Some(done + chrono::Duration::hours(2)));
        assert!(canary.soaking, "the soak ends in 1h30m");
        let early = &general.versions[0].waves[1];
        assert_eq!((early.completed, early.completed_at), (0, None));
        assert!(early.pinned);
    }

    /// A pool the guard holds whose agent reports a failure shows the failure (and is an
    /// exception); one reporting a plain wait shows the guard's hold.
    #[test]
    fn an_agents_failure_report_is_never_hidden_by_a_guard_hold() {
        let (fleet, clusters) = example();
        let done = now() - chrono::Duration::minutes(30);
        let records: Vec<PoolRecord> = ["canary-use1", "dev-usc1"]
            .iter()
            .map(|c| PoolRecord::new(c, "general").completed("general", "2026.11.2", done))
            .chain([PoolRecord::new("prod-use1", "general").completed(
                "general",
                "2026.11.1",
                done - chrono::Duration::days(3),
            )])
            .collect();
        let page_with = |state: State, description: &str| {
            fleet_page(&Inputs {
                fleet: &fleet,
                clusters: &clusters,
                docs: &[doc("prod-use1", &[("general", state, description)])],
                records: &records,
                now: now(),
                verified: false,
            })
        };
        let failing = |page: &FleetPage| {
            let s = crate::ui::summary::summarize(page, now(), &Default::default());
            s.exceptions
                .iter()
                .filter(|e| e.kind == crate::ui::summary::ExceptionKind::Failing)
                .map(|e| format!("{}/{}", e.cluster, e.pool.as_deref().unwrap_or("")))
                .collect::<Vec<_>>()
        };
        let page = page_with(
            State::Failure,
            "failed: rolled back from general@2026.11.1: health gate error-rate failed",
        );
        let p = pool(&page, "prod-use1", "general");
        assert_eq!(p.phase, Phase::Failed);
        assert_eq!(p.hold.as_ref().map(|h| h.kind.as_str()), Some("soak"));
        assert_eq!(failing(&page), ["prod-use1/general"]);
        // A plain wait: the guard's hold, not an exception.
        let page = page_with(State::Pending, "waiting for the controller to take it");
        assert_eq!(pool(&page, "prod-use1", "general").phase, Phase::Held);
        assert!(failing(&page).is_empty());
    }

    /// A version or channel the repo does not declare is an error in `rota where` and in
    /// `--version`, never an empty answer.
    #[test]
    fn unknown_versions_and_channels_are_errors() {
        let (fleet, clusters) = example();
        let page = fleet_page(&Inputs {
            fleet: &fleet,
            clusters: &clusters,
            docs: &[],
            records: &[],
            now: now(),
            verified: false,
        });
        let e = crate::ui::text::where_is(&page, "general", "9.9.9").unwrap_err();
        assert!(
            e.contains("channel \"general\" has no version \"9.9.9\"") && e.contains("2026.11.2"),
            "{e}"
        );
        let e = crate::ui::text::where_is(&page, "nope", "2026.11.2").unwrap_err();
        assert!(
            e.contains("no channel \"nope\"") && e.contains("general"),
            "{e}"
        );
        assert!(crate::ui::text::where_is(&page, "general", "2026.11.1").is_ok());
        assert!(crate::ui::text::where_is(&page, "gpu", "2026.10.3").is_ok());
        let check = |v: &str| {
            crate::ui::text::Filter {
                version: Some(v.into()),
                ..Default::default()
            }
            .check(&page)
        };
        assert!(check("general@9.9.9").is_err());
        assert!(check("9.9.9").is_err());
        assert!(check("nope@2026.11.2").is_err());
        assert!(check("general@2026.11.2").is_ok());
        assert!(check("2026.10.3").is_ok());
    }

    #[test]
    fn with_signed_records_an_unsigned_success_is_not_done() {
        let (fleet, clusters) = example();
        let docs = [doc(
            "canary-use1",
            &[(
                "general",
                State::Success,
                "12/12 nodes on general@2026.11.2",
            )],
        )];
        let page = |verified| {
            fleet_page(&Inputs {
                fleet: &fleet,
                clusters: &clusters,
                docs: &docs,
                records: &[],
                now: now(),
                verified,
            })
        };
        assert_eq!(
            pool(&page(false), "canary-use1", "general").phase,
            Phase::Done
        );
        let p = page(true);
        let g = pool(&p, "canary-use1", "general");
        assert_eq!((g.phase, g.state.as_str()), (Phase::Unknown, "none"));
        assert!(
            g.description.starts_with("unverified: reports success"),
            "{}",
            g.description
        );
    }

    #[test]
    fn a_record_at_the_end_of_time_saturates() {
        let (fleet, clusters) = example();
        let end = DateTime::<Utc>::MAX_UTC;
        // Both canary pools on general: the wave completed, and its soak is added.
        let records: Vec<PoolRecord> = ["canary-use1", "dev-usc1"]
            .iter()
            .map(|c| PoolRecord::new(c, "general").completed("general", "2026.11.2", end))
            .collect();
        let page = fleet_page(&Inputs {
            fleet: &fleet,
            clusters: &clusters,
            docs: &[],
            records: &records,
            now: now(),
            verified: false,
        });
        let canary = &page.channels[0].versions[0].waves[0];
        assert_eq!(canary.completed_at, Some(end));
        assert_eq!(canary.soaked_at, Some(end), "saturated, not a panic");
    }

    #[test]
    fn a_gate_failure_holds_the_next_wave_and_shows_in_the_timeline() {
        let (fleet, clusters) = example();
        let at = now() - chrono::Duration::minutes(10);
        let records = vec![
            PoolRecord::new("canary-use1", "general")
                .completed("general", "2026.11.2", at - chrono::Duration::hours(5))
                .gate_failed("general", "2026.11.2", "pods-healthy", at),
            PoolRecord::new("dev-usc1", "general").completed(
                "general",
                "2026.11.2",
                at - chrono::Duration::hours(5),
            ),
        ];
        let page = fleet_page(&Inputs {
            fleet: &fleet,
            clusters: &clusters,
            docs: &[],
            records: &records,
            now: now(),
            verified: false,
        });
        let hold = pool(&page, "staging-neu", "general").hold.clone().unwrap();
        assert_eq!(hold.kind, "gate");
        assert!(
            hold.text.contains("gate pods-healthy failed"),
            "{}",
            hold.text
        );
        let general = page
            .channels
            .iter()
            .find(|c| c.channel == "general")
            .unwrap();
        let canary = &general.versions[0].waves[0];
        assert_eq!(canary.gate_failures.len(), 1);
        assert!(
            canary.gate_failures[0].starts_with("gate pods-healthy failed on canary-use1/general")
        );
    }

    /// Issue 26 (3): every reason the planner emits that stops a pool reaches all four places
    /// with its cause, what holds it and the next step: the NodePoolRotation's status, its
    /// Event, the commit status (and the note document behind it), and the page and the
    /// terminal view.
    #[test]
    fn every_stop_reason_reaches_the_status_the_event_the_commit_status_and_the_page() {
        use crate::kube::crd::NodePoolRotation;
        use rota_core::rotate::Phase as RotPhase;
        use rota_core::rotate::resource::{NodePoolRotationSpec, NodePoolRotationStatus};
        use rota_core::rotate::stop::{self, MovedBy, Reason};
        let (fleet, clusters) = example();
        let cluster = clusters.iter().find(|c| c.name == "canary-use1").unwrap();
        let desired = cluster.pools.iter().find(|p| p.name == "general").unwrap();
        let commit = fleet.commit().unwrap_or("abc").to_string();
        let mut covered = 0;
        for r in Reason::ALL {
            let ctx = stop::Context {
                cluster: "canary-use1",
                pool: "general",
                blocked_by: vec!["pod app/db-0".into()],
                until: None,
                halted: None,
                clear: None,
            };
            let Some(note) = stop::explain(*r, "the cause, in words", &ctx) else {
                assert!(r.moving(), "{r}");
                continue;
            };
            covered += 1;
            let phase = match note.by {
                MovedBy::Person => RotPhase::Paused,
                MovedBy::Rota => RotPhase::Waiting,
            };
            let mut npr = NodePoolRotation::new(
                "general",
                NodePoolRotationSpec::from_desired(desired, &commit),
            );
            npr.status = Some(NodePoolRotationStatus {
                phase,
                message: "the cause, in words".into(),
                total: 4,
                on_target: 1,
                stop: Some(note.clone()),
                observed_commit: Some(commit.clone()),
                ..Default::default()
            });
            // 1. The status carries it, as the CRD stores it.
            let stored = serde_json::to_value(npr.status.as_ref().unwrap()).unwrap();
            assert_eq!(stored["stop"]["next"], note.next.as_str(), "{r}");
            assert_eq!(stored["stop"]["blockedBy"][0], "pod app/db-0", "{r}");
            // 2. The Event: a Warning when a person must act, with all three parts.
            let event = rota_core::rotate::aftermath::events::stop_event(
                None,
                npr.status.as_ref().unwrap(),
            )
            .unwrap();
            let (warning, reason, text) = (event.warning, event.reason, event.note);
            assert_eq!(warning, note.by == MovedBy::Person, "{r}");
            assert_eq!(reason, r.as_str());
            assert!(
                text.contains("the cause, in words")
                    && text.contains("blocked by: pod app/db-0")
                    && text.contains(&note.next),
                "{r}: {text}"
            );
            // 3. The commit status: a person's next step within the forge's 140 characters.
            let intent = crate::agent::desired::PoolIntent {
                name: "general".into(),
                spec: None,
                pinned: (desired.channel.clone(), desired.version.clone()),
                waiting: None,
                held: None,
            };
            let cs = crate::agent::progress::pool_status(
                "canary-use1",
                &intent,
                Some(&npr),
                &commit,
                now(),
            );
            match note.by {
                MovedBy::Person => assert!(
                    cs.description
                        .starts_with(&format!("paused; next: {}", note.next)),
                    "{r}: {}",
                    cs.description
                ),
                MovedBy::Rota => assert!(
                    cs.description.contains(&format!("waits ({r})")),
                    "{r}: {}",
                    cs.description
                ),
            }
            assert_eq!(cs.stop.as_ref(), Some(&note));
            // 4. The page and the terminal view, from the note document.
            let docs = [NoteDoc {
                cluster: "canary-use1".into(),
                statuses: vec![NoteStatus {
                    context: cs.context.clone(),
                    state: cs.state,
                    description: cs.description.clone(),
                    target_url: None,
                    updated_at: now(),
                    stop: cs.stop.clone(),
                }],
                pools: Vec::new(),
                signed: None,
            }];
            let page = fleet_page(&Inputs {
                fleet: &fleet,
                clusters: &clusters,
                docs: &docs,
                records: &[],
                now: now(),
                verified: false,
            });
            assert_eq!(
                pool(&page, "canary-use1", "general").stop.as_deref(),
                Some(&note)
            );
            let html = crate::ui::html::page(&page, &[]);
            let shown = note
                .next
                .strip_prefix("nothing to do: ")
                .unwrap_or(&note.next);
            assert!(
                html.contains(&crate::ui::html::esc(shown))
                    && html.contains(&format!(r#"data-reason="{r}""#))
                    && html.contains("Blocked by: pod app/db-0"),
                "{r}: the page names the next step and the blocker"
            );
            let text = crate::ui::text::fleet(&page, &Default::default()).unwrap();
            assert!(text.contains(&note.next), "{r}: {text}");
            // Each pool links to its nodes in the image ledger.
            let audit = "rota audit --cluster canary-use1 --pool general";
            assert!(text.contains(&format!("nodes: {audit}")), "{text}");
            assert!(
                html.contains(audit),
                "the page links the pool to its ledger"
            );
        }
        assert_eq!(
            covered,
            Reason::ALL.iter().filter(|r| !r.moving()).count() + 1
        );
    }
}
