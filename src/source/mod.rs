//! The fleet repo source: a local bare mirror of one branch of the fleet git repo, fetched with
//! git2 over file://, git://, ssh or https, read straight from the object database (no
//! checkout). Around it: the poll loop ([`poll`]), the push webhook receiver ([`webhook`]),
//! watching a local working copy ([`watch`]), credentials and host keys ([`credentials`]),
//! commit signature verification ([`trust`]), history that only moves forward ([`history`]),
//! reading a revision's (or a folder's) fleet files within budgets ([`read`]), which refs a
//! poll fetches ([`refs_plan`]), and the protocol v2 probe that answers a poll where nothing
//! moved without a libgit2 connection ([`ls_refs`]). Below them: the refs rota keeps in its
//! mirror ([`refs`]) and a URL normalised and redacted ([`url`]).
//!
//! git2 is blocking; async callers run [`GitSource::fetch`] on the blocking pool (the poll
//! loop does).

pub mod credentials;
pub mod follow;
pub mod history;
pub mod ls_refs;
pub mod poll;
pub mod read;
pub mod refs;
pub mod refs_plan;
pub mod trust;
pub mod url;
pub mod watch;
pub mod webhook;

use std::path::{Path, PathBuf};

use git2::{FetchOptions, Oid, Repository};

use refs_plan::{FetchPlan, NotesScope};

pub use credentials::{Auth, KnownHosts, Secret};
use refs::tracking_ref;
pub use refs::{NOTES_PREFIX, REMOTE_NOTES_PREFIX, REMOTE_STOP_REF};
pub use url::{normalise_url, redact_url, redact_urls_in};

/// Where the fleet repo comes from and how to fetch it.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// A URL (`file:///srv/fleet.git`, `git://host/fleet.git`, `ssh://git@host/fleet.git`,
    /// `git@host:fleet.git`, `https://host/fleet.git`) or a local path.
    pub url: String,
    /// The branch rota follows.
    pub branch: String,
    pub auth: Auth,
    /// Shallow fetch: only this many commits of history (`None`: full history). Statuses and
    /// the promotion guard only need the commits rota acts on, so `Some(1)` is enough for an
    /// agent; `rota status` over old revisions wants the full history. Ignored for file://
    /// URLs and local paths (libgit2's local transport has no shallow mode).
    pub depth: Option<u32>,
}

/// Most notes refs fetched before the fleet is known (the first fetch of `rota ui` or `rota
/// propose`): a flood of refs pushed by anyone with push access must not be mirrored without
/// end. Once the clusters are known only theirs are fetched, however many, and refs no
/// declared cluster owns never are (`refs_plan::plan`, `GitNotesStore::refs_by_cluster`).
pub const MAX_NOTES_REFS: usize = 2048;

/// Caps on what one fetch may bring in, before anything in it is checked (signatures are
/// checked after the fetch, on the commit it brought).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    /// Bytes of pack data received; past it the fetch is aborted and nothing is updated.
    pub max_pack_bytes: u64,
    /// Notes refs (`refs/notes/rota/*`, one per cluster) fetched before the clusters are
    /// known: with more on the remote, only the first ones by name are fetched, and a
    /// warning names the count.
    pub max_notes_refs: usize,
}

impl Default for FetchLimits {
    fn default() -> Self {
        FetchLimits {
            // A fleet repo's whole history is a few MiB.
            max_pack_bytes: 256 * 1024 * 1024,
            max_notes_refs: MAX_NOTES_REFS,
        }
    }
}

/// What one fetch found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetched {
    /// The commit the followed branch points at after the fetch.
    pub commit: Oid,
    /// The commit before the fetch (`None` on the first fetch).
    pub previous: Option<Oid>,
}

impl Fetched {
    pub fn changed(&self) -> bool {
        self.previous != Some(self.commit)
    }
}

