//! The image ledger's model: one [`Life`] per node per instance on the fleet's images (which
//! image, from when it joined Ready until it left), the line format it is kept in, and the
//! pure decisions over it: what changed between the open lives and what is observed now
//! ([`diff`]), where a life is filed ([`month_file`]) and whether it answers a query
//! ([`Filter`]).
//!
//! The layout of a cluster's ledger (a git tree, one commit per append; `rota::ledger` writes
//! it):
//!
//! ```text
//! open.jsonl            the lives still open (rewritten by each append: at most the nodes
//!                       of the cluster)
//! lives/2026-11.jsonl   the lives that left in November 2026, one JSON line each, in the
//!                       order they left: only appended to, and never touched once the
//!                       month is over
//! ```
//!
//! A life is written whole exactly once into a month file, when it closes; until then it is
//! one line of `open.jsonl`. So a year of a node-heavy cluster is about one line per node it
//! ran, and a restart cannot write a life twice: what is open is read back from the ledger
//! itself, never from memory.

pub mod departure;
pub mod evidence;
pub mod life;

pub use departure::{Departure, Leave};
pub use life::{Left, Life};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Datelike, Utc};

/// The file of the open lives.
pub const OPEN_FILE: &str = "open.jsonl";
/// The folder of the month files.
pub const LIVES_DIR: &str = "lives";

/// A line of a ledger file that does not hold a life, naming where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct LineError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

/// The lives of one ledger file. Every line must be a life (an empty last line aside): a
/// ledger that does not read is named, file and line, never half-read.
pub fn parse_lines(file: &str, text: &str) -> Result<Vec<Life>, LineError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let life: Life = serde_json::from_str(line).map_err(|e| LineError {
            file: file.to_string(),
            line: i + 1,
            message: format!("column {}: {e}", e.column()),
        })?;
        out.push(life);
    }
    Ok(out)
}

/// The month file a life that left at `left` is filed in: `lives/2026-11.jsonl`.
pub fn month_file(left: DateTime<Utc>) -> String {
    format!("{LIVES_DIR}/{:04}-{:02}.jsonl", left.year(), left.month())
}

/// Whether the month file `file` may hold lives that were still running at `from` (for
/// reading only the files a period needs); `None`: from the start.
pub fn month_in(file: &str, from: Option<DateTime<Utc>>) -> bool {
    let Some(from) = from else { return true };
    let Some(stem) = file
        .strip_prefix(&format!("{LIVES_DIR}/"))
        .and_then(|f| f.strip_suffix(".jsonl"))
    else {
        return true;
    };
    // A life filed in month M left in M: it overlaps a period starting at `from` only if
    // M is not before from's month.
    stem >= format!("{:04}-{:02}", from.year(), from.month()).as_str()
}

/// A node as the agent sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub pool: String,
    pub node: String,
    pub instance: String,
    /// `None`: not known yet (its instance not described): the node is not recorded yet.
    pub image: Option<String>,
    pub ready: bool,
    /// Cordoned, and by whom (`rota.dev/cordoned-by`, or `None` when someone else did).
    pub cordoned: Option<Option<String>>,
}

/// What the agent knows of a pool when it observes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolContext {
    /// `image -> channel@version` for every image the fleet names for this pool so far.
    pub versions: BTreeMap<String, String>,
    /// The desired state nodes join under (`pool:channel@version`) and its image.
    pub rotation: Option<(String, String)>,
    /// The fleet commit in force for the pool.
    pub commit: Option<String>,
    /// The nodes (node, instance) that were there when the ledger first met the pool (its
    /// adoption): their lives start "before adoption", whenever they turn Ready. Shared with
    /// the recorder's memory of them (a pass of a 20,000-node cluster would otherwise copy
    /// 20,000 pairs of names).
    pub preexisting: Arc<BTreeSet<(String, String)>>,
}

/// What one observation changes in the ledger.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delta {
    /// New lives (open).
    pub opened: Vec<Life>,
    /// Open lives that changed but stay open (a drain began).
    pub updated: Vec<Life>,
    /// Lives that ended, whole.
    pub closed: Vec<Life>,
}

impl Delta {
    pub fn is_empty(&self) -> bool {
        self.opened.is_empty() && self.updated.is_empty() && self.closed.is_empty()
    }

    /// The open lives after applying this delta to `open`.
    pub fn apply(&self, open: &[Life]) -> Vec<Life> {
        self.apply_to(open.to_vec())
    }

