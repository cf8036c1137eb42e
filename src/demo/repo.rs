//! The demo's fleet git repo: `examples/fleet-repo` (embedded in the binary, so `rota demo`
//! runs from anywhere) turned into a bare "origin" that the agents follow and a work clone
//! where the story commits, merges and reverts with the real `git` command, as people do.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The example fleet repo, file by file (a test checks this list against the folder).
pub const EXAMPLE: &[(&str, &str)] = &[
    (
        "README.md",
        include_str!("../../examples/fleet-repo/README.md"),
    ),
    (
        "fleet.yaml",
        include_str!("../../examples/fleet-repo/fleet.yaml"),
    ),
    (
        "clusters/aws/canary-use1.yaml",
        include_str!("../../examples/fleet-repo/clusters/aws/canary-use1.yaml"),
    ),
    (
        "clusters/aws/prod-use1.yaml",
        include_str!("../../examples/fleet-repo/clusters/aws/prod-use1.yaml"),
    ),
    (
        "clusters/aws/prod-usw2.yaml",
        include_str!("../../examples/fleet-repo/clusters/aws/prod-usw2.yaml"),
    ),
    (
        "clusters/azure/prod-weu.yaml",
        include_str!("../../examples/fleet-repo/clusters/azure/prod-weu.yaml"),
    ),
    (
        "clusters/azure/staging-neu.yaml",
        include_str!("../../examples/fleet-repo/clusters/azure/staging-neu.yaml"),
    ),
    (
        "clusters/gcp/dev-usc1.yaml",
        include_str!("../../examples/fleet-repo/clusters/gcp/dev-usc1.yaml"),
    ),
    (
        "clusters/gcp/prod-euw1.yaml",
        include_str!("../../examples/fleet-repo/clusters/gcp/prod-euw1.yaml"),
    ),
    (
        "gates/node-events.yaml",
        include_str!("../../examples/fleet-repo/gates/node-events.yaml"),
    ),
    (
        "gates/pods-healthy.yaml",
        include_str!("../../examples/fleet-repo/gates/pods-healthy.yaml"),
    ),
    (
        "gates/prometheus.yaml",
        include_str!("../../examples/fleet-repo/gates/prometheus.yaml"),
    ),
];

/// The bare origin and the work clone.
#[derive(Debug, Clone)]
pub struct DemoRepo {
    pub origin: PathBuf,
    pub work: PathBuf,
}

impl DemoRepo {
    /// `dir/fleet.git` (bare, branch `main`) and `dir/work`, a clone with the example files
    /// written but not committed yet.
    pub fn create(dir: &Path) -> Result<DemoRepo, String> {
        let origin = dir.join("fleet.git");
        let work = dir.join("work");
        std::fs::create_dir_all(&origin)
            .map_err(|e| format!("cannot create {}: {e}", origin.display()))?;
        git(&origin, &["init", "-q", "--bare", "-b", "main"])?;
        git(dir, &["clone", "-q", "fleet.git", "work"])?;
        git(&work, &["checkout", "-q", "-b", "main"])?;
        git(&work, &["config", "user.name", "Platform Team"])?;
        git(&work, &["config", "user.email", "platform@acme.example"])?;
        for (path, text) in EXAMPLE {
            let to = work.join(path);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            }
            std::fs::write(&to, text).map_err(|e| format!("cannot write {}: {e}", to.display()))?;
        }
        Ok(DemoRepo { origin, work })
    }

    pub fn read(&self, path: &str) -> Result<String, String> {
        let p = self.work.join(path);
        std::fs::read_to_string(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))
    }

    /// Replaces exactly one occurrence of `from` in `path` (a text edit like a person's: the
    /// rest of the file, comments included, stays as it is).
    pub fn edit(&self, path: &str, from: &str, to: &str) -> Result<(), String> {
        let text = self.read(path)?;
        if text.matches(from).count() != 1 {
            return Err(format!(
                "demo: {path} does not contain exactly one {from:?} (was examples/fleet-repo changed?)"
            ));
        }
        let p = self.work.join(path);
        std::fs::write(&p, text.replacen(from, to, 1))
            .map_err(|e| format!("cannot write {}: {e}", p.display()))
    }

    /// `git add -A && git commit -m message`; returns the new commit's id.
    pub fn commit(&self, message: &str) -> Result<String, String> {
        self.git(&["add", "-A"])?;
        self.git(&["commit", "-q", "-m", message])?;
        self.git(&["rev-parse", "HEAD"])
    }

    pub fn push(&self) -> Result<(), String> {
        self.git(&["push", "-q", "origin", "HEAD"]).map(|_| ())
    }

    pub fn git(&self, args: &[&str]) -> Result<String, String> {
        git(&self.work, args)
    }
}

/// Runs `git` in `dir` with a fixed identity; stdout, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Platform Team")
        .env("GIT_AUTHOR_EMAIL", "platform@acme.example")
        .env("GIT_COMMITTER_NAME", "Platform Team")
        .env("GIT_COMMITTER_EMAIL", "platform@acme.example")
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| format!("cannot run git (is it installed?): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {} in {}: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded copy must be the whole example repo, or the demo would play an older one.
    #[test]
    fn every_file_of_the_example_repo_is_embedded() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo");
        let mut on_disk = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let rel = p
                        .strip_prefix(&root)
                        .unwrap()
                        .to_string_lossy()
                        .replace('\\', "/");
                    on_disk.push((rel.clone(), std::fs::read_to_string(&p).unwrap()));
                }
            }
        }
        on_disk.sort();
        let mut embedded: Vec<(String, String)> = EXAMPLE
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect();
        embedded.sort();
        assert_eq!(embedded, on_disk);
    }
}