/// One file of a commit's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeFile {
    /// Path from the tree root, `/`-separated.
    pub path: String,
    pub data: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("fetching {url} (branch {branch}): {message}")]
    Fetch {
        url: String,
        branch: String,
        message: String,
    },
    #[error("branch {branch} not found at {url}")]
    NoBranch { url: String, branch: String },
    #[error("local mirror {path}: {source}")]
    Mirror {
        path: PathBuf,
        #[source]
        source: git2::Error,
    },
    #[error("reading commit {commit}: {message}")]
    Read { commit: String, message: String },
    #[error("{0}")]
    Credentials(#[from] credentials::CredentialError),
}

impl SourceError {
    /// A stable, low-cardinality reason for metrics and events.
    pub fn reason(&self) -> &'static str {
        match self {
            SourceError::Fetch { .. } => "FetchFailed",
            SourceError::NoBranch { .. } => "BranchNotFound",
            SourceError::Mirror { .. } => "MirrorBroken",
            SourceError::Read { .. } => "ReadFailed",
            SourceError::Credentials(_) => "CredentialsInvalid",
        }
    }
}

/// A bare mirror of the followed branch. Cheap to share behind an `Arc`: every call opens
/// the repository afresh (git2 handles are not `Sync`).
#[derive(Debug)]
pub struct GitSource {
    config: SourceConfig,
    mirror: PathBuf,
    /// Loaded once: a broken credentials setup fails at start, not at the first fetch.
    known_hosts: Option<KnownHosts>,
    limits: FetchLimits,
    /// The clusters whose notes refs are fetched, once known (`None`: the first
    /// `max_notes_refs` by name): the fleet's declared clusters for the views, what its
    /// decision needs for an agent. Refs no cluster of the set owns are never fetched.
    notes_clusters: std::sync::Mutex<Option<std::collections::BTreeSet<String>>>,
    /// The protocol v2 probe in front of each poll ([`ls_refs`]): whether to try it, and
    /// until when not to, after a server that does not speak v2 or answered badly.
    probe: ProbeState,
}

/// Polls answered by the v2 probe and polls that connected with libgit2, since the start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollCounts {
    /// The probe's answer showed nothing in scope moved: no libgit2 connection.
    pub by_probe: u64,
    /// A libgit2 connection (and its advertisement): something moved, or no probe.
    pub by_libgit2: u64,
}

#[derive(Debug)]
struct ProbeState {
    enabled: bool,
    off_until: std::sync::Mutex<Option<std::time::Instant>>,
    by_probe: std::sync::atomic::AtomicU64,
    by_libgit2: std::sync::atomic::AtomicU64,
}

/// How long a URL is not probed after a server that does not speak protocol v2, or answered
/// the probe badly or slowly: one wasted round trip an hour, not one per poll.
pub const PROBE_BACKOFF: std::time::Duration = std::time::Duration::from_secs(3600);

impl GitSource {
    /// Opens (or creates) the bare mirror at `mirror` and points its `origin` at the
    /// configured URL. Reads the credential files now so that mistakes show at start.
    pub fn open(config: SourceConfig, mirror: &Path) -> Result<Self, SourceError> {
        let mirror_err = |source| SourceError::Mirror {
            path: mirror.to_path_buf(),
            source,
        };
        let repo = match Repository::open_bare(mirror) {
            Ok(r) => r,
            Err(_) => Repository::init_bare(mirror).map_err(mirror_err)?,
        };
        let url = normalise_url(&config.url);
        match repo.find_remote("origin") {
            Ok(r) if r.url() == Ok(url.as_str()) => {}
            Ok(_) => repo.remote_set_url("origin", &url).map_err(mirror_err)?,
            Err(_) => {
                repo.remote_with_fetch("origin", &url, "+refs/heads/*:refs/remotes/origin/*")
                    .map_err(mirror_err)?;
            }
        }
        let known_hosts = match &config.auth {
            Auth::SshKey { known_hosts, .. } => Some(KnownHosts::load(known_hosts)?),
            _ => None,
        };
        config.auth.validate()?;
        Ok(GitSource {
            config,
            mirror: mirror.to_path_buf(),
            known_hosts,
            limits: FetchLimits::default(),
            notes_clusters: std::sync::Mutex::new(None),
            probe: ProbeState {
                enabled: true,
                off_until: std::sync::Mutex::new(None),
                by_probe: Default::default(),
                by_libgit2: Default::default(),
            },
        })
    }

