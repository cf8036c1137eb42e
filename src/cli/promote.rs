//! `rota promote --wave NAME`: may wave NAME take the versions the wave before it runs? The
//! promotion guard answers from the statuses the agents recorded (git notes). `--check`
//! instead checks a promotion already written (a PR): every pin a wave changed between
//! `--base` and `--rev` must be allowed by the guard (for a required status check).

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
}

/// One pin change a wave asks for, and the guard's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PinCheck {
    pub wave: String,
    pub channel: String,
    pub from: Option<String>,
    pub to: String,
    pub decision: GuardDecision,
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
    let store = GitNotesStore::new(&args.repo, None, None);
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
            return ExitCode::from(1);
        }
    };
    if checks.is_empty() {
        println!("nothing to promote: the pins are the same");
        return ExitCode::SUCCESS;
    }
    let mut ok = true;
    for c in &checks {
        let from = c.from.as_deref().unwrap_or("(unpinned)");
        match &c.decision {
            GuardDecision::Allowed { reason } => println!(
                "✓ wave {}: {} {from} → {}: allowed ({reason})",
                c.wave, c.channel, c.to
            ),
            GuardDecision::Waiting(w) => {
                ok = false;
                println!(
                    "… wave {}: {} {from} → {}: {}",
                    c.wave,
                    c.channel,
                    c.to,
                    w.describe(&c.channel, &c.to)
                );
            }
        }
    }
    if !args.check && ok {
        println!("set these pins in the wave's `images` and merge: that is the promotion");
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
