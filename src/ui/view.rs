//! The fleet page's model, built once and kept: what `rota ui` answers every request from.
//! Reading the fleet and 10,000 clusters' notes from git takes seconds, and building the
//! model from them a fraction of one; a request must take neither. So a [`View`] holds the
//! inputs read from git ([`Loaded`]), the model built from them as of one moment, its
//! summary, and a generation number that the page's `ETag` carries: while the generation
//! stays, a tab's poll is answered `304 Not Modified` without rendering anything.
//!
//! When is it rebuilt? Each request compares a [`Stamp`] (the commit the revision names, and
//! the modification times of the files git keeps refs in), a handful of `stat` calls, with
//! the view's. Only when the stamp moved are the notes refs' tips read (10,000 lookups) to
//! tell whether the notes did change, and only then are the inputs read again (with the
//! commit unchanged, only the notes of the clusters whose refs moved:
//! [`load::reload_moved_notes`]); the model
//! alone is rebuilt, for the clock, every [`CLOCK_EVERY`] or longer on a big fleet (holds
//! that ran out, agents gone silent; see [`View::clock_every`]). A stamp may move without a change (a `git gc` packing refs): that costs one
//! tip read, never a wrong page. A change always moves it: git and libgit2 write a ref by
//! renaming a lock file into its directory (the directory's mtime moves) or by rewriting
//! `packed-refs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use chrono::{DateTime, Utc};
use git2::{Oid, Repository};

use super::UiError;
use super::load::{self, CommitLine, Loaded, RepoAt};
use super::model::FleetPage;
use super::summary::{FleetSummary, summarize};

/// How often, at least, the model is rebuilt for the clock alone when nothing in git moved:
/// the page's countdowns tick in the browser; what the server decides by the clock (a soak
/// or hold that ended, an agent silent for 30 minutes, a day held) is read on this scale.
pub const CLOCK_EVERY: Duration = Duration::from_secs(60);

/// A clock rebuild waits at least this many times as long as the last build took, so that
/// rebuilding for the clock costs at most 0.5% of a core: at 10,000 clusters a build takes
/// about half a second, so the clock is read every two minutes or so.
const CLOCK_COST_FACTOR: u32 = 200;

/// What moves when the revision or any ref of the repository moves (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    commit: Oid,
    /// `(path, mtime, length)` of `packed-refs` and of each directory notes refs live in.
    files: Vec<(PathBuf, Option<SystemTime>, u64)>,
}

fn stat(path: &Path) -> (PathBuf, Option<SystemTime>, u64) {
    match std::fs::metadata(path) {
        Ok(m) => (path.to_path_buf(), m.modified().ok(), m.len()),
        Err(_) => (path.to_path_buf(), None, 0),
    }
}

/// The stamp of `at` now. Blocking, but one repository open, a revision lookup and three
/// `stat`s.
pub fn stamp(at: &RepoAt) -> Result<Stamp, UiError> {
    let repo = Repository::open(&at.repo).map_err(|e| UiError::Git {
        repo: at.repo.clone(),
        message: e.message().to_string(),
    })?;
    let commit = load::resolve_in(&repo, &at.repo, &at.rev)?;
    let git_dir = repo.path();
    let files = [
        git_dir.join("packed-refs"),
        git_dir.join(crate::source::NOTES_PREFIX.trim_end_matches('/')),
        git_dir.join(crate::source::REMOTE_NOTES_PREFIX.trim_end_matches('/')),
    ]
    .iter()
    .map(|p| stat(p))
    .collect();
    Ok(Stamp { commit, files })
}

/// The page's model as of one moment, with what it was built from.
#[derive(Debug)]
pub struct View {
    /// The inputs, kept for the clock's rebuilds; let go of before the next full read of git
    /// ([`View::release_inputs`]), so that two fleets' inputs are never held at once.
    loaded: std::sync::Mutex<Option<Arc<Loaded>>>,
    /// What was read, and the declared clusters (whose notes a commit page shows).
    pub key: load::Key,
    pub names: Arc<Vec<String>>,
    pub commit_time: DateTime<Utc>,
    pub recent: Arc<Vec<CommitLine>>,
    pub page: FleetPage,
    /// The whole fleet's summary (a filtered view summarizes its own part).
    pub summary: FleetSummary,
    /// Bumped on every rebuild: the `ETag` of what is rendered from this view.
    pub generation: u64,
    /// The stamp the inputs were read at (taken before reading them: a ref that moved
    /// during the read moves the next stamp).
    pub stamp: Stamp,
    pub built: Instant,
    /// How long building the model took (not reading git).
    pub build_took: Duration,
}