    /// The clusters whose notes refs fetches bring in from now on, and only theirs, however
    /// many: the fleet's declared clusters (`rota ui`, `rota propose`), or what an agent's
    /// decision needs (its own, and the clusters of the wave its guard waits on). Callers
    /// take them from a loaded fleet, so a ref no declared cluster owns is never fetched.
    pub fn set_notes_clusters(&self, clusters: impl IntoIterator<Item = String>) {
        *self
            .notes_clusters
            .lock()
            .expect("no panics under the lock") = Some(clusters.into_iter().collect());
    }

    /// The clusters whose notes refs fetches bring in (`None`: not set yet).
    pub fn notes_clusters(&self) -> Option<std::collections::BTreeSet<String>> {
        self.notes_clusters
            .lock()
            .expect("no panics under the lock")
            .clone()
    }

    /// Turns the protocol v2 probe in front of each poll ([`ls_refs`]) on (the default) or
    /// off (every poll connects with libgit2 and receives the whole advertisement, as
    /// before; the bench's `v0` rows).
    pub fn with_probe(mut self, on: bool) -> Self {
        self.probe.enabled = on;
        self
    }

    /// Polls answered by the probe and polls that connected with libgit2 so far.
    pub fn poll_counts(&self) -> PollCounts {
        use std::sync::atomic::Ordering::Relaxed;
        PollCounts {
            by_probe: self.probe.by_probe.load(Relaxed),
            by_libgit2: self.probe.by_libgit2.load(Relaxed),
        }
    }

    /// Replace the default [`FetchLimits`].
    pub fn with_limits(mut self, limits: FetchLimits) -> Self {
        self.limits = limits;
        self
    }

    pub fn config(&self) -> &SourceConfig {
        &self.config
    }

    /// Path of the bare mirror (the fleet loader and the git-notes store open it).
    pub fn mirror_path(&self) -> &Path {
        &self.mirror
    }

    pub fn repository(&self) -> Result<Repository, SourceError> {
        Repository::open_bare(&self.mirror).map_err(|source| SourceError::Mirror {
            path: self.mirror.clone(),
            source,
        })
    }

    /// The commit of the followed branch as of the last fetch.
    pub fn current(&self) -> Result<Option<Oid>, SourceError> {
        let repo = self.repository()?;
        let r = repo.refname_to_id(&tracking_ref(&self.config.branch)).ok();
        Ok(r)
    }

    /// Fetches the followed branch and the notes refs in scope ([`GitSource::set_notes_clusters`])
    /// into `refs/rota/remote-notes/*`, each only if it moved. Blocking.
    pub fn fetch(&self) -> Result<Fetched, SourceError> {
        self.fetch_planned(true).map(|(fetched, _)| fetched)
    }

    /// Fetches only the notes refs in scope that moved, not the branch: an agent whose guard
    /// starts waiting on a wave reads that wave's statuses before it decides. Blocking.
    pub fn fetch_notes(&self) -> Result<FetchPlan, SourceError> {
        self.fetch_planned(false).map(|(_, plan)| plan)
    }

