//! Helpers shared by the agent tests (`agent_sim`, `agent_processes`, `promote`): run git with
//! a fixed identity, a fleet repo's origin and the clone people push from, find the rota
//! binary, serve repos with a `git daemon` on loopback.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Runs git in `dir` as `t <t@example.com>`; panics with git's stderr on failure; stdout,
/// trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// [`git`] with `input` on its stdin (`update-ref --stdin`, `hash-object --stdin`).
pub fn git_stdin(dir: &Path, args: &[&str], input: &[u8]) -> String {
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("git is installed");
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A fleet repo as the agents follow it: a bare `fleet.git` on `main` in `dir` (the agents'
/// remote) and a clone of it, `dir/<clone>`, on `main`, where people commit and push.
pub fn origin_and_clone(dir: &Path, clone: &str) -> (PathBuf, PathBuf) {
    let origin = dir.join("fleet.git");
    std::fs::create_dir_all(&origin).unwrap();
    git(&origin, &["init", "-q", "--bare", "-b", "main"]);
    git(dir, &["clone", "-q", "fleet.git", clone]);
    let work = dir.join(clone);
    git(&work, &["checkout", "-q", "-b", "main"]);
    (origin, work)
}

/// Everything in `work` committed as `message` and pushed to its origin's `main`.
pub fn commit_and_push(work: &Path, message: &str) {
    git(work, &["add", "-A"]);
    git(work, &["commit", "-q", "-m", message]);
    git(work, &["push", "-q", "origin", "main"]);
}

/// The rota binary; `ROTA_TEST_BIN` overrides it (a private copy when several worktrees
/// share one target directory and overwrite each other's binary).
pub fn rota() -> PathBuf {
    std::env::var_os("ROTA_TEST_BIN")
        .map(Into::into)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_rota").into())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn git_daemon() -> std::path::PathBuf {
    let out = Command::new("git").arg("--exec-path").output().unwrap();
    Path::new(String::from_utf8_lossy(&out.stdout).trim()).join("git-daemon")
}

/// A `git daemon` serving `base` on 127.0.0.1; killed on drop.
pub struct GitDaemon {
    child: std::process::Child,
    pub port: u16,
}

impl GitDaemon {
    pub fn start(base: &Path) -> GitDaemon {
        // git daemon cannot report an ephemeral port: pick a free one, retry if taken.
        for _ in 0..5 {
            let port = free_port();
            // Run git-daemon itself: `git daemon` is a wrapper whose child would outlive
            // a kill of the wrapper.
            let mut child = Command::new(git_daemon())
                .arg("--reuseaddr")
                .arg(format!("--base-path={}", base.display()))
                .arg("--export-all")
                .arg("--enable=receive-pack")
                .arg("--listen=127.0.0.1")
                .arg(format!("--port={port}"))
                .arg(base)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("git daemon");
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while std::time::Instant::now() < deadline {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return GitDaemon { child, port };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break; // port taken: try another
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("git daemon did not start");
    }

    pub fn url(&self, repo: &str) -> String {
        format!("git://127.0.0.1:{}/{repo}", self.port)
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
