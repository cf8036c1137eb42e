//! `rota promote --wave NAME`: may wave NAME take the versions the wave before it runs? The
//! promotion guard answers from the statuses the agents recorded (git notes); when it allows,
//! the commit that moves the wave's pins is written (on the current branch, or on a new
//! `--branch` for a pull request), its message listing the evidence. `--check` instead
//! checks a promotion already written (a PR): every pin a wave changed between `--base` and
//! `--rev` must be allowed by the guard (for a required status check).
//!
//! Exit codes: 0 allowed (and, without `--check`, the commit written) or nothing to promote;
//! 1 the guard says wait (nothing written); 2 the promotion could not be written or checked
//! (not a repo, unknown wave or revision, local changes, a pin rota cannot edit).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::agent::desired::wave_views;
use crate::report::GitNotesStore;
use crate::waves::{GuardDecision, Promotion, promotion_guard};

#[derive(Args, Debug)]
pub struct PromoteArgs {
    /// The wave to promote (or, with --check, whose promotion to check; default: every wave
    /// whose pins changed).
    #[arg(long)]
    pub wave: Option<String>,
    /// The fleet repo (a clone with the rota notes fetched, or the bare repo).
    #[arg(long, env = "ROTA_REPO", default_value = ".")]
    pub repo: PathBuf,
    /// The commit to promote from (without --check) or the promotion to check (with it).
    #[arg(long, default_value = "HEAD")]
    pub rev: String,
    /// Check the promotion made between --base and --rev.
    #[arg(long)]
    pub check: bool,
    /// The commit the promotion is based on (its statuses hold the records).
    #[arg(long, default_value = "HEAD~1")]
    pub base: String,
    #[arg(long = "path")]
    pub subdir: Option<PathBuf>,
    /// Allowed-signers file of the agents (principal: cluster name): count only records
    /// signed by the agent of the cluster they speak for.
    #[arg(long, env = "ROTA_AGENT_SIGNERS")]
    pub agent_signers: Option<PathBuf>,
    /// Write the promotion commit on this new branch (for a pull request) instead of
    /// advancing the current branch.
    #[arg(long, conflicts_with = "check")]
    pub branch: Option<String>,
    /// Only say what the guard answers; write nothing (the old behaviour of `--wave`).
    #[arg(long, conflicts_with = "check")]
    pub dry_run: bool,
}

/// One pin change a wave asks for, and the guard's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PinCheck {
    pub wave: String,
    pub channel: String,
    pub from: Option<String>,
    pub to: String,
    pub decision: GuardDecision,
    /// The records the decision rests on: each earlier-wave pool's completion of the
    /// version and each earlier wave's soak.
    pub evidence: Vec<String>,
}

/// `✓ wave main: general 2026.11.1 → 2026.11.2: allowed (...)` or `… wave ...: waiting ...`.
pub fn describe(c: &PinCheck) -> String {
    let from = c.from.as_deref().unwrap_or("(unpinned)");
    match &c.decision {
        GuardDecision::Allowed { reason } => format!(
            "✓ wave {}: {} {from} → {}: allowed ({reason})",
            c.wave, c.channel, c.to
        ),
        GuardDecision::Waiting(w) => format!(
            "… wave {}: {} {from} → {}: {}",
            c.wave,
            c.channel,
            c.to,
            w.describe(&c.channel, &c.to)
        ),
    }
}

