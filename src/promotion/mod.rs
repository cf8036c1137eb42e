//! Promotion at the edge: checking a promotion (for each pin a wave takes, from the wave
//! before it or changed by a commit under review, the promotion guard's answer and the
//! records it rests on) and, in [`pin`], writing the commit that moves a wave's pins. Read by
//! `rota promote` and the demo; the fleet and the records come from the fleet repo (a clone
//! or the bare repo with the agents' notes). The guard itself is pure, in `waves`. In
//! [`revert`], the other way: a wave pinned back when its pools recorded that its version is
//! bad.

pub mod body;
pub mod commit;
pub mod pin;
pub mod propose;
pub mod revert;

use std::path::PathBuf;

use crate::report::GitNotesStore;
use rota_core::waves::wave_views;
use rota_core::waves::{GuardDecision, GuardRules, Promotion, promotion_guard};

/// What to check.
#[derive(Debug, Clone)]
pub struct Query {
    /// The fleet repo.
    pub repo: PathBuf,
    /// The commit to promote from (`check: false`) or the promotion to check (`check: true`).
    pub rev: String,
    /// With `check`: the commit the promotion is based on.
    pub base: String,
    /// Check the pins changed between `base` and `rev` rather than the ones `wave` would take.
    pub check: bool,
    /// Only this wave (default: every wave; without `check`, every wave after the first).
    pub wave: Option<String>,
    /// The fleet lives in this folder of the repo.
    pub subdir: Option<PathBuf>,
    /// Allowed-signers file of the agents (principal: cluster name): count only records
    /// signed by the agent of the cluster they speak for.
    pub agent_signers: Option<PathBuf>,
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
    views: &[rota_core::waves::WaveView],
    k: usize,
    channel: &str,
    version: &str,
    records: &[rota_core::waves::PoolRecord],
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
                rota_core::fleet::duration::GoDuration::from_secs(w.soak.as_secs()),
                // Saturating: whatever a record says, the arithmetic is total.
                at.checked_add_signed(soak)
                    .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC)
                    .format("%Y-%m-%dT%H:%M:%SZ")
            ));
        }
    }
    out
}

