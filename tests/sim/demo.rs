//! `rota demo` end to end, in process on paused time (as the command runs it): the story's
//! commits, where every pool ended, and the statuses each commit carries in git notes.

use rota::demo::failure::Signals;
use rota::demo::{DemoOptions, Outcome, run};
use rota::report::State;

fn status<'a>(o: &'a Outcome, step: &str, context: &str) -> (State, &'a str) {
    let sha = &o.commits[step];
    let s = o.statuses[sha]
        .iter()
        .find(|s| s.context == context)
        .unwrap_or_else(|| panic!("no {context} on {step} ({sha}): {:?}", o.statuses[sha]));
    (s.state, s.description.as_str())
}

/// Whether this build evaluates Prometheus gates (prod-use1's pools have one).
fn prometheus_gates_supported() -> bool {
    let fleet =
        rota::fleet::load_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/fleet-repo")).unwrap();
    let clusters = fleet.resolve_all().unwrap();
    let prod = clusters.iter().find(|c| c.name == "prod-use1").unwrap();
    let gate = prod.pools[0]
        .gates
        .iter()
        .find(|g| g.name == "error-rate")
        .unwrap();
    rota::gates::build(gate).is_ok()
}

#[tokio::test(start_paused = true)]
async fn the_demo_plays_bump_promotion_and_revert() {
    let mut out = Vec::new();
    let result = run(DemoOptions::default(), &mut out).await;
    let text = String::from_utf8_lossy(&out).to_string();
    let o = result.unwrap_or_else(|e| panic!("{e}\n--- output:\n{text}"));

    // The story in git: a merge commit for the promotion and a revert.
    assert!(
        o.log
            .contains("Merge branch 'promote/early-general-2026.11.2'"),
        "{}",
        o.log
    );
    assert!(
        o.log
            .contains("Revert \"images: general 2026.11.3 on wave canary\""),
        "{}",
        o.log
    );
    assert!(text.contains("] the story in git"), "{text}");

    // Adoption first, with the promotion guard on from the start (no guard-off commit): every
    // pool, wave early's gpu pools on 2026.10.3 (which the canary is past) included, is
    // adopted on its pins and reports success on the head the agents started on.
    assert!(!o.log.contains("guard"), "{}", o.log);
    let fleet = std::fs::read_to_string(o.dir.join("work/fleet.yaml"));
    if let Ok(f) = fleet {
        assert!(f.contains("guard: true"), "{f}");
    }
    assert!(
        text.contains(
            "] adoption: every agent starts on a fleet already running, the promotion guard on"
        ),
        "{text}"
    );
    let first_step = text
        .lines()
        .find(|l| l.starts_with("== ["))
        .unwrap_or_default();
    assert!(
        first_step.ends_with(
            "] adoption: every agent starts on a fleet already running, the promotion guard on"
        ),
        "{first_step}"
    );
    // The example's 13 pools and the EKS managed node group the demo adds, read through
    // EKS's API.
    assert!(text.contains("14 pools adopted"), "{text}");
    assert!(text.contains("gpu@2026.10.3"), "{text}");
    let (state, desc) = status(&o, "prometheus", "rota/prod-use1/gpu");
    assert_eq!(state, State::Success, "{desc}");
    assert!(desc.ends_with("nodes on gpu@2026.10.3"), "{desc}");

    // (a) the canary wave rolled 2026.11.2, every node.
    for pool in ["canary-use1/general", "dev-usc1/general"] {
        let p = &o.pools[pool];
        assert_eq!(p.version, "2026.11.2", "{pool}: {p:?}");
        assert_eq!(
            (p.phase.as_str(), p.on_target),
            ("Succeeded", p.total),
            "{pool}: {p:?}"
        );
    }
    assert_eq!(
        status(&o, "bump", "rota/canary-use1/general"),
        (State::Success, "3/3 nodes on general@2026.11.2")
    );
    assert_eq!(o.pools["canary-use1/gpu"].version, "2026.11.1");

    // (b) merged before the canary soaked: the guard said wait, then the wave rolled.
    assert!(
        o.guard_at_merge
            .iter()
            .any(|l| l.contains("waiting for wave canary to soak general@2026.11.2")),
        "{:?}",
        o.guard_at_merge
    );
    assert_eq!(o.pools["staging-neu/general"].version, "2026.11.2");
    assert_eq!(
        status(&o, "merge", "rota/staging-neu/general"),
        (State::Success, "3/3 nodes on general@2026.11.2")
    );
    let prod = status(&o, "merge", "rota/prod-use1/batch");
    if prometheus_gates_supported() {
        assert_eq!(prod, (State::Success, "3/3 nodes on general@2026.11.2"));
        // prod-use1/general waits for its window (Mon-Thu 14:00-20:00 New York): the story
        // starts on a Monday at 06:00 UTC whenever it runs, so the window opens after it
        // ends, the same Monday. Not an earlier one (a story begun in another test's past),
        // nor a later one (fleet time run days ahead), nor rolled in a window.
        let p = &o.pools["prod-use1/general"];
        let monday = o.fleet_start.date_naive();
        assert_eq!(o.fleet_start.format("%a %H:%M").to_string(), "Mon 06:00");
        assert_eq!(
            (p.version.as_str(), p.phase.as_str(), p.on_target),
            ("2026.11.2", "Waiting", 0),
            "{p:?}"
        );
        assert_eq!(p.stop.as_deref(), Some("OutsideWindow (Rota)"), "{p:?}");
        assert!(
            p.message.contains(&format!("deferred until {monday}T")),
            "{monday}: {p:?}"
        );
    } else {
        assert_eq!(prod.0, State::Failure, "{prod:?}");
        assert!(
            prod.1.contains("prometheus gates are not available"),
            "{prod:?}"
        );
    }
    // prod-use1/system, an EKS managed node group, rolled through EKS's own update: one
    // update, to 2026.11.2's AMI, which EKS finished.
    if prometheus_gates_supported() {
        assert_eq!(o.managed_updates, ["ami-0f9e8d7c6b5a40312 Successful"]);
        let p = &o.pools["prod-use1/system"];
        assert_eq!(
            (p.version.as_str(), p.phase.as_str(), p.on_target),
            ("2026.11.2", "Succeeded", p.total),
            "{p:?}"
        );
        assert_eq!(
            status(&o, "merge", "rota/prod-use1/system"),
            (State::Success, "3/3 nodes on general@2026.11.2")
        );
        assert!(
            text.contains("prod-use1/system is an EKS managed node group: rota rotated it through EKS's own update (UpdateNodegroupVersion: ami-0f9e8d7c6b5a40312 Successful)"),
            "{text}"
        );
    }
    // The main wave was never promoted.
    assert_eq!(o.pools["prod-usw2/general"].version, "2026.11.1");
    assert_eq!(
        status(&o, "merge", "rota/prod-usw2/general"),
        (State::Success, "3/3 nodes on general@2026.11.1")
    );

    // (c) reverted midway: rolled back, and the reverted commit is final, superseded.
    assert!(
        o.revert_progress
            .iter()
            .any(|d| d.starts_with("rolling back")),
        "{:?}",
        o.revert_progress
    );
    for pool in ["canary-use1/general", "dev-usc1/general"] {
        let p = &o.pools[pool];
        assert_eq!(p.version, "2026.11.2", "{pool}: {p:?}");
        let image = if pool.starts_with("canary-use1") {
            "ami-0f9e8d7c6b5a40312"
        } else {
            "projects/acme-images/global/images/general-2026-11-2"
        };
        assert_eq!(p.image, image, "{pool}: {p:?}");
        assert_eq!(
            (p.phase.as_str(), p.on_target),
            ("Succeeded", p.total),
            "{pool}: {p:?}"
        );
    }
    assert_eq!(
        status(&o, "revert", "rota/canary-use1/general"),
        (State::Success, "3/3 nodes on general@2026.11.2")
    );
    // Done and on the version the revert pins: no stop anywhere, not "needs a person
    // (RolledBack)" (the NodePoolRotation's STOP column, the git note the views read).
    for pool in ["canary-use1/general", "dev-usc1/general"] {
        assert_eq!(o.pools[pool].stop, None, "{pool}: {:?}", o.pools[pool]);
        let context = format!("rota/{pool}");
        let noted = o.statuses[&o.commits["revert"]]
            .iter()
            .find(|s| s.context == context)
            .unwrap();
        assert_eq!(noted.stop, None, "{context}: {noted:?}");
    }
    let revert_short = &o.commits["revert"][..12];
    let (state, d) = status(&o, "bump-again", "rota/canary-use1/general");
    assert_eq!(state, State::Error, "{d}");
    assert!(
        d.starts_with(&format!(
            "superseded by {revert_short} before it finished: batch 2/3"
        )),
        "{d}"
    );
    assert_eq!(status(&o, "bump-again", "rota/canary-use1").0, State::Error);
    the_demo_fails_once_and_every_signal_is_true(&o, &text);

    // Hours of policy (soaks) in fleet time.
    assert!(
        o.fleet_time >= chrono::Duration::hours(2),
        "{:?}",
        o.fleet_time
    );
}

