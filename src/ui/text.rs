//! The fleet view in a terminal: `rota status --fleet` (waves in order, each cluster's pools
//! with progress bars and holds) and `rota where CHANNEL@VERSION`. Pure: the view model in,
//! lines out; the same model as the web page.

use super::model::{
    ClusterPanel, FleetPage, Phase, PoolPanel, WavePanel, pools_following, relation,
};
pub use super::summary::span;
use super::summary::{ExceptionKind, FleetSummary};

/// Up to this many pools, `rota status --fleet` lists every cluster and pool as it always
/// has (the demo's fleet, a team's few clusters); past it, it leads with the summary and the
/// exceptions and lists the rest only when asked (`--all` or a filter).
pub const LIST_ALL_UP_TO_POOLS: usize = 50;

/// Which part of the fleet to show: waves and clusters by name or label, pools by phase or
/// version. Every criterion given must hold.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub wave: Option<String>,
    pub cluster: Option<String>,
    /// Pools in this phase.
    pub state: Option<Phase>,
    /// Pools targeting or running this version (`VERSION` or `CHANNEL@VERSION`).
    pub version: Option<String>,
    /// Clusters carrying every one of these labels.
    pub labels: Vec<(String, String)>,
    /// Pools that may be exceptions of this kind (`--exception halted`).
    pub exception: Option<ExceptionKind>,
}

impl Filter {
    /// Anything narrower than the whole fleet.
    pub fn narrowed(&self) -> bool {
        self.wave.is_some()
            || self.cluster.is_some()
            || self.state.is_some()
            || self.version.is_some()
            || !self.labels.is_empty()
            || self.exception.is_some()
    }

    fn pool_level(&self) -> bool {
        self.state.is_some() || self.version.is_some() || self.exception.is_some()
    }

    pub fn cluster_matches(&self, c: &ClusterPanel) -> bool {
        self.cluster.as_ref().is_none_or(|n| n == &c.name)
            && self
                .labels
                .iter()
                .all(|(k, v)| c.labels.get(k).is_some_and(|x| x == v))
    }

    pub fn pool_matches(&self, p: &PoolPanel) -> bool {
        self.state.is_none_or(|s| s == p.phase)
            && self.exception.is_none_or(|k| k.may_be(p))
            && self.version.as_ref().is_none_or(|v| {
                let (channel, version) = match v.split_once('@') {
                    Some((c, v)) => (Some(c), v),
                    None => (None, v.as_str()),
                };
                channel.is_none_or(|c| c == p.channel)
                    && (p.target == version || p.in_force.as_deref() == Some(version))
            })
    }

    /// The part of `page` this filter selects: its waves, their matching clusters with
    /// their matching pools (a cluster with none left out), and the overdue pools among
    /// them. Waves a cluster or pool criterion empties are left out; a wave named by
    /// `--wave` stays, empty or not. Wave totals stay the whole wave's.
    pub fn select(&self, page: &FleetPage) -> FleetPage {
        let clusters_or_pools =
            self.pool_level() || self.cluster.is_some() || !self.labels.is_empty();
        let mut kept = std::collections::BTreeSet::new();
        let waves = page
            .waves
            .iter()
            .filter(|w| self.wave.as_ref().is_none_or(|n| n == &w.name))
            .filter_map(|w| {
                let clusters: Vec<ClusterPanel> = w
                    .clusters
                    .iter()
                    .filter(|c| self.cluster_matches(c))
                    .filter_map(|c| {
                        let pools: Vec<PoolPanel> = c
                            .pools
                            .iter()
                            .filter(|p| self.pool_matches(p))
                            .cloned()
                            .collect();
                        if pools.is_empty() && self.pool_level() {
                            return None;
                        }
                        for p in &pools {
                            kept.insert((p.cluster.clone(), p.name.clone()));
                        }
                        Some(ClusterPanel {
                            name: c.name.clone(),
                            labels: c.labels.clone(),
                            state: c.state.clone(),
                            description: c.description.clone(),
                            pools,
                        })
                    })
                    .collect();
                if clusters.is_empty() && clusters_or_pools {
                    return None;
                }
                Some(WavePanel {
                    name: w.name.clone(),
                    soak: w.soak.clone(),
                    pins: w.pins.clone(),
                    clusters,
                    on_target: w.on_target,
                    total: w.total,
                })
            })
            .collect();
        FleetPage {
            fleet: page.fleet.clone(),
            commit: page.commit.clone(),
            now: page.now,
            waves,
            channels: page.channels.clone(),
            overdue: page
                .overdue
                .iter()
                .filter(|o| kept.contains(&(o.cluster.clone(), o.pool.clone())))
                .cloned()
                .collect(),
            max_age_channels: page.max_age_channels.clone(),
            declared: page.declared.clone(),
            unjudged: page
                .unjudged
                .iter()
                .filter(|o| kept.contains(&(o.cluster.clone(), o.pool.clone())))
                .cloned()
                .collect(),
        }
    }

