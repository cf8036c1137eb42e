//! `rota audit`: which nodes ran an image and when, or what a node ran, from the image ledger
//! every agent keeps in the fleet repo (`refs/rota/ledger/<cluster>`, see
//! [`crate::ledger`]); `--verify` checks each ledger's chain and signatures instead.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};

use crate::ledger::{self, Filter, Life};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AuditFormat {
    Table,
    Json,
    Csv,
}

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// The fleet repo: a local clone or bare repo with the ledger refs
    /// (`git fetch origin 'refs/rota/ledger/*:refs/rota/ledger/*'`), or a URL (its ledger
    /// refs fetched into a mirror under --state-dir).
    #[arg(long, env = "ROTA_REPO", default_value = ".")]
    pub repo: String,
    /// Where the mirror of a URL is kept.
    #[arg(long, env = "ROTA_STATE_DIR", default_value = "/var/lib/rota")]
    pub state_dir: PathBuf,
    #[command(flatten)]
    pub git: super::git_auth::GitAuthArgs,
    /// Only lives on this image: CHANNEL@VERSION or an image ID.
    #[arg(long)]
    pub image: Option<String>,
    /// Only this node (its name or instance ID).
    #[arg(long)]
    pub node: Option<String>,
    #[arg(long)]
    pub cluster: Option<String>,
    /// Only this pool's nodes (by its name; with --cluster, one pool of one cluster).
    #[arg(long)]
    pub pool: Option<String>,
    /// Only lives that were running at or after this time (RFC 3339, or a date 2026-11-01).
    #[arg(long, value_parser = parse_time)]
    pub from: Option<DateTime<Utc>>,
    /// Only lives that started before this time.
    #[arg(long, value_parser = parse_time)]
    pub to: Option<DateTime<Utc>>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: AuditFormat,
    /// Check every ledger (or --cluster's): the chain of appends, the files, no life twice,
    /// and with --agent-signers each append's signature. Exit 1 naming what does not hold.
    #[arg(long)]
    pub verify: bool,
    /// Allowed-signers file of the agents (principal: cluster name): with --verify, every
    /// append must be signed by its cluster's key.
    #[arg(long, env = "ROTA_AGENT_SIGNERS")]
    pub agent_signers: Option<PathBuf>,
}