    /// One poll. First, over `git://` and smart HTTP(S) when the notes scope is a known set
    /// of clusters, the protocol v2 probe ([`ls_refs`]): the server lists only the refs the
    /// poll needs, and when none of them moved (and the branch exists) the poll ends there,
    /// without a libgit2 connection. Otherwise a single libgit2 connection, one listing of
    /// the remote's refs, and a fetch over that same connection of only the refs
    /// [`refs_plan::plan`] names (none when nothing in scope moved). libgit2 speaks protocol
    /// v0 only, so its listing is the whole advertisement: it is paid at most once per poll.
    /// Blocking.
    pub fn fetch_planned(&self, with_branch: bool) -> Result<(Fetched, FetchPlan), SourceError> {
        let repo = self.repository()?;
        let previous = self.current()?;
        let branch = &self.config.branch;
        if let Some(answered) = self.probe_poll(&repo, with_branch, previous)? {
            return Ok(answered);
        }
        self.probe
            .by_libgit2
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let refusal = credentials::Refusal::default();
        let fetch_err = |e: git2::Error| SourceError::Fetch {
            url: redact_url(&self.config.url),
            branch: branch.clone(),
            message: rota_core::sanitize::text(&redact_urls_in(&credentials::explain(
                &e, &refusal,
            )))
            .into_owned(),
        };
        let no_branch = || SourceError::NoBranch {
            url: redact_url(&self.config.url),
            branch: branch.clone(),
        };
        let scope = match self.notes_clusters() {
            Some(set) => NotesScope::Clusters(set),
            None => NotesScope::FirstByName {
                cap: self.limits.max_notes_refs,
            },
        };
        let mut remote = repo.find_remote("origin").map_err(fetch_err)?;
        let cbs = credentials::callbacks(
            &self.config.auth,
            &self.config.url,
            self.known_hosts.as_ref(),
            &refusal,
        );
        let mut conn = remote
            .connect_auth(git2::Direction::Fetch, Some(cbs), None)
            .map_err(fetch_err)?;
        let advertised: Vec<(String, Oid)> = conn
            .list()
            .map_err(fetch_err)?
            .iter()
            .map(|h| (h.name().to_string(), h.oid()))
            .collect();
        let branch_ref = format!("refs/heads/{branch}");
        if with_branch && !advertised.iter().any(|(n, _)| *n == branch_ref) {
            return Err(no_branch());
        }
        let local = mirrored_ids(&repo, branch, &advertised, &scope);
        let plan = refs_plan::plan(branch, with_branch, &advertised, &local, &scope);
        if let NotesScope::FirstByName { cap } = scope
            && plan.notes_left_out > 0
        {
            tracing::warn!(refs = plan.notes_in_scope + plan.notes_left_out, fetched = cap,
                url = %redact_url(&self.config.url),
                "the remote has more rota notes refs than the limit and the fleet is not known yet: the first ones by name are fetched");
        }
        if !plan.specs.is_empty() {
            let mut opts = self.fetch_options(&refusal);
            // Over the connection the listing opened (libgit2 reuses a connected remote):
            // the advertisement is not sent again.
            conn.remote()
                .fetch(&plan.specs[..], Some(&mut opts), None)
                .map_err(fetch_err)?;
        }
        drop(conn);
        let commit = repo
            .refname_to_id(&tracking_ref(branch))
            .map_err(|_| no_branch())?;
        if previous != Some(commit) {
            tracing::info!(commit = %commit, previous = ?previous.map(|p| p.to_string()),
                url = %redact_url(&self.config.url), "fleet repo moved");
        }
        Ok((Fetched { commit, previous }, plan))
    }