    /// `page` itself when nothing narrows it, else [`Filter::select`]'s part of it.
    pub fn apply<'a>(&self, page: &'a FleetPage) -> std::borrow::Cow<'a, FleetPage> {
        if self.narrowed() {
            std::borrow::Cow::Owned(self.select(page))
        } else {
            std::borrow::Cow::Borrowed(page)
        }
    }

    /// An unknown wave or cluster is the caller's mistake, said with what there is.
    pub fn check(&self, page: &FleetPage) -> Result<(), String> {
        if let Some(w) = &self.wave
            && !page.waves.iter().any(|x| &x.name == w)
        {
            let names: Vec<&str> = page.waves.iter().map(|w| w.name.as_str()).collect();
            return Err(format!(
                "no wave {w:?}; the fleet's waves: {}",
                names.join(", ")
            ));
        }
        if let Some(c) = &self.cluster
            && !page
                .waves
                .iter()
                .flat_map(|w| &w.clusters)
                .any(|x| &x.name == c)
        {
            return Err(format!("no cluster {c:?} in the fleet"));
        }
        if let Some(v) = &self.version {
            match v.split_once('@') {
                Some((channel, version)) => known_version(page, channel, version)?,
                None if !page.declared.is_empty()
                    && !page.declared.values().flatten().any(|x| x == v) =>
                {
                    return Err(format!("no channel of the fleet declares version {v:?}"));
                }
                None => {}
            }
        }
        Ok(())
    }
}

/// `Ok` when the repo declares `channel` and its `version`, else what it declares instead.
/// A page built without the repo's declarations (tests of the views alone) knows none and
/// checks nothing.
pub fn known_version(page: &FleetPage, channel: &str, version: &str) -> Result<(), String> {
    if page.declared.is_empty() {
        return Ok(());
    }
    let Some(versions) = page.declared.get(channel) else {
        let names: Vec<&str> = page.declared.keys().map(String::as_str).collect();
        return Err(format!(
            "no channel {channel:?} in the fleet; its channels: {}",
            names.join(", ")
        ));
    };
    if !versions.iter().any(|v| v == version) {
        return Err(format!(
            "channel {channel:?} has no version {version:?}; its versions: {}",
            versions.join(", ")
        ));
    }
    Ok(())
}

/// `--label k=v` read: the key and the value.
pub fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not a label selector: write KEY=VALUE")),
    }
}

/// `--state NAME` read: a phase by its key (`rolling-back`) or label (`no report`).
pub fn parse_state(s: &str) -> Result<Phase, String> {
    Phase::parse(s).ok_or_else(|| {
        let names: Vec<&str> = Phase::ALL.iter().map(|p| p.key()).collect();
        format!("no state {s:?}; the states: {}", names.join(", "))
    })
}

/// `wave N NAME  pins ...  soak ...  [bar] ON/TOTAL nodes on target`, the nodes as the
/// caller writes them (the summary groups thousands, the listing does not).
fn wave_header(i: usize, w: &WavePanel, on_target: String, total: String) -> String {
    let pins: Vec<String> = w.pins.iter().map(|(c, v)| format!("{c}@{v}")).collect();
    format!(
        "\nwave {} {}  pins {}  soak {}  {} {on_target}/{total} nodes on target\n",
        i + 1,
        w.name,
        if pins.is_empty() {
            "nothing".into()
        } else {
            pins.join(" ")
        },
        w.soak,
        bar(w.on_target, w.total, 20),
    )
}

fn bar(on: u32, total: u32, width: usize) -> String {
    let filled = if total == 0 {
        0
    } else {
        (on as usize * width / total as usize).min(width)
    };
    format!("[{}{}]", "#".repeat(filled), "-".repeat(width - filled))
}

