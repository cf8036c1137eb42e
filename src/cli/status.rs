//! `rota status`: every cluster and pool of the fleet at one commit, with the statuses the
//! agents recorded on it (git notes `refs/notes/rota/*` of the repo): progress bars in a
//! terminal, JSON for scripts, `--watch` to follow.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::report::{CommitStatus, cluster_context, pool_context};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Human,
    Json,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The fleet repo (a local clone or the bare repo the agents push notes to).
    #[arg(long, env = "ROTA_REPO", default_value = ".")]
    pub repo: PathBuf,
    /// The commit to show (default: HEAD).
    #[arg(long, default_value = "HEAD")]
    pub rev: String,
    /// The fleet repo is in this folder of the git tree.
    #[arg(long = "path")]
    pub subdir: Option<PathBuf>,
    /// Redraw every 2 seconds until stopped.
    #[arg(long)]
    pub watch: bool,
    #[arg(long, value_enum, default_value = "human")]
    pub format: OutputFormat,
    /// The whole fleet by wave, as `rota ui` shows it: versions in force and targets,
    /// progress bars, phases and what holds each held pool.
    #[arg(long)]
    pub fleet: bool,
    /// With --fleet: only this wave.
    #[arg(long, requires = "fleet")]
    pub wave: Option<String>,
    /// With --fleet: only this cluster.
    #[arg(long, requires = "fleet")]
    pub cluster: Option<String>,
    /// With --fleet: only pools in this state (failed, paused, rolling-back, held, rotating,
    /// soaking, planning, unknown, ignored, done).
    #[arg(long, requires = "fleet", value_parser = crate::ui::text::parse_state)]
    pub state: Option<crate::ui::model::Phase>,
    /// With --fleet: only pools that may be exceptions of this kind (failing, halted,
    /// held-too-long, silent): what the exceptions' "and N more" lists. held-too-long and
    /// silent list every held or unreported pool, the late ones among them.
    #[arg(long, requires = "fleet", value_parser = crate::ui::summary::ExceptionKind::parse)]
    pub exception: Option<crate::ui::summary::ExceptionKind>,
    /// With --fleet: only pools targeting or running this version (VERSION or
    /// CHANNEL@VERSION).
    #[arg(long, requires = "fleet")]
    pub version: Option<String>,
    /// With --fleet: only clusters with this label (KEY=VALUE; repeat for all of several).
    #[arg(long = "label", requires = "fleet", value_parser = crate::ui::text::parse_label)]
    pub labels: Vec<(String, String)>,
    /// With --fleet: every cluster and pool, however large the fleet (past 50 pools the view
    /// otherwise leads with a summary per wave and the exceptions, and stops there).
    #[arg(long, requires = "fleet")]
    pub all: bool,
    /// Only the pools on an image released longer ago than their channel's maxAge, the
    /// oldest first, then the pools it cannot judge (no report yet, no released date).
    /// Exit 1 when one is overdue, 3 when it could judge no pool at all.
    #[arg(long, requires = "fleet")]
    pub overdue: bool,
    /// Allowed-signers file of the agents (principal: cluster name): count only records
    /// signed by the agent of the cluster they speak for (with --fleet: a pool is done only
    /// when a signed record says so).
    #[arg(long, env = "ROTA_AGENT_SIGNERS")]
    pub agent_signers: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PoolView {
    pub name: String,
    pub target: String,
    /// `none` when no agent reported yet.
    pub state: String,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_target: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u32>,
    /// Why the pool is stopped or waits, who moves it on and how (the agent's stop note).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<rota_core::rotate::stop::StopNote>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    pub name: String,
    pub wave: String,
    pub state: String,
    pub description: String,
    pub pools: Vec<PoolView>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FleetView {
    pub commit: String,
    pub clusters: Vec<ClusterView>,
}

impl FleetView {
    /// True when every cluster reported success.
    pub fn all_success(&self) -> bool {
        self.clusters.iter().all(|c| c.state == "success")
    }
}

/// `14/40 nodes` in a description → (14, 40).
pub fn nodes_of(description: &str) -> Option<(u32, u32)> {
    let words: Vec<&str> = description.split_whitespace().collect();
    words.windows(2).find_map(|w| {
        if w[1] != "nodes" {
            return None;
        }
        let (a, b) = w[0].split_once('/')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    })
}

/// The fleet at `rev` with the statuses recorded on it.
pub async fn view(args: &StatusArgs) -> Result<FleetView, String> {
    let fleet = crate::source::read::load_git_at(&args.repo, &args.rev, args.subdir.as_deref())
        .map_err(|d| d.to_string())?;
    let commit = fleet.commit().unwrap_or_default().to_string();
    let clusters = fleet.resolve_all().map_err(|e| e.to_string())?;
    // The one reader of notes: the declared clusters' own refs only, bounded, validated.
    let store = crate::ui::load::RepoAt {
        repo: args.repo.clone(),
        rev: commit.clone(),
        subdir: args.subdir.clone(),
        agent_signers: args.agent_signers.clone(),
    }
    .notes(clusters.iter().map(|c| c.name.clone()));
    let recorded: Vec<CommitStatus> = store
        .docs(&commit)
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .flat_map(|d| d.statuses)
        .map(|s| s.status())
        .collect();
    let find = |ctx: &str| recorded.iter().find(|s| s.context == ctx);
    let state = |s: Option<&CommitStatus>| {
        s.map_or(("none".to_string(), "no status yet".to_string()), |s| {
            (s.state.as_str().to_string(), s.description.clone())
        })
    };
    let clusters = clusters
        .iter()
        .map(|c| {
            let (st, desc) = state(find(&cluster_context(&c.name)));
            ClusterView {
                name: c.name.clone(),
                wave: c.wave.clone(),
                state: st,
                description: desc,
                pools: c
                    .pools
                    .iter()
                    .map(|p| {
                        let (st, desc) = state(find(&pool_context(&c.name, &p.name)));
                        let nodes = nodes_of(&desc);
                        PoolView {
                            name: p.name.clone(),
                            target: format!("{}@{}", p.channel, p.version),
                            state: st,
                            description: desc,
                            on_target: nodes.map(|n| n.0),
                            total: nodes.map(|n| n.1),
                            stop: find(&pool_context(&c.name, &p.name))
                                .and_then(|s| s.stop.clone()),
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    Ok(FleetView { commit, clusters })
}

fn bar(on: u32, total: u32, width: usize) -> String {
    let filled = if total == 0 {
        0
    } else {
        (on as usize * width).div_ceil(total as usize).min(width)
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

/// The human rendering.
pub fn render(v: &FleetView) -> String {
    let mut out = format!("commit {}\n", &v.commit[..v.commit.len().min(12)]);
    for c in &v.clusters {
        out += &format!(
            "{} {:<20} wave {:<10} {}\n",
            mark(&c.state),
            c.name,
            c.wave,
            c.description
        );
        for p in &c.pools {
            let progress = match (p.on_target, p.total) {
                (Some(a), Some(b)) => format!("{} ", bar(a, b, 20)),
                _ => " ".repeat(23),
            };
            out += &format!(
                "    {} {:<16} {progress}{}\n",
                mark(&p.state),
                p.name,
                p.description
            );
            if let Some(n) = &p.stop {
                out += &format!("        {}\n", n.headline());
            }
        }
    }
    out
}

pub fn run(args: StatusArgs) -> ExitCode {
    crate::telemetry::init_one_shot();
    crate::ui::load::trust_the_object_store();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rota: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(async move {
        if args.fleet {
            return fleet_loop(&args).await;
        }
        loop {
            let v = match view(&args).await {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("rota: {e}");
                    return ExitCode::from(1);
                }
            };
            match args.format {
                OutputFormat::Json => {
                    println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default())
                }
                OutputFormat::Human => {
                    if args.watch && std::io::stdout().is_terminal() {
                        print!("\x1b[2J\x1b[H");
                    }
                    print!("{}", render(&v));
                }
            }
            if !args.watch {
                // Exit 0 only when every cluster succeeded: usable as a check in scripts.
                return if v.all_success() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                };
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    })
}

/// `--fleet`: the view model of `rota ui`, in the terminal. Exit 0 when every pool is done.
async fn fleet_loop(args: &StatusArgs) -> ExitCode {
    let at = crate::ui::load::RepoAt {
        repo: args.repo.clone(),
        rev: args.rev.clone(),
        subdir: args.subdir.clone(),
        agent_signers: args.agent_signers.clone(),
    };
    let filter = crate::ui::text::Filter {
        wave: args.wave.clone(),
        cluster: args.cluster.clone(),
        state: args.state,
        version: args.version.clone(),
        labels: args.labels.clone(),
        exception: args.exception,
    };
    loop {
        let (page, commit_time) = match load_page(&at, args.watch).await {
            Ok(loaded) => loaded,
            Err(e) => {
                eprintln!("rota: {e}");
                return ExitCode::from(1);
            }
        };
        // An unknown wave or cluster is a usage error (exit 2) in every format, before
        // anything is printed.
        if let Err(e) = filter.check(&page) {
            eprintln!("rota status: {e}");
            return ExitCode::from(2);
        }
        let selected = filter.apply(&page);
        match args.format {
            OutputFormat::Json => print_json(&selected, commit_time),
            OutputFormat::Human if args.overdue => return overdue(&page, &filter),
            OutputFormat::Human => {
                if let Err(code) = print_fleet(args, &page, &filter, commit_time) {
                    return code;
                }
            }
        }
        if !args.watch {
            let done = every_pool_done(&selected);
            // As the inputs: the exit frees the model.
            std::mem::forget(selected);
            std::mem::forget(page);
            return if done {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            };
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The fleet's page model at the repo's revision, and the commit's time.
async fn load_page(
    at: &crate::ui::load::RepoAt,
    watch: bool,
) -> Result<(crate::ui::model::FleetPage, chrono::DateTime<chrono::Utc>), String> {
    let l = crate::ui::load::load(at).await.map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    let out = (l.page(chrono::Utc::now()), l.commit_time);
    tracing::debug!(
        page_ms = started.elapsed().as_millis() as u64,
        "page model built"
    );
    // A one-shot view exits next: freeing 10,000 clusters' inputs piece by piece took a
    // tenth of its time, and the process's exit frees them at once.
    if watch {
        drop(l);
    } else {
        std::mem::forget(l);
    }
    Ok(out)
}

/// The selection as JSON, with its summary for scripts that want only the counts.
fn print_json(selected: &crate::ui::model::FleetPage, commit_time: chrono::DateTime<chrono::Utc>) {
    #[derive(Serialize)]
    struct FleetJson<'a> {
        #[serde(flatten)]
        page: &'a crate::ui::model::FleetPage,
        summary: crate::ui::summary::FleetSummary,
    }
    let out = FleetJson {
        page: selected,
        summary: crate::ui::summary::summarize(selected, commit_time, &Default::default()),
    };
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default())
}

/// `--overdue`: exit 1 when a pool is overdue, 3 when no pool could be judged ("none
/// overdue" would be a guess), 2 on a usage error.
fn overdue(page: &crate::ui::model::FleetPage, filter: &crate::ui::text::Filter) -> ExitCode {
    match crate::ui::text::overdue(page, filter) {
        Ok(r) => {
            print!("{}", r.text);
            if r.overdue > 0 {
                ExitCode::from(1)
            } else if r.judged == 0 {
                ExitCode::from(3)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("rota status: {e}");
            ExitCode::from(2)
        }
    }
}

/// The fleet in the terminal: small fleets, `--all` and filters every selected cluster and
/// pool; past that the summary and the exceptions (50,000 pool lines are read by no one).
fn print_fleet(
    args: &StatusArgs,
    page: &crate::ui::model::FleetPage,
    filter: &crate::ui::text::Filter,
    commit_time: chrono::DateTime<chrono::Utc>,
) -> Result<(), ExitCode> {
    let pools: usize = page
        .waves
        .iter()
        .flat_map(|w| &w.clusters)
        .map(|c| c.pools.len())
        .sum();
    let text = if args.all || filter.narrowed() || pools <= crate::ui::text::LIST_ALL_UP_TO_POOLS {
        crate::ui::text::fleet(page, filter)
    } else {
        Ok(crate::ui::text::at_size(
            page,
            &crate::ui::summary::summarize(page, commit_time, &Default::default()),
        ))
    };
    match text {
        Ok(text) => {
            if args.watch && std::io::stdout().is_terminal() {
                print!("\x1b[2J\x1b[H");
            }
            print!("{text}");
            Ok(())
        }
        Err(e) => {
            eprintln!("rota status: {e}");
            Err(ExitCode::from(2))
        }
    }
}

/// Whether every selected pool is done (the one-shot view's exit 0).
fn every_pool_done(selected: &crate::ui::model::FleetPage) -> bool {
    selected
        .waves
        .iter()
        .flat_map(|w| &w.clusters)
        .flat_map(|c| &c.pools)
        .all(|p| p.phase == crate::ui::model::Phase::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_counts_are_read_from_descriptions() {
        assert_eq!(
            nodes_of("batch 3/8 · 14/40 nodes on general@2026.11.2"),
            Some((14, 40))
        );
        assert_eq!(nodes_of("waiting for wave canary"), None);
        assert_eq!(bar(1, 4, 8), "[##------]");
        assert_eq!(bar(4, 4, 4), "[####]");
        assert_eq!(bar(0, 0, 2), "[--]");
    }
}