    /// The protocol v2 probe of one poll: `Some` when it shows that nothing the poll needs
    /// moved (the poll is done), `None` when the poll goes on to libgit2 (something moved,
    /// the branch is missing, no probe for this URL or scope, or the probe failed: then,
    /// unless no connection could be made, not again for [`PROBE_BACKOFF`]).
    fn probe_poll(
        &self,
        repo: &Repository,
        with_branch: bool,
        previous: Option<Oid>,
    ) -> Result<Option<(Fetched, FetchPlan)>, SourceError> {
        use std::time::Instant;
        if !self.probe.enabled {
            return Ok(None);
        }
        // Before the fleet is known the scope is "the first refs by name": no names to ask.
        let Some(clusters) = self.notes_clusters() else {
            return Ok(None);
        };
        let Some(transport) = ls_refs::Transport::of(&normalise_url(&self.config.url)) else {
            return Ok(None);
        };
        {
            let mut off = self
                .probe
                .off_until
                .lock()
                .expect("no panics under the lock");
            match *off {
                Some(until) if Instant::now() < until => return Ok(None),
                Some(_) => *off = None,
                None => {}
            }
        }
        let branch = &self.config.branch;
        let Some(wanted) = ls_refs::wanted(with_branch.then_some(branch.as_str()), &clusters)
        else {
            return Ok(None);
        };
        let url = redact_url(&self.config.url);
        let answered = match ls_refs::probe(&transport, &self.config.auth, &wanted) {
            Ok(a) => a,
            Err(e) => {
                let message =
                    rota_core::sanitize::text(&redact_urls_in(&e.to_string())).into_owned();
                if e.backs_off() {
                    *self
                        .probe
                        .off_until
                        .lock()
                        .expect("no panics under the lock") = Some(Instant::now() + PROBE_BACKOFF);
                    tracing::warn!(url = %url, reason = e.reason(), error = %message,
                        backoff_s = PROBE_BACKOFF.as_secs(),
                        "protocol v2 probe failed: polls fetch with libgit2 (the whole ref advertisement) and do not probe this URL for a while");
                } else {
                    tracing::debug!(url = %url, reason = e.reason(), error = %message,
                        "protocol v2 probe failed: this poll fetches with libgit2");
                }
                return Ok(None);
            }
        };
        let branch_ref = format!("refs/heads/{branch}");
        if with_branch && !answered.iter().any(|(n, _)| *n == branch_ref) {
            // libgit2's listing says so with its own error.
            return Ok(None);
        }
        let scope = NotesScope::Clusters(clusters);
        let local = mirrored_ids(repo, branch, &answered, &scope);
        let plan = refs_plan::plan(branch, with_branch, &answered, &local, &scope);
        if !plan.specs.is_empty() {
            tracing::debug!(url = %url, moved = plan.specs.len(),
                "protocol v2 probe: refs moved, fetching with libgit2");
            return Ok(None);
        }
        let commit =
            repo.refname_to_id(&tracking_ref(branch))
                .map_err(|_| SourceError::NoBranch {
                    url: url.clone(),
                    branch: branch.clone(),
                })?;
        self.probe
            .by_probe
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::debug!(url = %url, refs = answered.len(),
            "protocol v2 probe: nothing moved, no fetch");
        Ok(Some((Fetched { commit, previous }, plan)))
    }

    /// Points the notes fetch at the clusters the fleet declares at the followed branch (in
    /// `subdir`); false when that fleet cannot be read.
    pub fn scope_notes_to_fleet(&self, subdir: Option<&Path>) -> bool {
        let tip = tracking_ref(&self.config.branch);
        match read::load_git_at(&self.mirror, &tip, subdir) {
            Ok(fleet) => {
                self.set_notes_clusters(fleet.cluster_names().map(str::to_string));
                true
            }
            Err(_) => false,
        }
    }

    /// [`GitSource::fetch`], then, the fleet in `subdir` known, again with its clusters' notes
    /// refs first: a flood of refs pushed by anyone cannot crowd them out of the fetch cap.
    /// Blocking.
    pub fn fetch_with_fleet_notes(&self, subdir: Option<&Path>) -> Result<Fetched, SourceError> {
        let first = self.fetch()?;
        if self.scope_notes_to_fleet(subdir) {
            let again = self.fetch()?;
            return Ok(Fetched {
                previous: first.previous,
                ..again
            });
        }
        Ok(first)
    }

    /// Makes a shallow mirror whole (the followed branch's full history): ancestry, which
    /// the forward-only check needs, cannot be seen across a shallow boundary. Nothing to do
    /// for a mirror that is not shallow. Blocking.
    pub fn unshallow(&self) -> Result<(), SourceError> {
        let repo = self.repository()?;
        if !repo.is_shallow() {
            return Ok(());
        }
        let branch = &self.config.branch;
        let refusal = credentials::Refusal::default();
        let fetch_err = |e: git2::Error| SourceError::Fetch {
            url: redact_url(&self.config.url),
            branch: branch.clone(),
            message: rota_core::sanitize::text(&redact_urls_in(&credentials::explain(
                &e, &refusal,
            )))
            .into_owned(),
        };
        let mut remote = repo.find_remote("origin").map_err(fetch_err)?;
        let mut opts = self.fetch_options(&refusal);
        // libgit2's GIT_FETCH_DEPTH_UNSHALLOW.
        opts.depth(i32::MAX);
        let spec = format!("+refs/heads/{branch}:{}", tracking_ref(branch));
        remote
            .fetch(&[spec.as_str()], Some(&mut opts), None)
            .map_err(fetch_err)?;
        tracing::info!(url = %redact_url(&self.config.url), "shallow mirror made whole to check ancestry");
        Ok(())
    }