fn mark(state: &str) -> &'static str {
    match state {
        "success" => "✓",
        "pending" => "…",
        "failure" => "✗",
        "error" => "!",
        _ => "·",
    }
}

fn pool_line(p: &PoolPanel, now: chrono::DateTime<chrono::Utc>) -> String {
    let version = match p.in_force.as_deref() {
        Some(v) if v == p.target => p.target.clone(),
        Some(v) => format!("{v} → {}", p.target),
        None => format!("→ {}", p.target),
    };
    let progress = match p.nodes {
        Some((a, b)) => format!("{} {}", bar(a, b, 20), p.progress_text()),
        None => String::new(),
    };
    let mut line = format!(
        "    {} {:<14} {:<10} {:<26} {:<12} {progress}\n",
        mark(&p.state),
        p.name,
        p.channel,
        version,
        p.phase.label(),
    );
    if let Some(h) = &p.hold {
        let left = h
            .until
            .map(|u| format!(" ({} left)", super::html::left(now, u)))
            .unwrap_or_default();
        line += &format!("        held ({}): {}{left}\n", h.kind, h.text);
    } else if !matches!(p.phase, super::model::Phase::Done) {
        line += &format!("        {}\n", p.description);
    }
    if let Some(n) = &p.stop {
        line += &format!("        {}\n", n.headline());
        if !n.blocked_by.is_empty() {
            line += &format!("        blocked by: {}\n", n.blocked_by.join(", "));
        }
    }
    line
}

/// `rota status --fleet`.
pub fn fleet(page: &FleetPage, filter: &Filter) -> Result<String, String> {
    filter.check(page)?;
    let mut out = format!(
        "fleet {} at commit {}\n",
        page.fleet,
        &page.commit[..page.commit.len().min(12)]
    );
    if !page.overdue.is_empty() {
        out += &format!(
            "overdue: {} pool{} on images past their channel's maxAge (rota status --fleet --overdue)\n",
            page.overdue.len(),
            if page.overdue.len() == 1 { "" } else { "s" }
        );
    }
    let shown = filter.apply(page);
    for w in &shown.waves {
        // The wave's place in the whole fleet, whatever the filter left out.
        let i = page
            .waves
            .iter()
            .position(|x| x.name == w.name)
            .unwrap_or(0);
        let clusters = &w.clusters;
        out += &wave_header(i, w, w.on_target.to_string(), w.total.to_string());
        for c in clusters {
            out += &format!("  {} {:<20} {}\n", mark(&c.state), c.name, c.description);
            for p in &c.pools {
                out += &pool_line(p, page.now);
                // Where an auditor reads what ran on the pool's nodes (the image ledger).
                out += &format!(
                    "        nodes: {}\n",
                    crate::ledger::audit_command(&c.name, &p.name)
                );
            }
        }
    }
    Ok(out)
}

/// What `rota status --fleet --overdue` found: its text, how many pools are overdue, and
/// whether it could judge any pool at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverdueReport {
    pub text: String,
    pub overdue: usize,
    /// Pools on a channel with a `maxAge` whose age it could judge; 0 with pools to judge
    /// means the answer is unknown, not "on time".
    pub judged: usize,
    pub unjudged: usize,
}

