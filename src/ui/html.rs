//! The fleet page as HTML, rendered on the server from the view model: the page reads fine
//! without JavaScript, and the small embedded script only swaps in fresh fragments and ticks
//! the countdowns. Pure: strings in, strings out. Every state is a word as well as a colour
//! and an icon, so the page reads the same without colour; everything that leads somewhere
//! is a real link, so it is keyboard navigable in document order.

use chrono::{DateTime, Utc};

use super::load::{CommitLine, CommitView};
use super::model::{FleetPage, Hold, OverduePool, Phase, PoolPanel, WavePanel, WaveStep};
use rota_core::rotate::stop::{MovedBy, StopNote};

/// Escapes text for HTML element content and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

pub(super) fn short(id: &str) -> &str {
    &id[..id.len().min(10)]
}

pub(super) fn time(t: DateTime<Utc>) -> String {
    format!(
        r#"<time datetime="{}">{}</time>"#,
        t.to_rfc3339(),
        t.format("%Y-%m-%d %H:%M UTC")
    )
}

/// `1h05m`, `12m30s`: how long until `until`.
pub fn left(now: DateTime<Utc>, until: DateTime<Utc>) -> String {
    let s = (until - now).num_seconds().max(0);
    let (h, m, s) = (s / 3600, s % 3600 / 60, s % 60);
    if h > 0 {
        format!("{h}h{m:02}m")
    } else if m > 0 {
        format!("{m}m{s:02}s")
    } else {
        format!("{s}s")
    }
}

/// The icon and the word of a commit-status state.
pub(super) fn state_badge(state: &str) -> String {
    let (icon, word) = match state {
        "success" => ("✓", "success"),
        "pending" => ("●", "pending"),
        "failure" => ("✗", "failure"),
        "error" => ("!", "error"),
        _ => ("○", "no status"),
    };
    format!(
        r#"<span class="badge s-{cls}"><span aria-hidden="true">{icon}</span> {word}</span>"#,
        cls = esc(state)
    )
}

pub(super) fn phase_badge(p: Phase) -> String {
    let cls = match p {
        Phase::Done | Phase::Ignored => "success",
        Phase::Failed => "failure",
        Phase::Paused | Phase::Held => "held",
        Phase::Unknown => "none",
        _ => "pending",
    };
    format!(
        r#"<span class="badge s-{cls}" data-phase="{p}">{p}</span>"#,
        p = p.label()
    )
}

/// A progress bar that says its value in words too (`batch 3/8 · 14/40 nodes`).
fn bar(on: u32, total: u32, label: &str) -> String {
    let pct = if total == 0 {
        0
    } else {
        (u64::from(on) * 100 / u64::from(total)).min(100)
    };
    format!(
        r#"<div class="progress"><div class="track" role="progressbar" aria-valuemin="0" aria-valuemax="{total}" aria-valuenow="{on}" aria-label="{l}"><div class="fill" style="width:{pct}%"></div></div><span class="ptext">{l}</span></div>"#,
        l = esc(label)
    )
}

fn hold_html(h: &Hold, now: DateTime<Utc>) -> String {
    let kind = match h.kind.as_str() {
        "soak" => "soak",
        "gate" => "gate failure",
        "window" => "window",
        "paused" => "paused",
        _ => "guard",
    };
    let countdown = h.until.map_or(String::new(), |u| {
        format!(
            r#" <span class="countdown" data-until="{}">{} left</span>"#,
            u.to_rfc3339(),
            left(now, u)
        )
    });
    format!(
        r#"<div class="hold" data-hold="{k}"><strong>Held ({kind}):</strong> {t}{countdown}</div>"#,
        k = esc(&h.kind),
        t = esc(&h.text)
    )
}

/// What a stopped pool needs: who moves it on, the next step, what holds it; the cause in
/// full as the block's title (the status description is cut at 140 characters).
fn stop_html(n: &StopNote) -> String {
    let (by, who) = match n.by {
        MovedBy::Person => ("person", "Needs a person"),
        MovedBy::Rota => ("rota", "Waits, nothing to do"),
    };
    let next = n.next.strip_prefix("nothing to do: ").unwrap_or(&n.next);
    let blocked = if n.blocked_by.is_empty() {
        String::new()
    } else {
        format!(
            r#"<div class="blocked">Blocked by: {}</div>"#,
            esc(&n.blocked_by.join(", "))
        )
    };
    format!(
        r#"<div class="stop" data-by="{by}" data-reason="{r}" title="{cause}"><strong>{who} ({r}):</strong> <span class="next">{next}</span>{blocked}</div>"#,
        r = esc(&n.reason),
        cause = esc(&n.cause),
        next = esc(next),
    )
}

