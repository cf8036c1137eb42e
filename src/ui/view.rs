//! The fleet page's model, built once and kept: what `rota ui` answers every request from.
//! Reading the fleet and 10,000 clusters' notes from git takes seconds, and building the
//! model from them a fraction of one; a request must take neither. So a [`View`] holds the
//! inputs read from git ([`Loaded`]), the model built from them as of one moment, its
//! summary, and a generation number that the page's `ETag` carries: while the generation
//! stays, a tab's poll is answered `304 Not Modified` without rendering anything. The
//! generation names what the page shows, not the build: a rebuild that shows the same (one
//! for the clock that changed no decision, a stamp that moved with nothing under it) keeps
//! it ([`View::shows_the_same_as`]), so an open tab is not sent the same page again.
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
    /// The `ETag` of what is rendered from this view: a rebuild that shows something else
    /// takes a new one, one that shows the same keeps its last view's.
    pub generation: u64,
    /// The stamp the inputs were read at (taken before reading them: a ref that moved
    /// during the read moves the next stamp).
    pub stamp: Stamp,
    pub built: Instant,
    /// How long building the model took (not reading git).
    pub build_took: Duration,
}

impl View {
    /// Builds the model from `loaded` as of `now`, under `generation` unless it shows what
    /// `last` shows (then under `last`'s). CPU only: a few hundred milliseconds at 10,000
    /// clusters, so callers run it off the async threads.
    pub fn build(
        loaded: Arc<Loaded>,
        recent: Arc<Vec<CommitLine>>,
        stamp: Stamp,
        generation: u64,
        now: DateTime<Utc>,
        last: Option<&View>,
    ) -> View {
        let started = Instant::now();
        let page = loaded.page(now);
        let summary = summarize(&page, loaded.commit_time, &Default::default());
        let mut view = View {
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
        };
        if let Some(last) = last.filter(|last| view.shows_the_same_as(last)) {
            view.generation = last.generation;
        }
        view
    }

