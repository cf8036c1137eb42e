//! The fleet view in a terminal: `rota status --fleet` (waves in order, each cluster's pools
//! with progress bars and holds) and `rota where CHANNEL@VERSION`. Pure: the view model in,
//! lines out; the same model as the web page.

use chrono::{DateTime, Utc};

use super::model::{FleetPage, PoolPanel, pools_following, relation};

/// Which part of the fleet to show.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub wave: Option<String>,
    pub cluster: Option<String>,
}

impl Filter {
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
        Ok(())
    }
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
        let who = match n.by {
            rota_core::rotate::stop::MovedBy::Person => "needs a person",
            rota_core::rotate::stop::MovedBy::Rota => "waits",
        };
        line += &format!("        {who} ({}): {}\n", n.reason, n.next);
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
    for (i, w) in page.waves.iter().enumerate() {
        if filter.wave.as_ref().is_some_and(|n| n != &w.name) {
            continue;
        }
        let clusters: Vec<_> = w
            .clusters
            .iter()
            .filter(|c| filter.cluster.as_ref().is_none_or(|n| n == &c.name))
            .collect();
        if clusters.is_empty() && filter.cluster.is_some() {
            continue;
        }
        let pins: Vec<String> = w.pins.iter().map(|(c, v)| format!("{c}@{v}")).collect();
        out += &format!(
            "\nwave {} {}  pins {}  soak {}  {} {}/{} nodes on target\n",
            i + 1,
            w.name,
            if pins.is_empty() {
                "nothing".into()
            } else {
                pins.join(" ")
            },
            w.soak,
            bar(w.on_target, w.total, 20),
            w.on_target,
            w.total
        );
        for c in clusters {
            out += &format!("  {} {:<20} {}\n", mark(&c.state), c.name, c.description);
            for p in &c.pools {
                out += &pool_line(p, page.now);
            }
        }
    }
    Ok(out)
}

/// `rota status --fleet --overdue`: the pools past their channel's `maxAge`, oldest
/// release first, with how long ago their deadline passed; and how many there are.
pub fn overdue(page: &FleetPage, filter: &Filter) -> Result<(String, usize), String> {
    filter.check(page)?;
    let wave_of: std::collections::BTreeMap<&str, &str> = page
        .waves
        .iter()
        .flat_map(|w| {
            w.clusters
                .iter()
                .map(move |c| (c.name.as_str(), w.name.as_str()))
        })
        .collect();
    let rows: Vec<_> = page
        .overdue
        .iter()
        .filter(|o| {
            filter
                .wave
                .as_ref()
                .is_none_or(|n| wave_of.get(o.cluster.as_str()) == Some(&n.as_str()))
                && filter.cluster.as_ref().is_none_or(|n| n == &o.cluster)
        })
        .collect();
    if rows.is_empty() {
        return Ok((
            "no pool runs an image older than its channel's maxAge\n".into(),
            0,
        ));
    }
    let n = rows.len();
    let mut out = format!(
        "{} pool{} past the patch deadline (maxAge), the oldest image first:\n",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" }
    );
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
    Ok((out, n))
}

/// `23d 4h`, `5h 10m`, `4m`: from `from` to `to`, for spans of days.
pub fn span(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    let secs = (to - from).num_seconds().max(0);
    let (d, h, m) = (secs / 86_400, secs % 86_400 / 3_600, secs % 3_600 / 60);
    match (d, h) {
        (0, 0) => format!("{m}m"),
        (0, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// `rota where CHANNEL@VERSION`.
pub fn where_is(page: &FleetPage, channel: &str, version: &str) -> Result<String, String> {
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
                (Some(_), Some(soaked)) if soaked > page.now => format!(
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
