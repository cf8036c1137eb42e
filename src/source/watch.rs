//! Development mode: watch a local working copy of the fleet repo with `notify` and fire the
//! poll loop's trigger when it changes, so a `git commit` is picked up at once instead of at
//! the next poll. rota still reads commits, never the uncommitted files: the watch only says
//! "look now".

use std::path::{Component, Path};

use notify::{Event, EventKind, RecursiveMode, Watcher};

use super::poll::Trigger;

/// Keeps the watch alive; dropping it stops watching.
pub struct WorkingCopyWatch {
    _watcher: notify::RecommendedWatcher,
}

impl std::fmt::Debug for WorkingCopyWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkingCopyWatch")
    }
}

/// Watches `dir` recursively and fires `trigger` on every relevant change.
pub fn watch_working_copy(dir: &Path, trigger: Trigger) -> notify::Result<WorkingCopyWatch> {
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<Event>| match res {
        Ok(event) if relevant(&event) => trigger.fire(),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "watching the working copy"),
    })?;
    watcher.watch(dir, RecursiveMode::Recursive)?;
    Ok(WorkingCopyWatch { _watcher: watcher })
}

/// Reads and object-store churn (`.git/objects`, lock files) say nothing new: a commit also
/// moves a ref, which is what we wait for.
fn relevant(event: &Event) -> bool {
    if matches!(event.kind, EventKind::Access(_)) {
        return false;
    }
    event.paths.iter().any(|p| !is_noise(p))
}

fn is_noise(path: &Path) -> bool {
    let in_objects = path.components().collect::<Vec<_>>().windows(2).any(|w| {
        w[0] == Component::Normal(".git".as_ref()) && w[1] == Component::Normal("objects".as_ref())
    });
    in_objects || path.extension().is_some_and(|e| e == "lock")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::Duration;

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    #[test]
    fn object_churn_is_noise() {
        assert!(is_noise(Path::new("/w/.git/objects/ab/cdef")));
        assert!(is_noise(Path::new("/w/.git/refs/heads/main.lock")));
        assert!(!is_noise(Path::new("/w/.git/refs/heads/main")));
        assert!(!is_noise(Path::new("/w/clusters/prod.yaml")));
    }

    #[tokio::test]
    async fn a_commit_in_the_working_copy_fires_the_trigger() {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "-b", "main"]);
        std::fs::write(dir.path().join("fleet.yaml"), "a: 1\n").unwrap();
        git(dir.path(), &["add", "."]);
        git(dir.path(), &["commit", "-q", "-m", "one"]);

        let trigger = Trigger::new();
        let _watch = watch_working_copy(dir.path(), trigger.clone()).unwrap();
        std::fs::write(dir.path().join("fleet.yaml"), "a: 2\n").unwrap();
        git(dir.path(), &["commit", "-q", "-am", "two"]);
        // Real inotify events: a generous bound that only fails if no event ever comes.
        tokio::time::timeout(Duration::from_secs(20), trigger.fired())
            .await
            .expect("the watch fired");
    }
}
