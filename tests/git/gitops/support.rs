//! Helpers: run git, make repos and commits, start a `git daemon` on loopback.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
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
    child: Child,
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
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("git daemon");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return GitDaemon { child, port };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break; // port taken: try another
                }
                std::thread::sleep(Duration::from_millis(20));
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

pub fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}