/// Every life `filter` matches, read from each ledger (no index).
pub fn read_every_ledger(repo: &git2::Repository, filter: &Filter) -> Result<Vec<Life>, String> {
    let mut out = Vec::new();
    for c in ledger::clusters(repo).map_err(|e| e.to_string())? {
        if filter.cluster.as_ref().is_some_and(|f| f != &c) {
            continue;
        }
        out.extend(ledger::read_lives(repo, &c, filter).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

/// `2026-11-20T08:00:00Z` or `2026-11-20` (midnight UTC).
pub fn parse_time(s: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .map(|d| d.and_hms_opt(0, 0, 0).expect("midnight").and_utc())
        .map_err(|_| format!("{s:?} is not a time (2026-11-20T08:00:00Z or 2026-11-20)"))
}

/// The repository to read: `repo` itself when it is a folder, else a mirror of the URL with
/// the ledger refs (and the notes and the branch, for `rota evidence`) fetched now.
pub fn open_repo(
    repo: &str,
    state_dir: &Path,
    git: &super::git_auth::GitAuthArgs,
) -> Result<git2::Repository, String> {
    if !repo.contains("://") && Path::new(repo).is_dir() {
        return git2::Repository::open(repo).map_err(|e| format!("{repo}: {}", e.message()));
    }
    let auth = git.auth(&|k| std::env::var(k).ok())?;
    let source = crate::source::open_mirror(
        crate::source::SourceConfig {
            url: repo.to_string(),
            branch: "main".into(),
            auth: auth.clone(),
            depth: None,
        },
        state_dir,
        "fleet-audit.git",
    )?;
    let mirror = git2::Repository::open(source.mirror_path()).map_err(|e| e.to_string())?;
    let push = crate::report::notes::PushTarget {
        url: repo.to_string(),
        auth,
        known_hosts: source.known_hosts().cloned(),
    };
    let all = format!("{}*", ledger::LEDGER_PREFIX);
    crate::report::notes::fetch_ref(&mirror, &push, &all, &all).map_err(|e| {
        crate::source::redact_urls_in(&format!("fetching the ledgers: {}", e.message()))
    })?;
    Ok(mirror)
}

/// Every life `filter` matches, across the ledgers of `repo`, sorted by cluster, pool, join.
/// Read through the per-image index ([`ledger::index`]) when it can be used (a query by
/// image reads only that image's lives), from every ledger otherwise.
pub fn lives(repo: &git2::Repository, filter: &Filter) -> Result<Vec<Life>, String> {
    let indexed = ledger::index::indexed_lives(repo, filter).map_err(|e| e.to_string())?;
    let mut out = match indexed {
        Some(lives) => lives,
        None => read_every_ledger(repo, filter)?,
    };
    out.sort_by(|a, b| {
        (&a.cluster, &a.pool, a.joined, &a.node).cmp(&(&b.cluster, &b.pool, b.joined, &b.node))
    });
    Ok(out)
}

fn time(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

/// The columns of the table and CSV, in order.
const COLUMNS: [&str; 12] = [
    "cluster",
    "pool",
    "node",
    "instance",
    "image",
    "version",
    "joined",
    "joinedBefore",
    "drainedAt",
    "left",
    "leftHow",
    "rotation",
];

fn row(l: &Life) -> [String; 12] {
    [
        l.cluster.clone(),
        l.pool.clone(),
        l.node.clone(),
        l.instance.clone(),
        l.image.clone(),
        l.version.clone().unwrap_or_default(),
        time(Some(l.joined)),
        l.joined_before.clone().unwrap_or_default(),
        time(l.drained_at),
        time(l.left),
        l.left_how
            .map(|h| h.as_str().to_string())
            .unwrap_or_default(),
        l.rotation.clone().unwrap_or_default(),
    ]
}

/// A CSV field, quoted when it must be (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The lives as the chosen format prints them.
pub fn render(lives: &[Life], format: AuditFormat) -> String {
    match format {
        AuditFormat::Json => serde_json::to_string_pretty(lives).expect("serialisable") + "\n",
        AuditFormat::Csv => {
            let mut out = COLUMNS.join(",") + ",commit,drainedBy,leftRotation\n";
            for l in lives {
                let mut fields: Vec<String> = row(l).iter().map(|f| csv_field(f)).collect();
                for extra in [&l.commit, &l.drained_by, &l.left_rotation] {
                    fields.push(csv_field(extra.as_deref().unwrap_or("")));
                }
                out += &(fields.join(",") + "\n");
            }
            out
        }
        AuditFormat::Table => {
            let shown = [0, 1, 2, 3, 5, 6, 9, 10];
            let rows: Vec<[String; 12]> = lives.iter().map(row).collect();
            let width = |i: usize| {
                rows.iter()
                    .map(|r| r[i].len())
                    .chain([COLUMNS[i].len()])
                    .max()
                    .unwrap_or(0)
            };
            let widths: Vec<usize> = shown.iter().map(|&i| width(i)).collect();
            let line = |cells: Vec<&str>| {
                cells
                    .iter()
                    .zip(&widths)
                    .map(|(c, w)| format!("{c:<w$}"))
                    .collect::<Vec<_>>()
                    .join("  ")
                    .trim_end()
                    .to_string()
                    + "\n"
            };
            let mut out = line(shown.iter().map(|&i| COLUMNS[i]).collect());
            for r in &rows {
                let mut cells: Vec<&str> = shown.iter().map(|&i| r[i].as_str()).collect();
                if r[9].is_empty() {
                    cells[6] = "running";
                }
                out += &line(cells);
            }
            out + &format!("{} lives\n", lives.len())
        }
    }
}

fn verify(repo: &git2::Repository, args: &AuditArgs) -> ExitCode {
    let signers = args
        .agent_signers
        .as_deref()
        .map(crate::report::evidence::RecordVerifier::new);
    let verdicts = match ledger::verify::verify_all(repo, args.cluster.as_deref(), signers.as_ref())
    {
        Ok(v) => v,
        Err(e) => {
            eprintln!("rota audit --verify: {e}");
            return ExitCode::from(2);
        }
    };
    if verdicts.is_empty() {
        eprintln!("rota audit --verify: no ledger (refs/rota/ledger/*) in this repo");
        return ExitCode::from(1);
    }
    let mut failed = false;
    for v in &verdicts {
        let signed = if signers.is_some() {
            format!(", {} signed", v.signed)
        } else {
            ", signatures not checked (no --agent-signers)".into()
        };
        let state = if v.faults.is_empty() {
            "holds"
        } else {
            "DOES NOT HOLD"
        };
        println!(
            "{}: {state}: {} appends, {} lives{signed}",
            v.cluster, v.appends, v.lives
        );
        for f in &v.faults {
            println!("  {f}");
        }
        failed |= !v.faults.is_empty();
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

pub fn run(args: AuditArgs) -> ExitCode {
    crate::telemetry::init_one_shot();
    crate::ui::load::trust_the_object_store();
    let repo = match open_repo(&args.repo, &args.state_dir, &args.git) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rota audit: {e}");
            return ExitCode::from(2);
        }
    };
    if args.verify {
        return verify(&repo, &args);
    }
    let filter = Filter {
        image: args.image.clone(),
        node: args.node.clone(),
        cluster: args.cluster.clone(),
        pool: args.pool.clone(),
        from: args.from,
        to: args.to,
    };
    match lives(&repo, &filter) {
        Ok(l) => {
            print!("{}", render(&l, args.format));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rota audit: {e}");
            ExitCode::from(2)
        }
    }
}