/// The demo's story audited as an auditor would after it (`rota audit --image` of the
/// reverted version): every instance the simulated cloud brought in service has exactly one
/// life in the ledger, with its image; the reverted version's nodes were rotated out by the
/// revert's rollback (not `lost`, not still `running`), and nothing is `lost` anywhere, since
/// every node that left did so by rota's hand.
#[tokio::test(start_paused = true)]
async fn the_demo_can_be_audited_every_node_once_per_life_with_how_it_left() {
    let tmp = tempfile::tempdir().unwrap();
    let mut out = Vec::new();
    let opts = DemoOptions {
        keep: Some(tmp.path().join("demo")),
        ..DemoOptions::default()
    };
    let result = run(opts, &mut out).await;
    let text = String::from_utf8_lossy(&out).to_string();
    let o = result.unwrap_or_else(|e| panic!("{e}\n--- output:\n{text}"));
    let repo = git2::Repository::open_bare(o.dir.join("fleet.git")).unwrap();
    let all = rota::cli::audit::lives(&repo, &rota::ledger::Filter::default()).unwrap();

    // Instance IDs are unique within a group only (an Azure scale set numbers its own from
    // 0): compare the two records as counts per instance and image. The EKS managed node
    // group's instances are recorded from EKS's own node labels. One gap of the ledger is left
    // out, by name (docs/audit.md says it): the canary-use1 surge on the bad build, which the
    // rollback took back between two of the agent's looks (ten fleet minutes at the demo's
    // speed) before any look saw its node: whether a look falls inside that life depends on
    // how the passes fall in wall time (under load one may), so its lives are held to "never
    // more than ran", not to a count.
    const BAD_SURGE: &str = "ami-0e5d4c3b2a1908f7e";
    let mut ran: std::collections::BTreeMap<(&str, &str), usize> = Default::default();
    let mut unrecorded = Vec::new();
    for r in &o.ran {
        if r.image == BAD_SURGE {
            unrecorded.push(r);
            continue;
        }
        *ran.entry((r.instance.as_str(), r.image.as_str()))
            .or_default() += 1;
    }
    assert!(
        all.iter().any(|l| l.instance.starts_with("system-")),
        "the EKS managed node group's lives are recorded"
    );
    let surge_ran = unrecorded.iter().filter(|r| r.image == BAD_SURGE).count();
    let surge_recorded = all.iter().filter(|l| l.image == BAD_SURGE).count();
    assert!(
        surge_recorded <= surge_ran,
        "{surge_recorded} lives of the bad surge recorded, {surge_ran} ran"
    );
    let mut recorded: std::collections::BTreeMap<(&str, &str), usize> = Default::default();
    for l in all.iter().filter(|l| l.image != BAD_SURGE) {
        *recorded
            .entry((l.instance.as_str(), l.image.as_str()))
            .or_default() += 1;
    }
    assert_eq!(
        recorded, ran,
        "lives per instance and image, against the cloud's record"
    );
    // EKS's own update of prod-use1/system replaced its nodes: they left by EKS's hand, not
    // rota's, on the old AMI, after EKS tainted them unschedulable when its update started
    // (its cordon, which the agent's looks saw): `drained` (docs/audit.md).
    let (replaced, others): (Vec<_>, Vec<_>) = all
        .iter()
        .filter(|l| l.left.is_some())
        .partition(|l| l.cluster == "prod-use1" && l.pool == "system");
    assert!(!replaced.is_empty(), "EKS replaced system's nodes");
    assert!(
        replaced.iter().all(|l| l.image == "ami-0a1b2c3d4e5f60718"
            && l.left_rotation.is_none()
            && l.left_how == Some(rota::ledger::Left::Drained)),
        "{replaced:#?}"
    );
    let lost: Vec<_> = others
        .iter()
        .filter(|l| l.left_how == Some(rota::ledger::Left::Lost))
        .collect();
    assert!(lost.is_empty(), "nothing else left without rota: {lost:#?}");

    // `rota audit --image general@2026.11.3`: the canary wave's nodes (canary-use1 and
    // dev-usc1) on the reverted version.
    let filter = rota::ledger::Filter {
        image: Some("general@2026.11.3".into()),
        ..Default::default()
    };
    let reverted = rota::cli::audit::lives(&repo, &filter).unwrap();
    assert!(!reverted.is_empty(), "{all:#?}");
    for l in &reverted {
        assert!(
            ["canary-use1", "dev-usc1"].contains(&l.cluster.as_str()),
            "{l:?}"
        );
        assert_eq!(l.left_how, Some(rota::ledger::Left::Rotated), "{l:#?}");
        assert!(l.drained_at.is_some() && l.drained_at <= l.left, "{l:#?}");
        assert_eq!(
            l.left_rotation.as_deref(),
            Some(format!("{}:rollback to general@2026.11.2", l.pool).as_str()),
            "{l:#?}"
        );
    }
    // The story tells how to audit it, at its own end (the fleet's clock ran ahead).
    let origin = o.dir.join("fleet.git");
    assert!(
        text.contains(&format!(
            "rota audit --repo {} --image general@2026.11.3",
            origin.display()
        )),
        "{text}"
    );
    assert!(text.contains("rota evidence --repo "), "{text}");
    let table = rota::cli::audit::render(&reverted, rota::cli::audit::AuditFormat::Table);
    assert!(!table.contains("running"), "{table}");
    assert!(table.contains("rotated"), "{table}");
}

