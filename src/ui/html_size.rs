//! The fleet page at fleet size, and any filtered view of it: what needs attention first,
//! then a page of clusters. In order: the filters (a plain GET form, so a view is a link), the
//! overdue images, per wave the summary (clusters by state, pools by phase, versions and
//! their shares, what holds the wave; each count a link to its pools), the exceptions
//! (failing, halted, held too long, silent; each kind cut with a link to all of it), then
//! [`PAGE_CLUSTERS`] clusters of the selection in wave order with links to the other pages,
//! then the version timeline and the commits. Pure: the view model, its summary and the
//! query in, HTML out; its size follows the page of clusters shown, not the fleet.

use super::html::{
    commits_html, esc, overdue_table, phase_badge, state_badge, timeline_html, updated_html,
    wave_html,
};
use super::load::CommitLine;
use super::model::{FleetPage, Phase, WavePanel};
use super::query::{PAGE_CLUSTERS, Query, href_of};
use super::summary::{ExceptionKind, FleetSummary};
use super::text::{Filter, count, plural};

/// Exceptions of each kind listed before the link to all of them.
pub const EXCEPTIONS_LISTED: usize = 20;
/// Overdue pools listed before the link to the rest.
const OVERDUE_LISTED: usize = 20;

fn link(href: &str, text: &str) -> String {
    format!(r#"<a href="{}">{}</a>"#, esc(href), text)
}

/// The filter form: every field a query parameter, so submitting it makes a shareable link.
fn form(page: &FleetPage, q: &Query) -> String {
    let f = &q.filter;
    let mut waves = String::from(r#"<option value="">every wave</option>"#);
    for w in &page.waves {
        waves += &format!(
            r#"<option value="{n}"{sel}>{n}</option>"#,
            n = esc(&w.name),
            sel = if f.wave.as_deref() == Some(w.name.as_str()) {
                " selected"
            } else {
                ""
            }
        );
    }
    let mut states = String::from(r#"<option value="">any state</option>"#);
    for p in Phase::ALL {
        states += &format!(
            r#"<option value="{k}"{sel}>{l}</option>"#,
            k = p.key(),
            l = p.label(),
            sel = if f.state == Some(p) { " selected" } else { "" }
        );
    }
    let label = f
        .labels
        .first()
        .map(|(k, v)| format!("{k}={v}"))
        .unwrap_or_default();
    format!(
        r#"<form class="filters" role="search" method="get" action="/" aria-label="Filter the fleet">
<label>Wave <select name="wave">{waves}</select></label>
<label>Cluster <input name="cluster" value="{c}" size="14" autocomplete="off"></label>
<label>State <select name="state">{states}</select></label>
<label>Version <input name="version" value="{v}" size="18" placeholder="channel@version" autocomplete="off"></label>
<label>Label <input name="label" value="{l}" size="16" placeholder="key=value" autocomplete="off"></label>
<button type="submit">Show</button> <a href="/">Whole fleet</a>
</form>
"#,
        c = esc(f.cluster.as_deref().unwrap_or("")),
        v = esc(f.version.as_deref().unwrap_or("")),
        l = esc(&label),
    )
}

/// Narrowing a filter by one more criterion: the links of the summary's counts.
fn narrowed(base: &Filter, edit: impl FnOnce(&mut Filter)) -> String {
    let mut f = base.clone();
    edit(&mut f);
    href_of(f)
}

fn summary_html(page: &FleetPage, s: &FleetSummary, q: &Query) -> String {
    let mut out = format!(
        r#"<h2 id="summary-h">Summary</h2><p class="meta">{} and {} in {}</p>
<table class="summary"><thead><tr><th scope="col">Wave</th><th scope="col">Clusters</th><th scope="col">Pools by phase</th><th scope="col">Versions in force</th><th scope="col">Held by</th></tr></thead><tbody>
"#,
        plural(s.clusters, "cluster"),
        plural(s.pools, "pool"),
        plural(s.waves.len(), "wave"),
    );
    for (w, ws) in page.waves.iter().zip(&s.waves) {
        let of_wave = |edit: &dyn Fn(&mut Filter)| {
            narrowed(&q.filter, |f| {
                f.wave = Some(w.name.clone());
                edit(f)
            })
        };
        let states: Vec<String> = ws
            .states_by_attention()
            .into_iter()
            .map(|(st, n)| format!("{} {}", count(n), state_badge(st)))
            .collect();
        let phases: Vec<String> = ws
            .phases
            .iter()
            .map(|p| {
                let phase = p.phase;
                format!(
                    "{} {}",
                    link(&of_wave(&|f| f.state = Some(phase)), &count(p.pools)),
                    phase_badge(p.phase)
                )
            })
            .collect();
        let mut versions = Vec::new();
        for ch in &ws.versions {
            for v in &ch.versions {
                let pct = v.pools as f64 * 100.0 / ch.pools.max(1) as f64;
                let (name, href) = match &v.version {
                    Some(ver) => {
                        let cv = format!("{}@{ver}", ch.channel);
                        (
                            format!("<code>{}</code>", esc(&cv)),
                            Some(of_wave(&|f| f.version = Some(cv.clone()))),
                        )
                    }
                    None => (format!("{} none recorded", esc(&ch.channel)), None),
                };
                let target = if v.version.is_some() && v.version == ch.target {
                    " (target)"
                } else {
                    ""
                };
                let share = format!("{pct:.0}% ({})", count(v.pools));
                versions.push(match href {
                    Some(h) => format!("{name}{target} {}", link(&h, &share)),
                    None => format!("{name} {share}"),
                });
            }
        }
        let holds: Vec<String> = ws
            .holds
            .iter()
            .take(3)
            .map(|h| {
                format!(
                    "{} ({}): {}",
                    plural(h.pools, "pool"),
                    esc(&h.kind),
                    esc(&h.text)
                )
            })
            .collect();
        let more_holds = ws.holds.iter().skip(3).map(|h| h.pools).sum::<usize>();
        out += &format!(
            r#"<tr data-wave="{n}"><th scope="row">{wl}</th><td>{c}<br>{states}</td><td>{phases}</td><td>{versions}</td><td>{holds}{more}</td></tr>
"#,
            n = esc(&w.name),
            wl = link(&of_wave(&|_| {}), &esc(&w.name)),
            c = plural(ws.clusters, "cluster"),
            states = states.join(" "),
            phases = phases.join("<br>"),
            versions = versions.join("<br>"),
            holds = if holds.is_empty() {
                r#"<span class="muted">nothing held</span>"#.to_string()
            } else {
                holds.join("<br>")
            },
            more = if more_holds > 0 {
                format!(
                    "<br>{}",
                    link(
                        &of_wave(&|f| f.state = Some(Phase::Held)),
                        &format!("{} held otherwise", plural(more_holds, "pool"))
                    )
                )
            } else {
                String::new()
            },
        );
    }
    out + "</tbody></table>\n"
}

fn exceptions_html(s: &FleetSummary, q: &Query) -> String {
    let n = |k: ExceptionKind| s.exception_counts.get(&k).copied().unwrap_or(0);
    let total: usize = ExceptionKind::ALL.iter().map(|&k| n(k)).sum();
    let mut out = String::from(r#"<h2 id="exceptions-h">Exceptions</h2>"#);
    if total == 0 {
        return out + r#"<p class="muted">Nothing failing, halted, held too long or silent.</p>"#;
    }
    let counts: Vec<String> = ExceptionKind::ALL
        .iter()
        .filter(|&&k| n(k) > 0)
        .map(|&k| format!("{} {}", count(n(k)), k.label()))
        .collect();
    out += &format!(r#"<p class="meta">{}</p>"#, counts.join(" · "));
    for kind in ExceptionKind::ALL {
        let all: Vec<_> = s.exceptions.iter().filter(|e| e.kind == kind).collect();
        if all.is_empty() {
            continue;
        }
        out += &format!(
            r#"<h3 class="exc-h" data-kind="{k:?}">{l} ({n})</h3><ul class="exceptions" data-kind="{k:?}">"#,
            k = kind,
            l = esc(kind.label()),
            n = count(all.len()),
        );
        for e in all.iter().take(EXCEPTIONS_LISTED) {
            let at = narrowed(&q.filter, |f| f.cluster = Some(e.cluster.clone()));
            let who = match &e.pool {
                Some(p) => format!("{}/{}", esc(&e.cluster), esc(p)),
                None => esc(&e.cluster),
            };
            out += &format!(
                r#"<li data-cluster="{c}">{l} <span class="muted">wave {w}</span>: {t}</li>"#,
                c = esc(&e.cluster),
                l = link(&at, &who),
                w = esc(&e.wave),
                t = esc(&e.text),
            );
        }
        out += "</ul>";
        if all.len() > EXCEPTIONS_LISTED {
            out += &format!(
                r#"<p class="more">{} more: {}</p>"#,
                count(all.len() - EXCEPTIONS_LISTED),
                link(
                    &narrowed(&q.filter, |f| f.exception = Some(kind)),
                    &format!("every {} pool", esc(kind.label()))
                )
            );
        }
    }
    out + "\n"
}

/// The overdue images, cut at [`OVERDUE_LISTED`] (the count said is the whole list's).
fn overdue_cut(page: &FleetPage) -> String {
    let n = page.overdue.len();
    if n <= OVERDUE_LISTED {
        return overdue_table(&page.overdue, "");
    }
    overdue_table(
        &page.overdue[..OVERDUE_LISTED],
        &format!(
            " ({} of {} listed; <code>rota status --fleet --overdue</code> lists every one)",
            OVERDUE_LISTED,
            count(n)
        ),
    )
}

/// `Clusters 51–100 of 10,000 · page 2 of 200 · ‹ previous · next ›`.
fn pager(q: &Query, p: &PageOf) -> String {
    let PageOf {
        page,
        pages,
        first,
        last,
        total,
        ..
    } = *p;
    let mut parts = vec![if total == 0 {
        "No cluster matches".to_string()
    } else {
        format!(
            "Clusters {}–{} of {} · page {} of {}",
            count(first + 1),
            count(last),
            count(total),
            count(page),
            count(pages)
        )
    }];
    if page > 1 {
        parts.push(format!(
            r#"<a href="{}" rel="prev">‹ previous</a>"#,
            esc(&q.href(page - 1))
        ));
    }
    if page < pages {
        parts.push(format!(
            r#"<a href="{}" rel="next">next ›</a>"#,
            esc(&q.href(page + 1))
        ));
    }
    format!(
        r#"<nav class="pager" aria-label="Pages of clusters"><p>{}</p></nav>
"#,
        parts.join(" · ")
    )
}

/// One page of a selection's clusters.
#[derive(Debug)]
pub struct PageOf {
    /// The waves that have a cluster on the page, each with only those clusters.
    pub waves: Vec<WavePanel>,
    /// The page shown (the one asked for, clamped to the last), and how many there are.
    pub page: usize,
    pub pages: usize,
    /// The clusters shown: `first..last` of `total`, in wave order.
    pub first: usize,
    pub last: usize,
    pub total: usize,
}

/// The selection's clusters on `q.page` ([`PAGE_CLUSTERS`] a page, every one with `?all=1`).
pub fn page_of(selected: &FleetPage, q: &Query) -> PageOf {
    let total: usize = selected.waves.iter().map(|w| w.clusters.len()).sum();
    let pages = if q.all {
        1
    } else {
        total.div_ceil(PAGE_CLUSTERS).max(1)
    };
    let page = q.page.clamp(1, pages);
    let (first, last) = if q.all {
        (0, total)
    } else {
        (
            (page - 1) * PAGE_CLUSTERS,
            (page * PAGE_CLUSTERS).min(total),
        )
    };
    let mut waves = Vec::new();
    let mut at = 0;
    for w in &selected.waves {
        let n = w.clusters.len();
        let (from, to) = (first.max(at), last.min(at + n));
        if from < to {
            waves.push(WavePanel {
                clusters: w.clusters[from - at..to - at].to_vec(),
                ..w.clone_header()
            });
        }
        at += n;
    }
    PageOf {
        waves,
        page,
        pages,
        first,
        last,
        total,
    }
}

/// The fleet page's live part at size, or for a filter: `selected` is the part of `page` the
/// query selects, `summary` its summary.
pub fn fragment(
    page: &FleetPage,
    selected: &FleetPage,
    summary: &FleetSummary,
    q: &Query,
    recent: &[CommitLine],
) -> String {
    let mut out = updated_html(
        page,
        &format!(
            " · {} and {}",
            plural(page.waves.iter().map(|w| w.clusters.len()).sum(), "cluster"),
            plural(
                page.waves
                    .iter()
                    .flat_map(|w| &w.clusters)
                    .map(|c| c.pools.len())
                    .sum(),
                "pool"
            )
        ),
    );
    out += &form(page, q);
    if q.filter.narrowed() {
        out += &format!(
            r#"<p class="selection" role="status">Showing {} and {} of the fleet that match. <a href="/">Whole fleet</a></p>
"#,
            plural(summary.clusters, "cluster"),
            plural(summary.pools, "pool"),
        );
    }
    out += &overdue_cut(selected);
    out += &summary_html(selected, summary, q);
    out += &exceptions_html(summary, q);
    let shown = page_of(selected, q);
    out += r#"<h2 id="waves-h">Clusters</h2>"#;
    let pager = pager(q, &shown);
    out += &pager;
    // Waves keep their number in the fleet's order, whatever the page shows.
    for w in &shown.waves {
        let i = page
            .waves
            .iter()
            .position(|x| x.name == w.name)
            .unwrap_or(0);
        out += &wave_html(i, w, page.now);
    }
    if shown.total > 0 {
        out += &pager;
    }
    out += &timeline_html(page);
    out + &commits_html(recent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::model::ClusterPanel;

    /// Waves of `sizes[i]` clusters each (no pools: paging is by cluster).
    fn fleet(sizes: &[usize]) -> FleetPage {
        let mut n = 0;
        FleetPage {
            fleet: "acme".into(),
            commit: "abc".into(),
            now: chrono::Utc::now(),
            waves: sizes
                .iter()
                .enumerate()
                .map(|(i, &size)| WavePanel {
                    name: format!("w{i}"),
                    soak: "1h".into(),
                    pins: Default::default(),
                    clusters: (0..size)
                        .map(|_| {
                            n += 1;
                            ClusterPanel {
                                name: format!("c{n:03}"),
                                labels: Default::default(),
                                state: "success".into(),
                                description: String::new(),
                                pools: Vec::new(),
                            }
                        })
                        .collect(),
                    on_target: 0,
                    total: 0,
                })
                .collect(),
            channels: Vec::new(),
            overdue: Vec::new(),
            unjudged: Vec::new(),
            max_age_channels: Default::default(),
            declared: Default::default(),
        }
    }

    fn names(p: &PageOf) -> Vec<String> {
        p.waves
            .iter()
            .flat_map(|w| {
                w.clusters
                    .iter()
                    .map(move |c| format!("{}/{}", w.name, c.name))
            })
            .collect()
    }

    #[test]
    fn a_page_spans_waves_in_order_and_the_last_is_short() {
        // 30 + 40 + 45 = 115 clusters: pages of 50, 50 and 15.
        let f = fleet(&[30, 40, 45]);
        let q = |page| Query {
            page,
            ..Query::default()
        };
        let p1 = page_of(&f, &q(1));
        assert_eq!(
            (p1.page, p1.pages, p1.first, p1.last, p1.total),
            (1, 3, 0, 50, 115)
        );
        let n = names(&p1);
        assert_eq!(n.first().unwrap(), "w0/c001");
        assert_eq!(
            n.last().unwrap(),
            "w1/c050",
            "page 1 ends inside the second wave"
        );
        let p2 = page_of(&f, &q(2));
        assert_eq!(names(&p2).first().unwrap(), "w1/c051");
        assert_eq!(p2.waves.len(), 2, "the rest of w1, the start of w2");
        let p3 = page_of(&f, &q(3));
        assert_eq!((p3.first, p3.last), (100, 115));
        assert_eq!(names(&p3).len(), 15);
        // Past the last page: the last page (a stale link still shows something).
        assert_eq!(page_of(&f, &q(9)).page, 3);
        // Every cluster on exactly one page.
        let all: Vec<String> = (1..=3).flat_map(|k| names(&page_of(&f, &q(k)))).collect();
        assert_eq!(all.len(), 115);
        let all_at_once = page_of(
            &f,
            &Query {
                all: true,
                ..Query::default()
            },
        );
        assert_eq!(names(&all_at_once), all);
        assert_eq!(all_at_once.pages, 1);
    }

    #[test]
    fn an_empty_selection_says_so_and_has_one_page() {
        let f = fleet(&[]);
        let p = page_of(&f, &Query::default());
        assert_eq!((p.page, p.pages, p.total), (1, 1, 0));
        assert!(pager(&Query::default(), &p).contains("No cluster matches"));
    }
}