    /// Fetch options with this source's credentials, host key check, depth and pack cap; the
    /// callbacks leave the reason of a refusal in `refusal`.
    pub fn fetch_options<'a>(&'a self, refusal: &'a credentials::Refusal) -> FetchOptions<'a> {
        let mut opts = FetchOptions::new();
        let mut cbs = credentials::callbacks(
            &self.config.auth,
            &self.config.url,
            self.known_hosts.as_ref(),
            refusal,
        );
        let cap = self.limits.max_pack_bytes;
        cbs.transfer_progress(move |p| {
            if p.received_bytes() as u64 > cap {
                *refusal.borrow_mut() = Some(format!(
                    "the remote sent more than {cap} bytes of pack data: fetch aborted, nothing of it used (--max-pack-bytes)"
                ));
                return false;
            }
            true
        });
        opts.remote_callbacks(cbs);
        // libgit2's local transport (file:// and paths) copies objects directly and refuses
        // a depth; a local repo has nothing to save anyway.
        let local = normalise_url(&self.config.url).starts_with("file://");
        if let Some(depth) = self.config.depth.filter(|_| !local) {
            opts.depth(depth.min(i32::MAX as u32) as i32);
        }
        opts.download_tags(git2::AutotagOption::None);
        opts
    }

    /// The known_hosts this source checks ssh host keys against (for pushes that reuse the
    /// source's credentials, like the git-notes status store).
    pub fn known_hosts(&self) -> Option<&KnownHosts> {
        self.known_hosts.as_ref()
    }

    /// Checks the signature of `commit` against a trust policy (see [`trust`]).
    pub fn verify(
        &self,
        verifier: &trust::Verifier,
        commit: Oid,
    ) -> Result<Result<trust::Trusted, trust::Rejection>, trust::TrustError> {
        let repo = self.repository().map_err(|e| trust::TrustError::Commit {
            commit: commit.to_string(),
            message: e.to_string(),
        })?;
        verifier.verify(&repo, commit)
    }

    /// Every blob of `commit`'s tree under `dir` (`""` for the root) for which `want(path)`
    /// holds, read from the object database. Symlinks and submodules are skipped.
    pub fn read_files(
        &self,
        commit: Oid,
        dir: &str,
        want: impl Fn(&str) -> bool,
    ) -> Result<Vec<TreeFile>, SourceError> {
        let repo = self.repository()?;
        read_tree_files(&repo, commit, dir, want)
    }
}

/// The mirror's ids of the refs a poll may update: the followed branch's tracking ref and
/// the mirrored copy of each advertised notes ref in `scope` (looked up by name, so a flood
/// of refs in the mirror costs nothing here, and an idle agent of a 10,000-cluster fleet
/// looks up its own ref, not 10,000).
fn mirrored_ids(
    repo: &Repository,
    branch: &str,
    advertised: &[(String, Oid)],
    scope: &NotesScope,
) -> std::collections::BTreeMap<String, Oid> {
    let tracking = tracking_ref(branch);
    [tracking, REMOTE_STOP_REF.to_string()]
        .into_iter()
        .chain(advertised.iter().filter_map(|(n, _)| {
            n.strip_prefix(NOTES_PREFIX)
                .filter(|c| !c.is_empty())
                .filter(|c| match scope {
                    NotesScope::Clusters(set) => set.contains(*c),
                    NotesScope::FirstByName { .. } => true,
                })
                .map(|c| format!("{REMOTE_NOTES_PREFIX}{c}"))
        }))
        .filter_map(|name| repo.refname_to_id(&name).ok().map(|id| (name, id)))
        .collect()
}