/// `cluster/pool`'s commit status at a step of (d), from the git notes.
fn noted<'a>(s: &'a Signals, pool: &str) -> &'a rota::report::CommitStatus {
    let context = format!("rota/{pool}");
    s.statuses
        .get(&context)
        .unwrap_or_else(|| panic!("{}: no {context} on {}: {:?}", s.step, s.commit, s.statuses))
}

/// (d): a bad build fails a health gate. At each step every view says what is the
/// case: a person is needed exactly while one is (the rolled-back pool until the revert, the
/// paused pool until the retry or the revert), and nowhere once the revert is in force.
fn the_demo_fails_once_and_every_signal_is_true(o: &Outcome, text: &str) {
    let f = &o.failure;
    let bad = &o.commits["bad-image"];
    assert_eq!(&f.failed.commit, bad);

    // The gate failed: canary-use1/general rolled back by itself, and says a person must
    // move the wave on (the revert); dev-usc1/general paused and suggests the retry.
    let rolled = noted(&f.failed, "canary-use1/general");
    assert_eq!(rolled.state, State::Failure, "{rolled:?}");
    assert!(rolled.description.starts_with("failed"), "{rolled:?}");
    assert!(rolled.description.contains("health gate"), "{rolled:?}");
    let stop = rolled
        .stop
        .as_ref()
        .expect("a stop on the rolled-back pool");
    assert_eq!(stop.reason, "RolledBack", "{stop:?}");
    assert_eq!(stop.by, rota::rotate::stop::MovedBy::Person, "{stop:?}");
    let paused = noted(&f.failed, "dev-usc1/general");
    assert_eq!(paused.state, State::Failure, "{paused:?}");
    assert!(
        paused
            .description
            .starts_with("paused; next: rota ctl retry --cluster dev-usc1 --pool general"),
        "{paused:?}"
    );
    assert!(paused.description.contains("health gate"), "{paused:?}");
    assert_eq!(
        paused.stop.as_ref().map(|n| n.by),
        Some(rota::rotate::stop::MovedBy::Person),
        "{paused:?}"
    );
    // `rota status --fleet`, the page and the NodePoolRotations say the same.
    let rolled_lines = f.failed.fleet_lines("canary-use1", "general");
    assert!(
        rolled_lines.contains("needs a person (RolledBack)"),
        "{rolled_lines}\n{}",
        f.failed.fleet_text
    );
    let paused_lines = f.failed.fleet_lines("dev-usc1", "general");
    assert!(
        paused_lines.contains("needs a person")
            && paused_lines.contains("rota ctl retry --cluster dev-usc1 --pool general"),
        "{paused_lines}\n{}",
        f.failed.fleet_text
    );
    for pool in ["canary-use1/general", "dev-usc1/general"] {
        let stop = f.failed.page_stops[pool].as_deref().unwrap_or_default();
        assert!(stop.starts_with("needs a person"), "{pool}: {stop:?}");
    }
    assert!(
        f.failed.page_needs_person >= 2,
        "{}",
        f.failed.page_needs_person
    );
    let npr = &f.failed.pools["canary-use1/general"];
    assert_eq!(npr.phase, "Failed", "{npr:?}");
    assert!(
        npr.stop
            .as_deref()
            .is_some_and(|s| s.starts_with("RolledBack")),
        "{npr:?}"
    );
    assert_eq!(f.failed.pools["dev-usc1/general"].phase, "Paused");

    // The retry was tried and did not help: the gate failed again, the pool is paused again
    // and still says so.
    assert!(f.retry.contains("rota.dev/request=retry@"), "{}", f.retry);
    let again = &f.retried.pools["dev-usc1/general"];
    assert_eq!(again.phase, "Paused", "{again:?}");
    let again = noted(&f.retried, "dev-usc1/general");
    assert!(
        again
            .description
            .starts_with("paused; next: rota ctl retry"),
        "{again:?}"
    );

    // rota proposed the revert of the canary wave, with the failures as evidence; a person
    // merged it.
    assert_eq!(
        f.revert_branch.as_deref(),
        Some("rota/revert/canary/general-2026.11.4"),
        "{:?}",
        f.proposal
    );
    assert!(
        f.proposal
            .iter()
            .any(|l| l.contains("2026.11.4 → 2026.11.2") && l.contains("revert")),
        "{:?}",
        f.proposal
    );
    assert!(
        o.log
            .contains("Merge branch 'rota/revert/canary/general-2026.11.4'"),
        "{}",
        o.log
    );

    // The revert in force: both pools done on 2026.11.2, and no view says a person is
    // needed anywhere in the fleet.
    let merged = &f.merged;
    assert_eq!(&merged.commit, &o.commits["revert-merged"]);
    for pool in ["canary-use1/general", "dev-usc1/general"] {
        let s = noted(merged, pool);
        assert_eq!(
            (s.state, s.description.as_str()),
            (State::Success, "3/3 nodes on general@2026.11.2"),
            "{pool}"
        );
        assert_eq!(s.stop, None, "{pool}: {s:?}");
        assert_eq!(merged.page_stops[pool], None, "{pool}");
        let npr = &merged.pools[pool];
        assert_eq!(
            (npr.phase.as_str(), npr.stop.as_deref()),
            ("Succeeded", None),
            "{npr:?}"
        );
        assert_eq!(npr.version, "2026.11.2", "{npr:?}");
    }
    assert!(
        !merged.fleet_text.contains("needs a person"),
        "{}",
        merged.fleet_text
    );
    assert_eq!(merged.page_needs_person, 0, "{:?}", merged.page_stops);

    // Each step in a line a newcomer reads.
    for line in [
        "] (d) the clouds publish general 2026.11.4, a bad build",
        "] a health gate fails on 2026.11.4's nodes",
        "] a person tries what dev-usc1/general's status suggests: rota ctl retry --cluster dev-usc1 --pool general",
        "] after the retry the gate fails again",
        "] rota propose reads the agents' records",
        "] a person reviews the revert and merges it",
        "] the revert is in force",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }
}