    /// Whether a tab showing what `earlier` rendered shows what this view renders: the same
    /// page but for its `now` ([`FleetPage::same_but_now`]), the same summary (its texts say
    /// ages: "made 1d 6h ago"), the same commit list. The "as of" stamp the two differ in
    /// reaches the tab with every answer, a `304` too (`ui::server`).
    pub fn shows_the_same_as(&self, earlier: &View) -> bool {
        self.page.same_but_now(&earlier.page)
            && self.summary == earlier.summary
            && (Arc::ptr_eq(&self.recent, &earlier.recent) || self.recent == earlier.recent)
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
    tokio::task::spawn_blocking(move || {
        View::build(
            loaded,
            recent,
            stamp,
            generation,
            Utc::now(),
            last.as_deref(),
        )
    })
    .await
    .map_err(|e| UiError::Notes(format!("building the page failed: {e}")))
}

/// Everything read from git again: the fleet, the notes, the recent commits.
async fn reload(at: &RepoAt) -> Result<(Arc<Loaded>, Arc<Vec<CommitLine>>), UiError> {
    let loaded = Arc::new(load::load(at).await?);
    let recent = Arc::new(load::recent_of(at, &loaded).await?);
    Ok((loaded, recent))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::note_doc::{NoteDoc, NoteStatus};
    use crate::report::{State, pool_context};
    use rota_core::waves::PoolRecord;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    /// The example fleet at one commit made at 10:15: canary (soak 2h) completed
    /// general@2026.11.2 at 10:00, so the early wave's pools are held by the guard until
    /// 12:00; `docs` are the agents' notes. The agents without a note count as silent from
    /// 10:45, and the summary says for how long ("made 1h 45m ago"): text that moves with
    /// the minute, and so with the page's tag.
    fn inputs(docs: Vec<NoteDoc>) -> Arc<Loaded> {
        let fleet = crate::source::read::load_dir(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo"),
        )
        .unwrap();
        let clusters = fleet.resolve_all().unwrap();
        let done = at("2026-11-23T10:00:00Z");
        let records = ["canary-use1", "dev-usc1"]
            .iter()
            .map(|c| PoolRecord::new(c, "general").completed("general", "2026.11.2", done))
            .collect();
        Arc::new(Loaded {
            fleet,
            clusters,
            head_docs: docs,
            records,
            note_bytes: Default::default(),
            verified: false,
            commit_time: at("2026-11-23T10:15:00Z"),
            key: (Oid::ZERO_SHA1, Vec::new()),
        })
    }

    fn note(cluster: &str, pool: &str, description: &str) -> NoteDoc {
        NoteDoc {
            cluster: cluster.into(),
            statuses: vec![NoteStatus {
                context: pool_context(cluster, pool),
                state: State::Pending,
                description: description.into(),
                target_url: None,
                updated_at: at("2026-11-23T10:20:00Z"),
                stop: None,
            }],
            pools: Vec::new(),
            signed: None,
        }
    }

    fn build(loaded: &Arc<Loaded>, generation: u64, now: &str, last: Option<&View>) -> View {
        let stamp = Stamp {
            commit: Oid::ZERO_SHA1,
            files: Vec::new(),
        };
        View::build(
            Arc::clone(loaded),
            Arc::new(Vec::new()),
            stamp,
            generation,
            at(now),
            last,
        )
    }

    /// The server rebuilds the model for the clock every minute or two with nothing in git
    /// moved; an open tab's poll must then still be answered `304`. Before, every rebuild
    /// took a new generation (the `ETag`), and a soak's hold said "1h30m left", which a
    /// minute changed: each tab was sent the whole page again.
    #[test]
    fn a_rebuild_for_the_clock_keeps_the_etag_until_what_the_page_shows_changes() {
        let loaded = inputs(vec![note(
            "canary-use1",
            "gpu",
            "batch 3/8 · 14/40 nodes on g@1",
        )]);
        let first = build(&loaded, 1, "2026-11-23T10:30:00Z", None);
        let held = first
            .page
            .waves
            .iter()
            .flat_map(|w| &w.clusters)
            .flat_map(|c| &c.pools)
            .find(|p| p.cluster == "prod-use1" && p.name == "general")
            .unwrap();
        assert_eq!(held.hold.as_ref().unwrap().kind, "soak", "mid-soak");
        // A minute later, and two: the same page but for its moment, the same tag.
        let tick = build(&loaded, 2, "2026-11-23T10:31:00Z", Some(&first));
        assert_ne!(tick.page.now, first.page.now);
        assert_eq!(tick.generation, 1, "nothing but the clock moved");
        let tick = build(&loaded, 3, "2026-11-23T10:32:30Z", Some(&tick));
        assert_eq!(tick.generation, 1);
        // The soak ended at 12:00: the timeline says soaked and the guard lets early go.
        let soaked = build(&loaded, 4, "2026-11-23T12:00:30Z", Some(&tick));
        let canary = |v: &View| {
            let general = v.page.channels.iter().find(|c| c.channel == "general");
            general.unwrap().versions[0].waves[0].soaking
        };
        assert!(canary(&tick) && !canary(&soaked));
        assert_eq!(soaked.generation, 4, "the soak's end shows");
        // An agent reported: a new tag at once, whatever the clock.
        let moved = inputs(vec![note(
            "canary-use1",
            "gpu",
            "batch 4/8 · 19/40 nodes on g@1",
        )]);
        let reported = build(&moved, 5, "2026-11-23T12:00:30Z", Some(&soaked));
        assert_eq!(reported.generation, 5, "a note changed");
        // The same note written again (a stamp that moved with nothing under it), within the
        // minute the silent agents' ages say: kept.
        let again = build(&moved, 6, "2026-11-23T12:00:50Z", Some(&reported));
        assert_eq!(again.generation, 5);
    }
}