    /// [`Delta::apply`] to lives the caller gives up: each open life is moved, not copied.
    /// An append holds the book it read and the book it writes at once; at 5,000 nodes each
    /// is several megabytes of lives, and a copy of every one was the agent's largest
    /// transient (heaptrack of the ledger's pass).
    pub fn apply_to(&self, open: Vec<Life>) -> Vec<Life> {
        let gone: BTreeSet<_> = self.closed.iter().map(Life::key).collect();
        let updated: BTreeMap<_, _> = self.updated.iter().map(|l| (l.key(), l)).collect();
        let mut out: Vec<Life> = open
            .into_iter()
            .filter(|l| !gone.contains(&l.key()))
            .map(|l| match updated.get(&l.key()) {
                Some(u) => (*u).clone(),
                None => l,
            })
            .collect();
        out.extend(self.opened.iter().cloned());
        out.sort_by(|a, b| (&a.pool, &a.node, &a.instance).cmp(&(&b.pool, &b.node, &b.instance)));
        out
    }
}

/// Why an observation opened a life whose start it did not see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The ledger saw these nodes before (it has run): a node not open now joined now.
    Continuing,
    /// The first observation after a restart: a node not open joined while nobody recorded.
    AfterRestart,
}

/// Compares the open lives of `cluster` with what is seen now. A node seen Ready with a known
/// image and no open life opens one; an open life whose node or instance is gone closes, how
/// depending on whether it was cordoned, and by whom; a cordon seen for the first time is
/// kept on the open life (when the drain began). Nodes of pools not in `pools` (removed from
/// git, or not observed this pass) are left as they are: only what is seen changes anything.
pub fn diff(
    cluster: &str,
    open: &[Life],
    seen: &[Seen],
    pools: &BTreeMap<String, PoolContext>,
    start: Start,
    now: DateTime<Utc>,
) -> Delta {
    diff_with(cluster, open, seen, pools, &[], start, now)
}

/// [`diff`], knowing what rota itself drained and terminated since the lives were read
/// ([`Departure`]s, newest last). A life rota drained carries the drain's time and rotation
/// even when no look saw its cordon; one whose instance rota terminated closes at the
/// terminate (`rotated` after a drain, `terminated` without one), even while its node object
/// lingers, and that node is not opened again. `lost` is left for what went without rota.
pub fn diff_with(
    cluster: &str,
    open: &[Life],
    seen: &[Seen],
    pools: &BTreeMap<String, PoolContext>,
    departures: &[Departure],
    start: Start,
    now: DateTime<Utc>,
) -> Delta {
    let mut delta = Delta::default();
    let by_key: BTreeMap<(String, String), &Seen> = seen
        .iter()
        .map(|s| ((s.node.clone(), s.instance.clone()), s))
        .collect();
    let open_keys: BTreeSet<_> = open.iter().map(Life::key).collect();
    for life in open {
        if !pools.contains_key(&life.pool) {
            continue;
        }
        let drained = departure::drain_of(life, departures);
        let terminated = departure::terminate_of(life, departures);
        let mut known = life.clone();
        if let (None, Some(d)) = (&life.drained_at, drained) {
            known.drained_at = Some(d.at);
            known.drained_by = Some(d.by.clone());
            known.left_rotation = d.rotation.clone();
        }
        match (by_key.get(&life.key()), terminated) {
            (_, Some(t)) => {
                // rota terminated it: it ended then, whether or not its node object is
                // still listed.
                let mut closed = known;
                closed.left = Some(t.at.min(now).max(life.joined));
                closed.left_how = Some(match &closed.drained_by {
                    Some(_) => Left::Rotated,
                    None => Left::Terminated,
                });
                if closed.left_rotation.is_none() {
                    closed.left_rotation = t.rotation.clone();
                }
                delta.closed.push(closed);
            }
            (None, None) => {
                let mut closed = known;
                closed.left = Some(now);
                closed.left_how = Some(match (&closed.drained_at, &closed.drained_by) {
                    (Some(_), Some(_)) => Left::Rotated,
                    (Some(_), None) => Left::Drained,
                    (None, _) => Left::Lost,
                });
                delta.closed.push(closed);
            }
            (Some(s), None) => {
                if known != *life {
                    delta.updated.push(known);
                } else if let (None, Some(by)) = (&life.drained_at, &s.cordoned) {
                    let mut u = life.clone();
                    u.drained_at = Some(now);
                    u.drained_by = by.clone();
                    delta.updated.push(u);
                }
            }
        }
    }
    for s in seen {
        let key = (s.node.clone(), s.instance.clone());
        // A node whose instance rota terminated is gone, however long its object lingers.
        if departures
            .iter()
            .any(|d| d.leave == Leave::Terminate && d.instance.as_deref() == Some(&s.instance))
        {
            continue;
        }
        let (Some(image), Some(ctx)) = (&s.image, pools.get(&s.pool)) else {
            continue;
        };
        if !s.ready || open_keys.contains(&key) {
            continue;
        }
        let joined_before = match (ctx.preexisting.contains(&key), start) {
            (true, _) => Some("adoption".to_string()),
            (false, Start::AfterRestart) => Some("restart".to_string()),
            (false, Start::Continuing) => None,
        };
        let rotation = ctx
            .rotation
            .as_ref()
            .filter(|(_, target)| target == image && joined_before.is_none())
            .map(|(name, _)| name.clone());
        delta.opened.push(Life {
            cluster: cluster.to_string(),
            pool: s.pool.clone(),
            node: s.node.clone(),
            instance: s.instance.clone(),
            image: image.clone(),
            version: ctx.versions.get(image).cloned(),
            joined: now,
            joined_before,
            drained_at: s.cordoned.as_ref().map(|_| now),
            drained_by: s.cordoned.clone().flatten(),
            left: None,
            left_how: None,
            left_rotation: None,
            rotation,
            commit: ctx.commit.clone(),
        });
    }
    delta
}

