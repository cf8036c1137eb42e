//! `rota stop`: stop rotations across the fleet, a wave or a cluster, without a review. The
//! order is one commit on the fleet repo's stop ref (`refs/rota/stop`), written in a local
//! clone and pushed with the operator's own push rights; every agent reads the ref on each
//! poll and webhook and holds its pools at their next safe point. `--clear` writes the clear
//! that lifts the stops in force with the same scope; `--list` shows what is in force.
//!
//! The git command line writes and pushes (so the user's signing setup, remotes, credential
//! helpers and SSH apply); what the orders mean is `rota_core::fleet::stops`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use clap::Args;

use rota_core::fleet::stops::{self, Action, ORDER_FILE, Order, STOP_REF, Stops};

#[derive(Args, Debug)]
pub struct StopArgs {
    /// Stop (or clear) this wave only.
    #[arg(long)]
    pub wave: Option<String>,
    /// Stop (or clear) this cluster only.
    #[arg(long)]
    pub cluster: Option<String>,
    /// Why: shown in every status, Event and on the page (required to stop).
    #[arg(long, required_unless_present_any = ["clear", "list"])]
    pub reason: Option<String>,
    /// Lift the stops in force with exactly this scope (the same --wave and --cluster).
    #[arg(long, conflicts_with_all = ["reason", "list"])]
    pub clear: bool,
    /// With --clear: lift this stop by the id statuses show (12 digits or all 40), whatever
    /// its scope. Repeatable.
    #[arg(long = "id", requires = "clear")]
    pub ids: Vec<String>,
    /// Show the stops in force, and clears that were refused.
    #[arg(long, conflicts_with = "reason")]
    pub list: bool,
    /// A clone of the fleet repo.
    #[arg(long, env = "ROTA_REPO", default_value = ".")]
    pub repo: PathBuf,
    /// The remote to fetch the stop ref from and push the order to.
    #[arg(long, default_value = "origin")]
    pub remote: String,
    /// Write the order in the clone only (push it with `git push REMOTE refs/rota/stop`).
    #[arg(long)]
    pub no_push: bool,
    /// Sign the order with your git signing key (`git commit-tree -S`: user.signingkey,
    /// gpg.format). Agents with commit signers configured count a signed order as trusted:
    /// only a clear at least as trusted lifts a stop.
    #[arg(long)]
    pub sign: bool,
}

pub fn run(args: StopArgs) -> ExitCode {
    match order(&args) {
        Ok(said) => {
            println!("{said}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rota stop: {e}");
            ExitCode::from(1)
        }
    }
}