/// The guard's answer for every pin `query` asks about, as of `now`: reads the fleet at
/// `query.rev` (and `query.base`) and the agents' records from the repo's git notes.
///
/// With `check`, the pins are judged by the base's rules (its `promotion.guard`, waves, soaks
/// and pools), never by the ones the promotion brings: a PR that moves a pin and, in the same
/// diff, sets the canary's `soak: 0s` or `promotion.guard: false` would otherwise pass on the
/// rules it wrote itself. Such a PR is refused outright, naming both, to be split.
pub async fn checks_at(
    args: &Query,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<PinCheck>, String> {
    let at = |rev: &str| {
        crate::source::read::load_git_at(&args.repo, rev, args.subdir.as_deref())
            .map_err(|d| d.to_string())
    };
    let target = at(&args.rev)?;
    let base = if args.check {
        at(&args.base)?
    } else {
        target.clone()
    };
    let views_of = |f: &rota_core::fleet::Fleet| {
        f.resolve_all()
            .map(|clusters| wave_views(f, &clusters))
            .map_err(|e| e.to_string())
    };
    let head_views = views_of(&target)?;
    let base_views = if args.check {
        views_of(&base)?
    } else {
        head_views.clone()
    };
    let rules = GuardRules {
        enabled: base.promotion_guard(),
        waves: &base_views,
    };
    let records = records_at(args, &target, &base).await?;
    let mut out = Vec::new();
    let waves = target.waves();
    for (k, w) in waves.iter().enumerate() {
        if args.wave.as_deref().is_some_and(|n| n != w.name) {
            continue;
        }
        // The wave's place among the rules' waves (the base's with `check`).
        let k_rules = rules.waves.iter().position(|r| r.name == w.name);
        for (channel, from, to) in wanted(args, &base, waves, k)? {
            let evidence = k_rules.map_or_else(Vec::new, |k| {
                evidence(rules.waves, k, &channel, &to, &records)
            });
            let decision = promotion_guard(
                rules.enabled,
                rules.waves,
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
    let head_rules = GuardRules {
        enabled: target.promotion_guard(),
        waves: &head_views,
    };
    refuse_rule_changes(&out, rules, head_rules)?;
    Ok(out)
}

/// Err when `promoted` is not empty and the rules the guard reads differ between the base
/// (`rules`) and the promotion (`head`): one diff must not both move a pin and change what
/// judges the move.
fn refuse_rule_changes(
    promoted: &[PinCheck],
    rules: GuardRules<'_>,
    head: GuardRules<'_>,
) -> Result<(), String> {
    let changes = rota_core::waves::rules::changes(rules, head);
    if promoted.is_empty() || changes.is_empty() {
        return Ok(());
    }
    let pins: Vec<String> = promoted
        .iter()
        .map(|c| {
            format!(
                "wave {}: {} {} → {}",
                c.wave,
                c.channel,
                c.from.as_deref().unwrap_or("(unpinned)"),
                c.to
            )
        })
        .collect();
    Err(format!(
        "refused: this change both promotes ({}) and changes the promotion guard's rules ({}). \
         The guard judges a promotion by the base branch's rules, so a promotion may not \
         change them: split it, land the rule change on its own first, then the promotion",
        pins.join("; "),
        changes.join("; ")
    ))
}

/// The pins wave `k` changes: with `check`, what `base` pinned differently; without, what
/// the wave before it pins that it does not. `(channel, from, to)`.
fn wanted(
    args: &Query,
    base: &rota_core::fleet::Fleet,
    waves: &[rota_core::fleet::model::Wave],
    k: usize,
) -> Result<Vec<(String, Option<String>, String)>, String> {
    let w = &waves[k];
    if args.check {
        let before = base.waves().iter().find(|b| b.name == w.name);
        return Ok(w
            .images
            .iter()
            .filter(|(c, v)| before.and_then(|b| b.images.get(*c)) != Some(*v))
            .map(|(c, v)| {
                (
                    c.clone(),
                    before.and_then(|b| b.images.get(c)).cloned(),
                    v.clone(),
                )
            })
            .collect());
    }
    if k == 0 {
        // Asked for by name, the first wave is a mistake; among every wave, it is simply the
        // one nothing is promoted to.
        if args.wave.is_none() {
            return Ok(Vec::new());
        }
        return Err(format!(
            "wave {} is the first wave: nothing to promote from",
            w.name
        ));
    }
    Ok(waves[k - 1]
        .images
        .iter()
        .filter(|(c, v)| w.images.get(*c) != Some(*v))
        .map(|(c, v)| (c.clone(), w.images.get(c).cloned(), v.clone()))
        .collect())
}

/// The agents' records the guard reads. They live on the commits the agents acted on: for
/// a PR, its base; when the promotion is already in force, the commit itself. Both are read,
/// the newer (rev) last, so that it wins for a pool recorded on both (records are
/// cumulative).
async fn records_at(
    args: &Query,
    target: &rota_core::fleet::Fleet,
    base: &rota_core::fleet::Fleet,
) -> Result<Vec<rota_core::waves::PoolRecord>, String> {
    let store = GitNotesStore::new(&args.repo, None, None).with_evidence(
        &crate::report::evidence::EvidenceKeys {
            signing_key: None,
            agent_signers: args.agent_signers.clone(),
        },
    );
    // The fleet's clusters only, each from its own ref by name (a flood of pushed refs
    // cannot crowd them out).
    store.scope_to(
        target
            .cluster_names()
            .chain(base.cluster_names())
            .map(str::to_string),
    );
    let mut records = Vec::new();
    // Without `check` the base is the target itself: its records are read once.
    let read: &[&rota_core::fleet::Fleet] = if args.check {
        &[base, target]
    } else {
        &[target]
    };
    for f in read {
        let commit = f.commit().unwrap_or_default().to_string();
        records.extend(
            store
                .pool_records(&commit)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    Ok(records)
}