/// What `rota audit` asks of the ledger.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// `channel@version`, or an image ID.
    pub image: Option<String>,
    pub node: Option<String>,
    pub cluster: Option<String>,
    /// A pool's name (with `cluster`: one pool's nodes, as the fleet page links them).
    pub pool: Option<String>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
}

impl Filter {
    pub fn matches(&self, l: &Life) -> bool {
        let image = self
            .image
            .as_ref()
            .is_none_or(|i| &l.image == i || l.version.as_ref() == Some(i));
        let node = self
            .node
            .as_ref()
            .is_none_or(|n| &l.node == n || &l.instance == n);
        let cluster = self.cluster.as_ref().is_none_or(|c| &l.cluster == c);
        let pool = self.pool.as_ref().is_none_or(|p| &l.pool == p);
        image && node && cluster && pool && l.overlaps(self.from, self.to)
    }

    /// A substring every matching line contains, to skip the others before parsing them
    /// (lines are written by [`Life::to_line`]: a JSON string appears as its own quoted
    /// text when it needs no escaping).
    pub fn needle(&self) -> Option<String> {
        let plain = |s: &str| {
            s.chars()
                .all(|c| c.is_ascii_graphic() && c != '"' && c != '\\')
        };
        let pick = self.image.as_ref().or(self.node.as_ref())?;
        plain(pick).then(|| format!("\"{pick}\""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(min: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-20T08:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
            + chrono::Duration::minutes(min)
    }

    fn seen(node: &str, image: &str) -> Seen {
        Seen {
            pool: "general".into(),
            node: node.into(),
            instance: format!("i-{node}"),
            image: Some(image.into()),
            ready: true,
            cordoned: None,
        }
    }

    fn pools(adopted: bool, rotation: Option<(&str, &str)>) -> BTreeMap<String, PoolContext> {
        let preexisting = Arc::new(if adopted {
            [("a".to_string(), "i-a".to_string())].into_iter().collect()
        } else {
            BTreeSet::new()
        });
        let ctx = PoolContext {
            versions: [("ami-1", "general@1"), ("ami-2", "general@2")]
                .into_iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            rotation: rotation.map(|(a, b)| (a.to_string(), b.to_string())),
            commit: Some("c0ffee".into()),
            preexisting,
        };
        [("general".to_string(), ctx)].into_iter().collect()
    }

    #[test]
    fn a_rotation_opens_the_new_lives_and_closes_the_drained_ones_once() {
        let p = pools(true, None);
        let d = diff(
            "c",
            &[],
            &[seen("a", "ami-1")],
            &p,
            Start::AfterRestart,
            t(0),
        );
        assert_eq!(d.opened.len(), 1);
        assert_eq!(d.opened[0].joined_before.as_deref(), Some("adoption"));
        assert_eq!(d.opened[0].version.as_deref(), Some("general@1"));
        let open = d.apply(&[]);

        let p = pools(false, Some(("general:general@2", "ami-2")));
        let mut a = seen("a", "ami-1");
        a.cordoned = Some(Some("rota".into()));
        let d = diff(
            "c",
            &open,
            &[a, seen("b", "ami-2")],
            &p,
            Start::Continuing,
            t(5),
        );
        assert_eq!(d.updated.len(), 1, "the drain began");
        assert_eq!(d.opened[0].rotation.as_deref(), Some("general:general@2"));
        assert_eq!(d.opened[0].joined_before, None);
        let open = d.apply(&open);
        assert_eq!(open.len(), 2);

        let d = diff(
            "c",
            &open,
            &[seen("b", "ami-2")],
            &p,
            Start::Continuing,
            t(9),
        );
        assert_eq!(d.closed.len(), 1);
        assert_eq!(d.closed[0].left_how, Some(Left::Rotated));
        assert_eq!(d.closed[0].drained_at, Some(t(5)));
        assert_eq!(d.closed[0].left, Some(t(9)));
        let open = d.apply(&open);
        // Seen again as it is: nothing more to write.
        let again = diff(
            "c",
            &open,
            &[seen("b", "ami-2")],
            &p,
            Start::Continuing,
            t(10),
        );
        assert!(again.is_empty(), "{again:?}");
    }

    #[test]
    fn applying_to_given_lives_moves_the_ones_kept() {
        let p = pools(true, None);
        let start = [seen("a", "ami-1"), seen("b", "ami-1"), seen("c", "ami-1")];
        let open = diff("c", &[], &start, &p, Start::AfterRestart, t(0)).apply(&[]);
        let mut b = seen("b", "ami-1");
        b.cordoned = Some(Some("rota".into()));
        let d = diff(
            "c",
            &open,
            &[b, seen("c", "ami-1"), seen("d", "ami-1")],
            &p,
            Start::Continuing,
            t(5),
        );
        assert_eq!((d.opened.len(), d.updated.len(), d.closed.len()), (1, 1, 1));
        // The same book either way.
        let copied = d.apply(&open);
        let kept = open.iter().find(|l| l.node == "c").unwrap().node.as_ptr();
        let moved = d.apply_to(open);
        assert_eq!(moved, copied);
        // The life that stayed as it was is the one given, not a copy of it.
        let c = moved.iter().find(|l| l.node == "c").unwrap();
        assert_eq!(c.node.as_ptr(), kept);
    }

    fn departure(leave: Leave, node: Option<&str>, instance: Option<&str>, at: i64) -> Departure {
        Departure {
            leave,
            node: node.map(String::from),
            instance: instance.map(String::from),
            at: t(at),
            by: "rota".into(),
            rotation: Some("general:general@2".into()),
        }
    }

    #[test]
    fn rotas_own_drains_and_terminates_name_the_leave_even_between_two_looks() {
        let p = pools(false, None);
        let open = diff(
            "c",
            &[],
            &[seen("a", "ami-1"), seen("b", "ami-1"), seen("c", "ami-1")],
            &p,
            Start::Continuing,
            t(0),
        )
        .apply(&[]);
        // Between two looks: rota cordoned `a` and terminated its instance; it terminated
        // `b`'s without a drain (a surge withdrawn); `c` went without rota.
        let deps = [
            departure(Leave::Drain, Some("a"), None, 2),
            departure(Leave::Terminate, Some("a"), Some("i-a"), 4),
            departure(Leave::Terminate, None, Some("i-b"), 5),
        ];
        // `b`'s node object still lingers: it closes all the same and is not opened again.
        let d = diff_with(
            "c",
            &open,
            &[seen("b", "ami-1")],
            &p,
            &deps,
            Start::Continuing,
            t(10),
        );
        assert!(d.opened.is_empty(), "{d:?}");
        type How<'a> = (Option<Left>, Option<DateTime<Utc>>, Option<&'a str>);
        let how: BTreeMap<&str, How> = d
            .closed
            .iter()
            .map(|l| {
                (
                    l.node.as_str(),
                    (l.left_how, l.left, l.left_rotation.as_deref()),
                )
            })
            .collect();
        assert_eq!(
            how["a"],
            (Some(Left::Rotated), Some(t(4)), Some("general:general@2"))
        );
        assert_eq!(
            how["b"],
            (
                Some(Left::Terminated),
                Some(t(5)),
                Some("general:general@2")
            )
        );
        assert_eq!(how["c"], (Some(Left::Lost), Some(t(10)), None));
        let a = d.closed.iter().find(|l| l.node == "a").unwrap();
        assert_eq!(
            (a.drained_at, a.drained_by.as_deref()),
            (Some(t(2)), Some("rota"))
        );
        // A drain seen by a look while the node is still there is kept on the open life.
        let d = diff_with(
            "c",
            &open,
            &[seen("a", "ami-1"), seen("b", "ami-1"), seen("c", "ami-1")],
            &p,
            &deps[..1],
            Start::Continuing,
            t(3),
        );
        assert_eq!(d.updated.len(), 1);
        assert_eq!(d.updated[0].drained_at, Some(t(2)));
        assert!(d.closed.is_empty());
        // A drain of an earlier life of a reused node name is not this life's.
        let mut later = open.clone();
        later[0].joined = t(3);
        let d = diff_with(
            "c",
            &later[..1],
            &[],
            &p,
            &deps[..1],
            Start::Continuing,
            t(9),
        );
        assert_eq!(d.closed[0].left_how, Some(Left::Lost));
    }

    #[test]
    fn nodes_not_ready_or_of_unknown_image_or_pool_are_not_recorded_yet() {
        let p = pools(false, None);
        let mut n = seen("a", "ami-1");
        n.ready = false;
        let mut u = seen("b", "ami-1");
        u.image = None;
        let mut other = seen("c", "ami-1");
        other.pool = "gpu".into();
        assert!(diff("c", &[], &[n, u, other], &p, Start::Continuing, t(0)).is_empty());
        // An open life of a pool not observed this pass is not closed.
        let open = diff("c", &[], &[seen("a", "ami-1")], &p, Start::Continuing, t(0)).apply(&[]);
        assert!(diff("c", &open, &[], &BTreeMap::new(), Start::Continuing, t(1)).is_empty());
    }

    #[test]
    fn a_restart_marks_what_joined_unseen_and_a_reused_name_is_a_new_life() {
        let p = pools(false, None);
        let d = diff(
            "c",
            &[],
            &[seen("a", "ami-1")],
            &p,
            Start::AfterRestart,
            t(0),
        );
        assert_eq!(d.opened[0].joined_before.as_deref(), Some("restart"));
        let open = d.apply(&[]);
        let mut again = seen("a", "ami-2");
        again.instance = "i-other".into();
        let d = diff("c", &open, &[again], &p, Start::Continuing, t(1));
        assert_eq!((d.opened.len(), d.closed.len()), (1, 1));
        assert_eq!(d.closed[0].left_how, Some(Left::Lost));
    }

    #[test]
    fn lines_round_trip_and_a_bad_line_is_named_with_its_field() {
        let p = pools(false, None);
        let life =
            diff("c", &[], &[seen("a", "ami-1")], &p, Start::Continuing, t(0)).opened[0].clone();
        let text = format!("{}\n{}\n", life.to_line(), life.to_line());
        assert_eq!(
            parse_lines("open.jsonl", &text).unwrap(),
            vec![life.clone(), life]
        );
        let bad = "{\"cluster\":\"c\"}\n";
        let e = parse_lines("lives/2026-11.jsonl", &format!("\n{bad}")).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().starts_with("lives/2026-11.jsonl:2:"), "{e}");
        assert!(e.message.contains("missing field `pool`"), "{e}");
        let unknown = parse_lines("x", "{\"clster\":1}").unwrap_err();
        assert!(
            unknown.message.contains("unknown field `clster`"),
            "{unknown}"
        );
    }

    #[test]
    fn filters_match_by_version_image_node_and_period() {
        let mut l = diff(
            "c",
            &[],
            &[seen("a", "ami-1")],
            &pools(false, None),
            Start::Continuing,
            t(0),
        )
        .opened[0]
            .clone();
        l.left = Some(t(60));
        let f = |image: Option<&str>, from, to| Filter {
            image: image.map(String::from),
            from,
            to,
            ..Filter::default()
        };
        assert!(f(Some("general@1"), None, None).matches(&l));
        let pool = |p: &str| Filter {
            pool: Some(p.into()),
            ..Filter::default()
        };
        assert!(pool("general").matches(&l));
        assert!(!pool("gpu").matches(&l));
        assert!(f(Some("ami-1"), None, None).matches(&l));
        assert!(!f(Some("general@2"), None, None).matches(&l));
        assert!(f(None, Some(t(30)), Some(t(90))).matches(&l));
        assert!(!f(None, Some(t(61)), None).matches(&l));
        assert!(!f(None, None, Some(t(0))).matches(&l));
        assert!(
            l.to_line()
                .contains(&f(Some("general@1"), None, None).needle().unwrap())
        );
        assert_eq!(month_file(t(0)), "lives/2026-11.jsonl");
        assert!(month_in("lives/2026-11.jsonl", Some(t(0))));
        assert!(!month_in("lives/2026-10.jsonl", Some(t(0))));
    }
}