/// What the guard's answer rests on, for wave index `k` taking `channel@version`.
fn evidence(
    views: &[crate::waves::WaveView],
    k: usize,
    channel: &str,
    version: &str,
    records: &[crate::waves::PoolRecord],
) -> Vec<String> {
    let mut out = Vec::new();
    for w in views.iter().take(k) {
        let mut newest = None;
        for p in w.pools.iter().filter(|p| p.channel == channel) {
            let at = records
                .iter()
                .rev()
                .find(|r| r.cluster == p.cluster && r.pool == p.pool)
                .and_then(|r| r.latest_completion(channel, version));
            match at {
                Some(at) => {
                    newest = newest.max(Some(at));
                    out.push(format!(
                        "{}/{} (wave {}) completed {channel}@{version} at {}",
                        p.cluster,
                        p.pool,
                        w.name,
                        at.format("%Y-%m-%dT%H:%M:%SZ")
                    ));
                }
                None => out.push(format!(
                    "{}/{} (wave {}) has no completion of {channel}@{version}",
                    p.cluster, p.pool, w.name
                )),
            }
        }
        if let Some(at) = newest {
            let soak = chrono::Duration::from_std(w.soak).unwrap_or_default();
            out.push(format!(
                "wave {} soaked {} from its newest completion (until {})",
                w.name,
                crate::fleet::duration::GoDuration::from_secs(w.soak.as_secs()),
                (at + soak).format("%Y-%m-%dT%H:%M:%SZ")
            ));
        }
    }
    out
}

pub async fn checks(args: &PromoteArgs) -> Result<Vec<PinCheck>, String> {
    checks_at(args, chrono::Utc::now()).await
}