/// `rota status --fleet --overdue`: the pools past their channel's `maxAge`, oldest
/// release first, with how long ago their deadline passed; then the pools it cannot judge
/// (no report yet, no `released` date), each named, so that "none overdue" is never said
/// of pools nobody could look at.
pub fn overdue(page: &FleetPage, filter: &Filter) -> Result<OverdueReport, String> {
    filter.check(page)?;
    let shown = filter.apply(page);
    let rows: Vec<_> = shown.overdue.iter().collect();
    let unjudged = &shown.unjudged;
    let aged = shown
        .waves
        .iter()
        .flat_map(|w| &w.clusters)
        .flat_map(|c| &c.pools)
        .filter(|p| page.max_age_channels.contains(&p.channel))
        .count();
    let judged = aged.saturating_sub(unjudged.len());
    let mut out = String::new();
    if rows.is_empty() && judged == 0 {
        out += if aged == 0 {
            "no pool follows a channel with a maxAge: nothing to judge\n"
        } else {
            "no pool could be judged against its channel's maxAge\n"
        };
    } else if rows.is_empty() {
        out += &format!(
            "none of the {} judged runs an image older than its channel's maxAge\n",
            plural(judged, "pool")
        );
    } else {
        out += &format!(
            "{} pool{} past the patch deadline (maxAge), the oldest image first:\n",
            rows.len(),
            if rows.len() == 1 { "" } else { "s" }
        );
    }
    let n = rows.len();
    for o in rows {
        out += &format!(
            "  {}/{}  {}@{}  released {} ({} ago), maxAge {}, overdue for {}\n",
            o.cluster,
            o.pool,
            o.channel,
            o.version,
            o.released.format("%Y-%m-%d %H:%M UTC"),
            span(o.released, page.now),
            o.max_age,
            span(o.due, page.now),
        );
    }
    if !unjudged.is_empty() {
        out += &format!(
            "{} could not be judged (no age known):\n",
            plural(unjudged.len(), "pool")
        );
        for u in unjudged.iter().take(UNJUDGED_LISTED) {
            out += &format!("  {}/{}  {}: {}\n", u.cluster, u.pool, u.channel, u.why);
        }
        if unjudged.len() > UNJUDGED_LISTED {
            out += &format!(
                "  and {} more (rota status --fleet --format json lists them: unjudged)\n",
                count(unjudged.len() - UNJUDGED_LISTED)
            );
        }
    }
    Ok(OverdueReport {
        text: out,
        overdue: n,
        judged,
        unjudged: unjudged.len(),
    })
}

/// Pools `--overdue` names one by one among those it cannot judge; past that, a count.
const UNJUDGED_LISTED: usize = 20;