impl View {
    /// Builds the model from `loaded` as of `now`. CPU only: a few hundred milliseconds at
    /// 10,000 clusters, so callers run it off the async threads.
    pub fn build(
        loaded: Arc<Loaded>,
        recent: Arc<Vec<CommitLine>>,
        stamp: Stamp,
        generation: u64,
        now: DateTime<Utc>,
    ) -> View {
        let started = Instant::now();
        let page = loaded.page(now);
        let summary = summarize(&page, loaded.commit_time, &Default::default());
        View {
            build_took: started.elapsed(),
            key: loaded.key.clone(),
            names: Arc::new(loaded.cluster_names()),
            commit_time: loaded.commit_time,
            loaded: std::sync::Mutex::new(Some(loaded)),
            recent,
            page,
            summary,
            generation,
            stamp,
            built: Instant::now(),
        }
    }

    /// Whether a request that found `stamp` needs a newer view.
    pub fn stale(&self, stamp: &Stamp) -> bool {
        &self.stamp != stamp || self.built.elapsed() >= self.clock_every()
    }

    /// When this model is rebuilt for the clock alone.
    pub fn clock_every(&self) -> Duration {
        CLOCK_EVERY.max(self.build_took * CLOCK_COST_FACTOR)
    }

    /// The part of the fleet `filter` selects and its summary: the whole page and the kept
    /// summary when nothing narrows it (no copy, nothing recounted).
    pub fn select(
        &self,
        filter: &super::text::Filter,
    ) -> (
        std::borrow::Cow<'_, FleetPage>,
        std::borrow::Cow<'_, FleetSummary>,
    ) {
        use std::borrow::Cow;
        let selected = filter.apply(&self.page);
        let summary = match &selected {
            Cow::Borrowed(_) => Cow::Borrowed(&self.summary),
            Cow::Owned(part) => Cow::Owned(summarize(part, self.commit_time, &Default::default())),
        };
        (selected, summary)
    }

    fn inputs(&self) -> Option<Arc<Loaded>> {
        self.loaded
            .lock()
            .expect("no panics under the lock")
            .clone()
    }

    /// Takes the inputs out of this view (whole when no other rebuild shares them, else a
    /// copy), so that a rebuild updates them in place; `None` when they are gone.
    fn take_inputs(&self) -> Option<Loaded> {
        let taken = self
            .loaded
            .lock()
            .expect("no panics under the lock")
            .take()?;
        Some(Arc::try_unwrap(taken).unwrap_or_else(|shared| (*shared).clone()))
    }

    /// Drops the inputs (the page stays servable): at 10,000 clusters they are about half
    /// of what the server holds, and the next read of git allocates as much again.
    fn release_inputs(&self) {
        let old = self.loaded.lock().expect("no panics under the lock").take();
        drop(old);
        crate::memory::trim();
    }
}

/// The next view of `at`, given the last one (if any) and the stamp that made it stale: the
/// same inputs rebuilt for the clock when neither the commit nor any notes tip moved, else
/// the inputs read again.
pub async fn next(
    at: &RepoAt,
    last: Option<Arc<View>>,
    stamp: Stamp,
    generation: u64,
) -> Result<View, UiError> {
    // What the last view's inputs still hold: all of them when neither the commit nor any
    // notes tip moved (a rebuild for the clock); all but the moved clusters' notes when only
    // notes moved.
    let same_commit = matches!(&last, Some(v) if v.stamp.commit == stamp.commit);
    let same = match &last {
        Some(v) if same_commit => {
            load::key_now(at, &v.key, &v.names).await?.as_ref() == Some(&v.key)
        }
        _ => false,
    };
    let (loaded, recent) = match &last {
        Some(v) if same => match v.inputs() {
            Some(loaded) => (loaded, Arc::clone(&v.recent)),
            None => reload(at).await?,
        },
        // Only notes moved: the notes of the clusters whose refs moved are read again.
        Some(v) if same_commit => match v.take_inputs() {
            Some(inputs) => {
                let loaded = Arc::new(load::reload_moved_notes(at, inputs).await?);
                let recent = Arc::new(load::recent_of(at, &loaded).await?);
                (loaded, recent)
            }
            None => reload(at).await?,
        },
        Some(v) => {
            v.release_inputs();
            reload(at).await?
        }
        None => reload(at).await?,
    };
    tokio::task::spawn_blocking(move || View::build(loaded, recent, stamp, generation, Utc::now()))
        .await
        .map_err(|e| UiError::Notes(format!("building the page failed: {e}")))
}

/// Everything read from git again: the fleet, the notes, the recent commits.
async fn reload(at: &RepoAt) -> Result<(Arc<Loaded>, Arc<Vec<CommitLine>>), UiError> {
    let loaded = Arc::new(load::load(at).await?);
    let recent = Arc::new(load::recent_of(at, &loaded).await?);
    Ok((loaded, recent))
}