/// Opens the mirror `name` under `state_dir` (created if missing) for a command that follows
/// a URL (`rota ui`, `rota propose`).
pub fn open_mirror(
    config: SourceConfig,
    state_dir: &Path,
    name: &str,
) -> Result<GitSource, String> {
    std::fs::create_dir_all(state_dir)
        .map_err(|e| format!("--state-dir {}: {e}", state_dir.display()))?;
    GitSource::open(config, &state_dir.join(name)).map_err(|e| e.to_string())
}

/// Reads the files of a commit's tree (see [`GitSource::read_files`]); usable on any repo.
pub fn read_tree_files(
    repo: &Repository,
    commit: Oid,
    dir: &str,
    want: impl Fn(&str) -> bool,
) -> Result<Vec<TreeFile>, SourceError> {
    let read_err = |e: git2::Error| SourceError::Read {
        commit: commit.to_string(),
        message: e.message().to_string(),
    };
    let tree = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(read_err)?;
    let dir = dir.trim_matches('/');
    let root = if dir.is_empty() {
        tree
    } else {
        let entry = tree
            .get_path(Path::new(dir))
            .map_err(|_| SourceError::Read {
                commit: commit.to_string(),
                message: format!("no directory {dir} in the tree"),
            })?;
        repo.find_tree(entry.id()).map_err(|_| SourceError::Read {
            commit: commit.to_string(),
            message: format!("{dir} is not a directory"),
        })?
    };
    let mut files = Vec::new();
    let mut failure = None;
    let mut entries = 0usize;
    let mut over_budget = None;
    let mut too_large = None;
    root.walk(git2::TreeWalkMode::PreOrder, |parent, entry| {
        // The same budget as the fleet loader: a tree bomb stops here, named.
        entries += 1;
        if entries > crate::source::read::MAX_TREE_ENTRIES {
            over_budget = Some(format!("{parent}{}", entry.name().unwrap_or("")));
            return git2::TreeWalkResult::Abort;
        }
        if entry.kind() != Some(git2::ObjectType::Blob) || entry.filemode() == 0o120000 {
            return git2::TreeWalkResult::Ok;
        }
        let path = format!("{parent}{}", entry.name().unwrap_or(""));
        if !want(&path) {
            return git2::TreeWalkResult::Ok;
        }
        // The same per-file budget as the fleet loader, judged from the header.
        let size = repo
            .odb()
            .and_then(|odb| odb.read_header(entry.id()))
            .map(|(size, _)| size as u64);
        if let Ok(size) = size
            && size > crate::source::read::MAX_FILE_BYTES
        {
            too_large = Some(format!("{path} is {size} bytes"));
            return git2::TreeWalkResult::Abort;
        }
        match repo.find_blob(entry.id()) {
            Ok(blob) => {
                files.push(TreeFile {
                    path,
                    data: blob.content().to_vec(),
                });
                git2::TreeWalkResult::Ok
            }
            Err(e) => {
                failure = Some(e);
                git2::TreeWalkResult::Abort
            }
        }
    })
    .or_else(|e| {
        if over_budget.is_some() || too_large.is_some() {
            Ok(())
        } else {
            Err(e)
        }
    })
    .map_err(read_err)?;
    if let Some(at) = over_budget {
        return Err(SourceError::Read {
            commit: commit.to_string(),
            message: format!(
                "the tree has more than {} entries (stopped at {at})",
                crate::source::read::MAX_TREE_ENTRIES
            ),
        });
    }
    if let Some(what) = too_large {
        return Err(SourceError::Read {
            commit: commit.to_string(),
            message: format!(
                "{what}, over the limit of {} bytes: not read",
                crate::source::read::MAX_FILE_BYTES
            ),
        });
    }
    if let Some(e) = failure {
        return Err(read_err(e));
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}