/// Writes (and pushes) the order `args` ask for, or lists the stops; what to print.
pub fn order(args: &StopArgs) -> Result<String, String> {
    // clap's `requires` counts the flag's default: said here instead.
    if !args.ids.is_empty() && !args.clear {
        return Err("--id names stops to lift: it goes with --clear".into());
    }
    if !args.no_push {
        fetch(&args.repo, &args.remote)?;
    }
    let repo = git2::Repository::open(&args.repo).map_err(|e| {
        format!(
            "{}: not a git repository: {}",
            args.repo.display(),
            e.message()
        )
    })?;
    let parent = repo.refname_to_id(STOP_REF).ok();
    let in_force = match parent {
        None => Stops::default(),
        Some(tip) => {
            let (orders, unreadable) = crate::agent::stops::read_orders(&repo, tip, None)?;
            let mut s = stops::fold(&orders);
            s.refused.splice(0..0, unreadable);
            s
        }
    };
    if args.list {
        return Ok(list(&in_force));
    }
    let (wave, cluster) = (args.wave.as_deref(), args.cluster.as_deref());
    let order = if args.clear {
        let clears = to_clear(&in_force, wave, cluster, &args.ids)?;
        Order {
            action: Action::Clear,
            wave: args.wave.clone(),
            cluster: args.cluster.clone(),
            reason: String::new(),
            clears,
        }
    } else {
        Order {
            action: Action::Stop,
            wave: args.wave.clone(),
            cluster: args.cluster.clone(),
            reason: args.reason.clone().unwrap_or_default(),
            clears: Vec::new(),
        }
    };
    order.check()?;
    if order.action == Action::Stop {
        known_scope(&args.repo, wave, cluster)?;
    }
    let scope = stops::scope(wave, cluster);
    let subject = match order.action {
        Action::Stop => format!("rota stop: {scope}: {}", order.reason.trim()),
        Action::Clear => format!("rota stop --clear: {scope}"),
    };
    let id = write_order(&args.repo, &order, parent, &subject, args.sign)?;
    let short = &id[..12];
    let what = match order.action {
        Action::Stop => format!("stop {short} ({scope}) written on {STOP_REF}"),
        Action::Clear => format!(
            "clear {short} of {} written on {STOP_REF}",
            order
                .clears
                .iter()
                .map(|c| &c[..12])
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    if args.no_push {
        return Ok(format!(
            "{what}; not pushed: git -C {} push {} {STOP_REF}",
            args.repo.display(),
            args.remote
        ));
    }
    push(&args.repo, &args.remote)?;
    Ok(format!(
        "{what} and pushed to {}: every agent holds (or resumes) at its next poll",
        args.remote
    ))
}

/// The ids a clear lifts: the stops in force with exactly this scope, and those named.
fn to_clear(
    in_force: &Stops,
    wave: Option<&str>,
    cluster: Option<&str>,
    ids: &[String],
) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = if ids.is_empty() {
        in_force
            .with_scope(wave, cluster)
            .into_iter()
            .map(|s| s.id.clone())
            .collect()
    } else {
        Vec::new()
    };
    for id in ids {
        let id = id.to_ascii_lowercase();
        let full = match in_force.in_force.iter().find(|s| s.id.starts_with(&id)) {
            Some(s) => s.id.clone(),
            // A stop the ref no longer shows (the pools still carry it): by its full id.
            None if id.len() == 40 => id,
            None => {
                return Err(format!(
                    "no stop in force has id {id}; rota stop --list shows them"
                ));
            }
        };
        if !out.contains(&full) {
            out.push(full);
        }
    }
    if out.is_empty() {
        return Err(format!(
            "no stop in force for {} (a clear takes the same --wave and --cluster as the stop, or --id)\n{}",
            stops::scope(wave, cluster),
            list(in_force)
        ));
    }
    Ok(out)
}

/// A stop names a wave and a cluster the fleet has (at the clone's HEAD): a typo would
/// otherwise stop nothing, silently, in an incident.
fn known_scope(repo: &Path, wave: Option<&str>, cluster: Option<&str>) -> Result<(), String> {
    if wave.is_none() && cluster.is_none() {
        return Ok(());
    }
    let fleet = crate::source::read::load_git(repo, "HEAD").map_err(|d| {
        format!(
            "the fleet at HEAD of {} does not load, so --wave and --cluster cannot be checked:\n{}",
            repo.display(),
            d.render(rota_core::fleet::Format::Human)
        )
    })?;
    if let Some(w) = wave
        && !fleet.waves().iter().any(|x| x.name == w)
    {
        let names: Vec<&str> = fleet.waves().iter().map(|x| x.name.as_str()).collect();
        return Err(format!(
            "wave {w} is not in the fleet at HEAD (waves: {})",
            names.join(", ")
        ));
    }
    if let Some(c) = cluster
        && !fleet.cluster_names().any(|x| x == c)
    {
        return Err(format!("cluster {c} is not in the fleet at HEAD"));
    }
    Ok(())
}

fn list(s: &Stops) -> String {
    let mut out = String::new();
    if s.in_force.is_empty() {
        out.push_str("no fleet stop in force\n");
    }
    for stop in &s.in_force {
        out.push_str(&format!("{}\n", stop.describe()));
    }
    for why in &s.refused {
        out.push_str(&format!("refused: {why}\n"));
    }
    out.trim_end().to_string()
}

fn git(repo: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-C").arg(repo);
    c
}

fn run_git(mut cmd: Command, input: Option<&str>, what: &str) -> Result<String, String> {
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("cannot run git: {e}"))?;
    if let Some(text) = input {
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(text.as_bytes())
            .map_err(|e| format!("{what}: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed: {}",
            rota_core::sanitize::text(String::from_utf8_lossy(&out.stderr).trim())
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `git fetch REMOTE +refs/rota/stop:refs/rota/stop`; a remote without the ref is fine.
fn fetch(repo: &Path, remote: &str) -> Result<(), String> {
    let has = run_git(
        {
            let mut c = git(repo);
            c.args(["ls-remote", remote, STOP_REF]);
            c
        },
        None,
        &format!("git ls-remote {remote}"),
    )?;
    if has.is_empty() {
        return Ok(());
    }
    let mut c = git(repo);
    c.args(["fetch", "--quiet", remote])
        .arg(format!("+{STOP_REF}:{STOP_REF}"));
    run_git(c, None, &format!("git fetch {remote} {STOP_REF}")).map(|_| ())
}

/// One commit on the stop ref holding `order`, its parent the ref's tip (compare-and-swap:
/// an order written meanwhile makes the update fail rather than be lost).
fn write_order(
    repo: &Path,
    order: &Order,
    parent: Option<git2::Oid>,
    subject: &str,
    sign: bool,
) -> Result<String, String> {
    let mut c = git(repo);
    c.args(["hash-object", "-w", "--stdin"]);
    let blob = run_git(c, Some(&order.to_json()), "git hash-object")?;
    let mut c = git(repo);
    c.arg("mktree");
    let tree = run_git(
        c,
        Some(&format!("100644 blob {blob}\t{ORDER_FILE}\n")),
        "git mktree",
    )?;
    let mut c = git(repo);
    c.arg("commit-tree").arg(&tree);
    if sign {
        c.arg("-S");
    }
    if let Some(p) = parent {
        c.arg("-p").arg(p.to_string());
    }
    c.arg("-F").arg("-");
    let id = run_git(c, Some(&format!("{subject}\n")), "git commit-tree")?;
    let mut c = git(repo);
    c.args(["update-ref", STOP_REF, &id]).arg(
        parent
            .map(|p| p.to_string())
            .unwrap_or_else(|| "0".repeat(40)),
    );
    run_git(c, None, &format!("git update-ref {STOP_REF}"))?;
    Ok(id)
}

/// `git push REMOTE refs/rota/stop` (never forced: an order pushed meanwhile by someone else
/// is kept, and this one is refused until fetched and rewritten).
fn push(repo: &Path, remote: &str) -> Result<(), String> {
    let mut c = git(repo);
    c.args(["push", "--quiet", remote])
        .arg(format!("{STOP_REF}:{STOP_REF}"));
    run_git(c, None, &format!("git push {remote} {STOP_REF}"))
        .map(|_| ())
        .map_err(|e| {
            format!("{e}\n(another order may have been pushed meanwhile: run the command again)")
        })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> Result<super::StopArgs, String> {
        match Cli::try_parse_from(std::iter::once("rota").chain(args.iter().copied())) {
            Ok(Cli {
                command: Command::Stop(a),
            }) => Ok(a),
            Ok(other) => Err(format!("{other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// A stop says why; a clear and a list do not take a reason; `--id` only clears.
    #[test]
    fn the_command_line_asks_a_reason_to_stop_and_none_to_clear() {
        let a = parse(&["stop", "--wave", "main", "--reason", "INC-1"]).unwrap();
        assert_eq!(
            (a.wave.as_deref(), a.reason.as_deref()),
            (Some("main"), Some("INC-1"))
        );
        assert!(parse(&["stop", "--wave", "main"]).is_err());
        let a = parse(&["stop", "--clear", "--wave", "main"]).unwrap();
        assert!(a.clear && a.reason.is_none());
        assert!(parse(&["stop", "--clear", "--reason", "x"]).is_err());
        let stray = parse(&["stop", "--id", "1a2b3c4d5e6f", "--reason", "x"]);
        assert!(
            stray.is_err()
                || super::order(&stray.unwrap())
                    .unwrap_err()
                    .contains("--clear"),
            "--id without --clear"
        );
        assert_eq!(
            parse(&["stop", "--clear", "--id", "1a2b3c4d5e6f"])
                .unwrap()
                .ids,
            ["1a2b3c4d5e6f"]
        );
        assert!(parse(&["stop", "--list"]).unwrap().list);
    }
}