/// [`checks`] as of `now`.
pub async fn checks_at(
    args: &PromoteArgs,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<PinCheck>, String> {
    let at = |rev: &str| {
        crate::fleet::load_git_at(&args.repo, rev, args.subdir.as_deref())
            .map_err(|d| d.to_string())
    };
    let target = at(&args.rev)?;
    let base = if args.check {
        at(&args.base)?
    } else {
        target.clone()
    };
    let clusters = target.resolve_all().map_err(|e| e.to_string())?;
    let views = wave_views(&target, &clusters);
    // Records live on the commits the agents acted on: for a PR, its base; when the
    // promotion is already in force, the commit itself. Both are read, the newer (rev) last,
    // so that it wins for a pool recorded on both (records are cumulative).
    let store = GitNotesStore::new(&args.repo, None, None).with_evidence(
        &crate::report::evidence::EvidenceKeys {
            signing_key: None,
            agent_signers: args.agent_signers.clone(),
        },
    );
    let mut records = Vec::new();
    for f in [&base, &target] {
        let commit = f.commit().unwrap_or_default().to_string();
        records.extend(
            store
                .pool_records(&commit)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    let mut out = Vec::new();
    let waves = target.waves();
    for (k, w) in waves.iter().enumerate() {
        if args.wave.as_deref().is_some_and(|n| n != w.name) {
            continue;
        }
        let wanted: Vec<(String, Option<String>, String)> = if args.check {
            let before = base.waves().iter().find(|b| b.name == w.name);
            w.images
                .iter()
                .filter(|(c, v)| before.and_then(|b| b.images.get(*c)) != Some(*v))
                .map(|(c, v)| {
                    (
                        c.clone(),
                        before.and_then(|b| b.images.get(c)).cloned(),
                        v.clone(),
                    )
                })
                .collect()
        } else {
            if k == 0 {
                return Err(format!(
                    "wave {} is the first wave: nothing to promote from",
                    w.name
                ));
            }
            waves[k - 1]
                .images
                .iter()
                .filter(|(c, v)| w.images.get(*c) != Some(*v))
                .map(|(c, v)| (c.clone(), w.images.get(c).cloned(), v.clone()))
                .collect()
        };
        for (channel, from, to) in wanted {
            let evidence = evidence(&views, k, &channel, &to, &records);
            let decision = promotion_guard(
                target.promotion_guard(),
                &views,
                Promotion {
                    wave: &w.name,
                    channel: &channel,
                    version: &to,
                },
                &records,
                now,
            );
            out.push(PinCheck {
                wave: w.name.clone(),
                channel,
                from,
                to,
                decision,
                evidence,
            });
        }
    }
    if let Some(name) = &args.wave
        && !waves.iter().any(|w| &w.name == name)
    {
        return Err(format!("no wave named {name} in the fleet"));
    }
    Ok(out)
}

pub fn run(args: PromoteArgs) -> ExitCode {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rota: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let checks = match rt.block_on(checks(&args)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rota: {e}");
            return ExitCode::from(2);
        }
    };
    if checks.is_empty() {
        println!("nothing to promote: the pins are the same");
        return ExitCode::SUCCESS;
    }
    let mut ok = true;
    for c in &checks {
        ok &= c.decision.is_allowed();
        println!("{}", describe(c));
    }
    if !ok {
        if !args.check {
            println!("nothing written: the promotion guard says wait");
        }
        return ExitCode::from(1);
    }
    if args.check || args.dry_run {
        return ExitCode::SUCCESS;
    }
    match write_promotion(&args, &checks) {
        Ok((id, branch, title)) => {
            let short = &id.to_string()[..7];
            println!("[{branch} {short}] {title}");
            match &args.branch {
                Some(b) => println!("push it and open a pull request: git push origin {b}"),
                None => println!("push it: merging it is the promotion (git push)"),
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rota: {e}");
            ExitCode::from(2)
        }
    }
}

/// Writes the promotion commit for `checks` (all allowed, one wave): returns the commit,
/// its branch and its title.
pub fn write_promotion(
    args: &PromoteArgs,
    checks: &[PinCheck],
) -> Result<(git2::Oid, String, String), String> {
    use crate::waves::pin::{PinChange, Target, commit_file, edit_pins};
    let Some(wave) = &args.wave else {
        return Err("--wave NAME is required to write a promotion".into());
    };
    let mut changes = Vec::new();
    for c in checks {
        let Some(from) = &c.from else {
            return Err(format!(
                "wave {wave} does not pin channel {} yet; add `{}: \"{}\"` to its images by hand",
                c.channel, c.channel, c.to
            ));
        };
        changes.push(PinChange {
            channel: c.channel.clone(),
            from: from.clone(),
            to: c.to.clone(),
        });
    }
    let (files, _, commit) =
        crate::fleet::source::read_git(&args.repo, &args.rev, args.subdir.as_deref())
            .map_err(|d| d.to_string())?;
    let (path, text) = edit_pins(&files, wave, &changes)?;
    // The edited fleet must load and pin exactly what was asked.
    let edited: Vec<_> = files
        .iter()
        .map(|f| {
            if f.path == path {
                crate::fleet::source::SourceFile::new(path.clone(), text.clone())
            } else {
                f.clone()
            }
        })
        .collect();
    let fleet = crate::fleet::load_files(&edited)
        .map_err(|d| format!("the promotion would make the fleet invalid: {d}"))?;
    let pins = fleet
        .waves()
        .iter()
        .find(|w| &w.name == wave)
        .map(|w| w.images.clone())
        .unwrap_or_default();
    for c in &changes {
        if pins.get(&c.channel) != Some(&c.to) {
            return Err(format!(
                "editing {path} did not pin {}@{} in wave {wave}",
                c.channel, c.to
            ));
        }
    }
    let title = format!(
        "promote wave {wave}: {}",
        changes
            .iter()
            .map(|c| format!("{} {} → {}", c.channel, c.from, c.to))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut message = format!(
        "{title}\n\nThe promotion guard allows it, from the agents' records (git notes) on {}:\n",
        &commit[..12]
    );
    for c in checks {
        if let GuardDecision::Allowed { reason } = &c.decision {
            message += &format!("\n{}@{}: {reason}\n", c.channel, c.to);
        }
        for e in &c.evidence {
            message += &format!("- {e}\n");
        }
    }
    message += "\nWritten by rota promote.\n";
    let full_path = match &args.subdir {
        Some(d) if !d.as_os_str().is_empty() && d != std::path::Path::new(".") => {
            format!("{}/{path}", d.display().to_string().trim_end_matches('/'))
        }
        _ => path,
    };
    let target = match &args.branch {
        Some(b) => Target::NewBranch(b.clone()),
        None => Target::CurrentBranch,
    };
    let (id, branch) = commit_file(&args.repo, &commit, &full_path, &text, &message, &target)?;
    Ok((id, branch, title))
}
