//! Helpers: run git, make repos and commits; `GitDaemon` (a `git daemon` on loopback) is
//! shared with the other targets in `tests/support/git.rs`.

use std::path::Path;
use std::process::Command;

pub use crate::support::git::GitDaemon;

/// Runs git in `dir` with a fixed identity; panics with git's output on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=Fleet Admin",
            "-c",
            "user.email=admin@acme.test",
        ])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git is installed");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A working repo with one commit of `fleet.yaml`; returns the commit id.
pub fn init_repo(dir: &Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    commit_file(dir, "fleet.yaml", "kind: Fleet\n", "first")
}

/// Writes `path` and commits it; returns the new commit id.
pub fn commit_file(dir: &Path, path: &str, content: &str, message: &str) -> String {
    let full = dir.join(path);
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(&full, content).unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
    git(dir, &["rev-parse", "HEAD"])
}

pub fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}
