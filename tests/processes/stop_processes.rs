//! `rota stop` as a user runs it: the built binary, in a clone of a fleet repo whose remote is
//! a `git daemon` on loopback. A stop is written and pushed, read back from the remote by
//! another clone (`rota stop --list`), cleared, and the mistakes a person makes in an
//! incident (no reason, a wave that does not exist) are refused with their exit codes and
//! nothing pushed.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::git::{GitDaemon, git, rota};

fn stop(clone: &Path, args: &[&str]) -> Output {
    Command::new(rota())
        .arg("stop")
        .args(args)
        .arg("--repo")
        .arg(clone)
        // The operator's identity, as their git config would give it.
        .env("GIT_AUTHOR_NAME", "On Call")
        .env("GIT_AUTHOR_EMAIL", "oncall@example.com")
        .env("GIT_COMMITTER_NAME", "On Call")
        .env("GIT_COMMITTER_EMAIL", "oncall@example.com")
        .output()
        .expect("the rota binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).trim().to_string()
}

/// The example fleet pushed to a bare repo served on loopback; two clones of it.
fn served(root: &Path) -> (GitDaemon, std::path::PathBuf, std::path::PathBuf) {
    let base = root.join("served");
    std::fs::create_dir_all(&base).unwrap();
    git(&base, &["init", "-q", "--bare", "-b", "main", "fleet.git"]);
    let work = root.join("work");
    crate::support::example_repo::copy_to(&work);
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "the example fleet"]);
    let daemon = GitDaemon::start(&base);
    let url = daemon.url("fleet.git");
    git(&work, &["push", "-q", &url, "main"]);
    let (a, b) = (root.join("a"), root.join("b"));
    for c in [&a, &b] {
        git(root, &["clone", "-q", &url, c.to_str().unwrap()]);
    }
    (daemon, a, b)
}

#[test]
fn rota_stop_writes_pushes_lists_and_clears_through_a_loopback_remote() {
    let t = tempfile::tempdir().unwrap();
    let (daemon, a, b) = served(t.path());
    let bare = t.path().join("served/fleet.git");
    let stop_ref = |dir: &Path| {
        Command::new("git")
            .args([
                "--git-dir",
                dir.to_str().unwrap(),
                "rev-parse",
                "-q",
                "--verify",
            ])
            .arg("refs/rota/stop")
            .output()
            .map(|o| text(&o.stdout))
            .unwrap()
    };

    // Nothing in force yet.
    let out = stop(&b, &["--list"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "no fleet stop in force");

    // Mistakes: no reason (the command line's rule), a wave the fleet does not have.
    let out = stop(&a, &["--wave", "canary"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--reason"),
        "{}",
        text(&out.stderr)
    );
    let out = stop(&a, &["--wave", "canari", "--reason", "INC-9"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "rota stop: wave canari is not in the fleet at HEAD (waves: canary, early, main)"
    );
    assert_eq!(stop_ref(&bare), "", "nothing pushed by a refused stop");

    // The stop: written, pushed to the daemon, read back by the other clone.
    let out = stop(&a, &["--wave", "canary", "--reason", "INC-4711: 5xx up"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.starts_with("stop ")
            && said.contains("(wave canary) written on refs/rota/stop and pushed to origin"),
        "{said}"
    );
    let id = stop_ref(&bare);
    assert_eq!(id.len(), 40, "the remote holds the stop: {id:?}");
    assert!(said.contains(&id[..12]), "{said} names {id}");
    let out = stop(&b, &["--list"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let listed = text(&out.stdout);
    assert!(
        listed.starts_with(&format!("fleet stop {}", &id[..12]))
            && listed.contains("(wave canary) by On Call <oncall@example.com>, unverified")
            && listed.contains("INC-4711: 5xx up"),
        "{listed}"
    );

    // A clear of another scope lifts nothing and says what is in force; the right one
    // lifts it, from the other clone.
    let out = stop(&b, &["--clear"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("rota stop: no stop in force for the whole fleet"),
        "{}",
        text(&out.stderr)
    );
    let out = stop(&b, &["--clear", "--wave", "canary"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("clear ") && text(&out.stdout).contains(&id[..12]),
        "{}",
        text(&out.stdout)
    );
    let cleared = stop_ref(&bare);
    assert_ne!(cleared, id, "the clear is a new order on the remote's ref");
    let out = stop(&a, &["--list"]);
    assert_eq!(text(&out.stdout), "no fleet stop in force");
    drop(daemon);
}