/// `10,000`: counts a reader takes in at a glance.
pub fn count(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// `3 pools`, `1 pool`.
pub fn plural(n: usize, one: &str) -> String {
    format!("{} {one}{}", count(n), if n == 1 { "" } else { "s" })
}

/// How many exceptions of each kind `rota status --fleet` lists before it names the command
/// that lists them all.
pub const EXCEPTIONS_LISTED: usize = 10;

/// `rota status --fleet` on a fleet past [`LIST_ALL_UP_TO_POOLS`]: per wave, the summary
/// (clusters by state, pools by phase, versions in force and their shares, what holds the
/// wave), then the exceptions, each kind cut at [`EXCEPTIONS_LISTED`] with the command that
/// lists them all, then how to see the rest.
pub fn at_size(page: &FleetPage, summary: &FleetSummary) -> String {
    let mut out = format!(
        "fleet {} at commit {}: {} and {} in {}\n",
        page.fleet,
        &page.commit[..page.commit.len().min(12)],
        plural(summary.clusters, "cluster"),
        plural(summary.pools, "pool"),
        plural(page.waves.len(), "wave"),
    );
    if !page.overdue.is_empty() {
        out += &format!(
            "overdue: {} on images past their channel's maxAge (rota status --fleet --overdue)\n",
            plural(page.overdue.len(), "pool"),
        );
    }
    for (i, (w, s)) in page.waves.iter().zip(&summary.waves).enumerate() {
        out += &wave_header(i, w, count(w.on_target as usize), count(w.total as usize));
        let states: Vec<String> = s
            .states_by_attention()
            .into_iter()
            .map(|(st, n)| {
                let st = if st == "none" { "no report" } else { st };
                format!("{} {st}", count(n))
            })
            .collect();
        out += &format!(
            "  {:<9}{}: {}\n",
            "clusters",
            count(s.clusters),
            states.join(" · ")
        );
        let phases: Vec<String> = s
            .phases
            .iter()
            .map(|p| format!("{} {}", count(p.pools), p.phase.label()))
            .collect();
        out += &format!(
            "  {:<9}{}: {}\n",
            "pools",
            count(s.pools),
            phases.join(" · ")
        );
        for ch in &s.versions {
            let shares: Vec<String> = ch
                .versions
                .iter()
                .map(|v| {
                    let pct = v.pools as f64 * 100.0 / ch.pools.max(1) as f64;
                    let name = v.version.as_deref().unwrap_or("none recorded");
                    let target = if v.version.is_some() && v.version == ch.target {
                        " (target)"
                    } else {
                        ""
                    };
                    format!("{name}{target} {pct:.0}% ({})", count(v.pools))
                })
                .collect();
            out += &format!("  {:<9}{}\n", ch.channel, shares.join(" · "));
        }
        for h in s.holds.iter().take(3) {
            out += &format!(
                "  {:<9}{} ({}): {}\n",
                "held",
                plural(h.pools, "pool"),
                h.kind,
                h.text
            );
        }
        if s.holds.len() > 3 {
            let rest: usize = s.holds[3..].iter().map(|h| h.pools).sum();
            out += &format!(
                "  {:<9}{} held otherwise (rota status --fleet --wave {} --state held)\n",
                "",
                plural(rest, "pool"),
                w.name
            );
        }
    }
    let n = |k: ExceptionKind| summary.exception_counts.get(&k).copied().unwrap_or(0);
    if summary.exceptions.is_empty() {
        out += "\nno exceptions: nothing failing, halted, held too long or silent\n";
    } else {
        let counts: Vec<String> = ExceptionKind::ALL
            .iter()
            .filter(|k| n(**k) > 0)
            .map(|k| format!("{} {}", count(n(*k)), k.label()))
            .collect();
        out += &format!("\nexceptions: {}\n", counts.join(" · "));
        for kind in ExceptionKind::ALL {
            let of_kind = summary.exceptions.iter().filter(|e| e.kind == kind);
            for e in of_kind.take(EXCEPTIONS_LISTED) {
                let at = match &e.pool {
                    Some(p) => format!("{}/{p}", e.cluster),
                    None => e.cluster.clone(),
                };
                out += &format!("  {:<14}{:<10} {at}: {}\n", kind.label(), e.wave, e.text);
            }
            if n(kind) > EXCEPTIONS_LISTED {
                out += &format!(
                    "  {:<14}and {} more (rota status --fleet --exception {})\n",
                    "",
                    count(n(kind) - EXCEPTIONS_LISTED),
                    kind.key()
                );
            }
        }
    }
    out += "\nevery cluster and pool: rota status --fleet --all; or narrow with --wave, --cluster, --state, --exception, --version, --label KEY=VALUE\n";
    out
}

/// `rota where CHANNEL@VERSION`.
pub fn where_is(page: &FleetPage, channel: &str, version: &str) -> Result<String, String> {
    known_version(page, channel, version)?;
    let waves = pools_following(page, channel);
    if waves.is_empty() {
        let mut known: Vec<&str> = page.channels.iter().map(|c| c.channel.as_str()).collect();
        known.dedup();
        return Err(format!(
            "no pool follows channel {channel:?}; the fleet's channels: {}",
            known.join(", ")
        ));
    }
    let mut out = format!(
        "{channel}@{version} in fleet {} at commit {}\n",
        page.fleet,
        &page.commit[..page.commit.len().min(12)]
    );
    if let Some(row) = page
        .channels
        .iter()
        .find(|c| c.channel == channel)
        .and_then(|c| c.versions.iter().find(|v| v.version == version))
    {
        for s in &row.waves {
            let what = match (s.completed_at, s.soaked_at) {
                (Some(_), Some(soaked)) if s.soaking => format!(
                    "completed, soaking ({} left)",
                    super::html::left(page.now, soaked)
                ),
                (Some(at), _) => format!("completed {}", at.format("%Y-%m-%d %H:%M UTC")),
                _ if s.completed > 0 => format!("{}/{} pools completed", s.completed, s.pools),
                _ if s.pinned => "pinned, rolling".to_string(),
                _ => "not taken".to_string(),
            };
            out += &format!("  wave {:<12} {what}\n", s.wave);
            for g in &s.gate_failures {
                out += &format!("    ✗ {g}\n");
            }
        }
    } else {
        out += "  no wave pins or completed this version\n";
    }
    for (w, pools) in waves {
        out += &format!("\nwave {}\n", w.name);
        for p in pools {
            out += &format!("  {}/{}: {}", p.cluster, p.name, relation(p, version));
            if let Some((a, b)) = p.nodes.filter(|_| p.target == version) {
                out += &format!(" {} {}", bar(a, b, 20), p.progress_text());
            }
            out += "\n";
            if let Some(h) = p.hold.as_ref().filter(|_| p.target == version) {
                let left = h
                    .until
                    .map(|u| format!(" ({} left)", super::html::left(page.now, u)))
                    .unwrap_or_default();
                out += &format!("      held ({}): {}{left}\n", h.kind, h.text);
            }
        }
    }
    Ok(out)
}