fn pool_row(p: &PoolPanel, now: DateTime<Utc>) -> String {
    let in_force = p.in_force.as_deref().unwrap_or("—");
    let moving = p.in_force.as_deref() != Some(p.target.as_str());
    let progress = match p.nodes {
        Some((a, b)) => bar(a, b, &p.progress_text()),
        None if p.phase == Phase::Done => bar(1, 1, "complete"),
        None => r#"<span class="muted">no progress reported</span>"#.to_string(),
    };
    let hold = p.hold.as_ref().map_or(String::new(), |h| hold_html(h, now));
    let stop = p.stop.as_deref().map_or(String::new(), stop_html);
    format!(
        r#"<tr class="pool" id="pool-{c}-{n}" data-pool="{c}/{n}" data-phase="{ph}">
<th scope="row" title="its nodes, from the image ledger: {audit}">{n}</th><td>{ch}</td><td class="ver">{inf}</td><td class="ver{mv}">{tg}</td>
<td>{progress}</td><td>{phase}{d}{hold}{stop}</td></tr>
"#,
        c = esc(&p.cluster),
        n = esc(&p.name),
        audit = esc(&crate::ledger::audit_command(&p.cluster, &p.name)),
        ph = p.phase.label(),
        ch = esc(&p.channel),
        inf = esc(in_force),
        mv = if moving { " moving" } else { "" },
        tg = if moving {
            format!(r#"<span aria-hidden="true">→ </span>{}"#, esc(&p.target))
        } else {
            esc(&p.target)
        },
        phase = phase_badge(p.phase),
        // A hold says it in words already; the raw status would repeat it.
        d = if p.hold.is_some() {
            String::new()
        } else {
            format!(r#"<div class="desc">{}</div>"#, esc(&p.description))
        },
    )
}

pub(super) fn wave_html(i: usize, w: &WavePanel, now: DateTime<Utc>) -> String {
    let pins: Vec<String> = w
        .pins
        .iter()
        .map(|(c, v)| format!("<code>{}@{}</code>", esc(c), esc(v)))
        .collect();
    let mut out = format!(
        r#"<section class="wave" id="wave-{name}" data-wave="{name}" aria-labelledby="wave-{name}-h">
<header><h3 id="wave-{name}-h"><span class="num">{n}</span> Wave {name}</h3>
<p class="meta">pins {pins} · soak {soak}</p>{bar}</header>
"#,
        n = i + 1,
        name = esc(&w.name),
        pins = if pins.is_empty() {
            "nothing".to_string()
        } else {
            pins.join(" ")
        },
        soak = esc(&w.soak),
        bar = bar(
            w.on_target,
            w.total,
            &format!("{}/{} nodes on target", w.on_target, w.total)
        ),
    );
    if w.clusters.is_empty() {
        out += r#"<p class="muted">no clusters in this wave</p>"#;
    }
    for c in &w.clusters {
        out += &format!(
            r#"<div class="cluster" id="cluster-{n}" data-cluster="{n}">
<h4>{n} {b}</h4><p class="desc">{d}</p><p class="ledger muted" title="every node's life on the fleet's images, from the image ledger">nodes: <code>rota audit --cluster {n}</code> (one pool: <code>--pool POOL</code>, on each pool's name)</p>
<table><thead><tr><th scope="col">Pool</th><th scope="col">Channel</th><th scope="col">In force</th><th scope="col">Target</th><th scope="col">Progress</th><th scope="col">Phase</th></tr></thead><tbody>
"#,
            n = esc(&c.name),
            b = state_badge(&c.state),
            d = esc(&c.description),
        );
        for p in &c.pools {
            out += &pool_row(p, now);
        }
        out += "</tbody></table></div>\n";
    }
    out + "</section>\n"
}

fn step_html(s: &WaveStep, now: DateTime<Utc>) -> String {
    let mut parts = Vec::new();
    let mut cls = "none";
    if let Some(at) = s.completed_at {
        cls = "success";
        parts.push(format!("✓ completed {}", time(at)));
        if let Some(soaked) = s.soaked_at {
            if s.soaking {
                cls = "pending";
                parts.push(format!(
                    r#"soaking, <span class="countdown" data-until="{}">{} left</span>"#,
                    soaked.to_rfc3339(),
                    left(now, soaked)
                ));
            } else {
                parts.push(format!("soaked {}", time(soaked)));
            }
        }
    } else if s.completed > 0 {
        cls = "pending";
        parts.push(format!(
            "● {}/{} pools done, first {}",
            s.completed,
            s.pools,
            s.first_completion.map(time).unwrap_or_default()
        ));
    } else if s.pinned {
        cls = "pending";
        parts.push(format!("● pinned, 0/{} pools done", s.pools));
    } else {
        parts.push(r#"<span class="muted">not taken</span>"#.to_string());
    }
    for g in &s.gate_failures {
        cls = "failure";
        parts.push(format!("✗ {} (rolled back or stopped)", esc(g)));
    }
    format!(
        r#"<td class="step s-{cls}" data-wave="{w}">{}</td>"#,
        parts.join("<br>"),
        w = esc(&s.wave)
    )
}

/// The pools past their channel's patch deadline, first on the page (nothing when none).
pub(super) fn overdue_html(page: &FleetPage) -> String {
    overdue_table(&page.overdue, "")
}

/// The overdue pools `rows`, with `more` said after the count (when the list is cut).
pub(super) fn overdue_table(rows: &[OverduePool], more: &str) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut out = format!(
        r#"<h2 id="overdue-h">Overdue images</h2><p class="error">{} pool{} on images released longer ago than their channel's maxAge, the oldest first{more}.</p><table class="overdue"><thead><tr><th scope="col">Pool</th><th scope="col">Version</th><th scope="col">Released</th><th scope="col">maxAge</th><th scope="col">Due</th></tr></thead><tbody>"#,
        rows.len(),
        if rows.len() == 1 { "" } else { "s" }
    );
    for o in rows {
        out += &format!(
            r#"<tr data-cluster="{c}"><td>{c}/{p}</td><td>{ch}@{v}</td><td>{r}</td><td>{m}</td><td>{d}</td></tr>"#,
            c = esc(&o.cluster),
            p = esc(&o.pool),
            ch = esc(&o.channel),
            v = esc(&o.version),
            r = time(o.released),
            m = esc(&o.max_age),
            d = time(o.due),
        );
    }
    out + "</tbody></table>\n"
}

/// The live part of the page (swapped in by the script on every refresh): every wave with
/// every cluster and pool, for a fleet small enough to read whole.
pub fn fragment(page: &FleetPage, recent: &[CommitLine]) -> String {
    let mut out = updated_html(page, "");
    out += &overdue_html(page);
    out += r#"<h2 id="waves-h">Waves</h2>
"#;
    for (i, w) in page.waves.iter().enumerate() {
        out += &wave_html(i, w, page.now);
    }
    out += &timeline_html(page);
    out + &commits_html(recent)
}

/// `Fleet F at commit C · as of T`, then `extra`.
pub(super) fn updated_html(page: &FleetPage, extra: &str) -> String {
    format!(
        r#"<p class="updated">Fleet <strong>{f}</strong> at commit <a href="/commit/{c}"><code>{s}</code></a> · as of {t}{extra}</p>
"#,
        f = esc(&page.fleet),
        c = esc(&page.commit),
        s = esc(short(&page.commit)),
        t = time(page.now),
    )
}

/// Per channel, each version's progress through the waves.
pub(super) fn timeline_html(page: &FleetPage) -> String {
    let mut out = r#"<h2 id="timeline-h">Version timeline</h2>"#.to_string();
    for ch in &page.channels {
        out += &format!(
            r#"<section class="timeline" data-channel="{c}"><h3>Channel {c}</h3><table><thead><tr><th scope="col">Version</th>"#,
            c = esc(&ch.channel)
        );
        if let Some(row) = ch.versions.first() {
            for s in &row.waves {
                out += &format!(r#"<th scope="col">{}</th>"#, esc(&s.wave));
            }
        }
        out += "</tr></thead><tbody>";
        for row in &ch.versions {
            out += &format!(
                r#"<tr data-version="{v}"><th scope="row"><code>{v}</code></th>"#,
                v = esc(&row.version)
            );
            for s in &row.waves {
                out += &step_html(s, page.now);
            }
            out += "</tr>";
        }
        out += "</tbody></table></section>\n";
    }
    out
}

/// The newest commits with their combined status.
pub(super) fn commits_html(recent: &[CommitLine]) -> String {
    let mut out = r#"<h2 id="commits-h">Commits</h2><table class="commits"><thead><tr><th scope="col">Commit</th><th scope="col">Statuses</th><th scope="col">Subject</th><th scope="col">Author</th><th scope="col">Time</th></tr></thead><tbody>"#.to_string();
    for c in recent {
        out += &format!(
            r#"<tr><td><a href="/commit/{id}"><code>{s}</code></a></td><td>{b} {n}</td><td>{subj}</td><td>{a}</td><td>{t}</td></tr>"#,
            id = esc(&c.id),
            s = esc(short(&c.id)),
            b = state_badge(c.combined),
            n = if c.statuses == 0 {
                String::new()
            } else {
                format!("({})", c.statuses)
            },
            subj = esc(&c.subject),
            a = esc(&c.author),
            t = time(c.time),
        );
    }
    out + "</tbody></table>\n"
}

/// The page around `body`. `live`: the page refreshes itself from `/fragment`, with the
/// `ETag` of what it was rendered from (the script's first poll sends it back), if any.
fn shell(title: &str, body: &str, live: Option<&str>) -> String {
    format!(
        r##"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{t}</title><link rel="stylesheet" href="/assets/rota.css"><script src="/assets/rota.js" defer></script></head>
<body><a class="skip" href="#main">Skip to content</a>
<header class="top"><div class="brand"><a href="/">rota</a> <span>fleet rotation</span></div>
<nav aria-label="Sections"><a href="/#waves-h">Waves</a><a href="/#timeline-h">Timeline</a><a href="/#commits-h">Commits</a><a href="/api/fleet">JSON</a></nav>
{live}</header>
<main id="main" tabindex="-1"{attr}>{body}</main>
<footer>Read-only view of the fleet repo and the agents' statuses (git notes). Desired state is changed in git.</footer>
</body></html>
"##,
        t = esc(title),
        live = if live.is_some() {
            r#"<p class="live" role="status" aria-live="polite"><span class="dot" aria-hidden="true"></span> <span id="live-text">live</span></p>"#
        } else {
            ""
        },
        attr = match live {
            None => String::new(),
            Some("") => r#" data-live="/fragment""#.to_string(),
            Some(etag) => format!(r#" data-live="/fragment" data-etag="{}""#, esc(etag)),
        },
    )
}

/// The whole fleet page.
pub fn page(page: &FleetPage, recent: &[CommitLine]) -> String {
    live_page(&page.fleet, &fragment(page, recent), "")
}

/// The fleet page around a rendered fragment (`etag`: what it was rendered from, or empty).
pub fn live_page(fleet: &str, fragment: &str, etag: &str) -> String {
    shell(&format!("{fleet} · rota"), fragment, Some(etag))
}

/// One commit and its statuses, as a forge shows them.
pub fn commit_page(c: &CommitView) -> String {
    let mut body = format!(
        r#"<h2>Commit <code class="id">{id}</code></h2>
<p class="subject">{s}</p><p class="meta">{a} · {t} · combined {b}</p>
<table class="statuses"><thead><tr><th scope="col">State</th><th scope="col">Context</th><th scope="col">Description</th><th scope="col">Updated</th></tr></thead><tbody>
"#,
        id = esc(&c.id),
        s = esc(&c.subject),
        a = esc(&c.author),
        t = time(c.time),
        b = state_badge(c.combined()),
    );
    if c.statuses.is_empty() {
        body += r#"<tr><td colspan="4" class="muted">no agent recorded a status on this commit</td></tr>"#;
    }
    for s in &c.statuses {
        let desc = match &s.target_url {
            Some(u) if u.starts_with("https://") || u.starts_with("http://") => {
                // Another site: nothing of the page goes with the click.
                format!(
                    r#"<a href="{}" rel="noopener noreferrer">{}</a>"#,
                    esc(u),
                    esc(&s.description)
                )
            }
            _ => esc(&s.description),
        };
        body += &format!(
            r#"<tr data-context="{c}"><td>{b}</td><td><code>{c}</code></td><td>{desc}</td><td>{t}</td></tr>
"#,
            c = esc(&s.context),
            b = state_badge(&s.state),
            t = time(s.updated_at),
        );
    }
    body += "</tbody></table>\n";
    shell(&format!("commit {} · rota", short(&c.id)), &body, None)
}

/// A page that says what went wrong (bad revision, invalid fleet at the commit).
pub fn error_page(message: &str) -> String {
    shell(
        "error · rota",
        &format!(
            r#"<h2>Cannot show this</h2><p class="error" role="alert">{}</p>"#,
            esc(message)
        ),
        None,
    )
}
