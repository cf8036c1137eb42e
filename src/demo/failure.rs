//! The demo's failure, (d): the clouds publish a bad build of general (2026.11.4: its nodes
//! boot and turn Ready, but the pod network of every workload pod on them fails a few times
//! before it comes up, `FailedCreatePodSandBox`), discovery proposes it on the canary wave
//! and the PR is merged. A health gate (the example's `node-events`) fails on the new nodes:
//! canary-use1/general rolls back by itself (`onGateFailure: rollback`), dev-usc1/general
//! pauses for a person (the fleet's `pause`). The person tries the `rota ctl retry` its
//! status suggests: the rotation goes on, the next nodes' pods fail the same way and the gate
//! fails again, so the image is the cause.
//! `rota propose` writes the revert (the agents' records are its evidence) on its branch;
//! the person merges it; both pools end on 2026.11.2 with no stop anywhere.
//!
//! At each step the story reads every signal a person would (the commit statuses in git
//! notes, `rota status --fleet`, the fleet page, the NodePoolRotations' STOP column) into
//! [`Signals`], so the test can hold each to what was really the case: no "needs a person"
//! where nobody needs to act, and one wherever somebody does.

use std::collections::BTreeMap;
use std::time::Duration;

use super::story::{PoolEnd, Story, blocking};
use crate::report::{CommitStatus, GitNotesStore};
use rota_core::rotate::operator::Verb;
use rota_core::waves::RevertDecision;

/// A build of general the clouds publish during the story.
pub(super) struct Build {
    pub version: &'static str,
    /// (AMI, region) for each region the fleet uses.
    pub amis: &'static [(&'static str, &'static str)],
    /// How long before the story it was published (past the channel's `minAge` of 72h).
    pub age: chrono::Duration,
    /// A bad build: why pods never turn Ready on its nodes.
    pub defect: Option<&'static str>,
    /// The story's line when it is published.
    pub headline: &'static str,
}

/// (c)'s build: good, reverted midway by a person anyway.
pub(super) const GOOD_BUILD: Build = Build {
    version: "2026.11.3",
    amis: &[
        ("ami-0c3b2a1908f7e6d54", "us-east-1"),
        ("ami-0d4c3b2a19087f6e5", "us-west-2"),
    ],
    age: chrono::Duration::days(4),
    defect: None,
    headline: "(c) the clouds publish general 2026.11.3 (us-east-1, us-west-2, GCP, Azure); rota images discover --write proposes it, the PR is merged",
};

/// (d)'s build: bad. Newer than (c)'s, still past `minAge`.
pub(super) const BAD_BUILD: Build = Build {
    version: "2026.11.4",
    amis: &[
        ("ami-0e5d4c3b2a1908f7e", "us-east-1"),
        ("ami-0f6e5d4c3b2a19087", "us-west-2"),
    ],
    age: chrono::Duration::hours(84),
    defect: Some("failed to set up the pod network: the image's CNI plugin does not start"),
    headline: "(d) the clouds publish general 2026.11.4, a bad build (the pod network fails on its nodes); discovery proposes it, the PR is merged",
};

/// What every view said about the fleet at one step of (d).
#[derive(Debug, Clone, Default)]
pub struct Signals {
    /// The step, as the story names it.
    pub step: String,
    /// The commit in force (full id) the statuses below are on.
    pub commit: String,
    /// The commit statuses on `commit`, from the git notes on the origin (context → status).
    pub statuses: BTreeMap<String, CommitStatus>,
    /// `rota status --fleet`, as a person would run it then.
    pub fleet_text: String,
    /// The fleet page's pool panels: `cluster/pool` → the stop's headline, if any.
    pub page_stops: BTreeMap<String, Option<String>>,
    /// Stops the fleet page's HTML shows as needing a person (`data-by="person"`).
    pub page_needs_person: usize,
    /// Where each NodePoolRotation stands (its PHASE and STOP columns).
    pub pools: BTreeMap<String, PoolEnd>,
}

impl Signals {
    /// The pool's line and the lines under it in `fleet_text`, up to the next pool.
    pub fn fleet_lines(&self, cluster: &str, pool: &str) -> String {
        let mut out = Vec::new();
        let mut in_cluster = false;
        let mut in_pool = false;
        for line in self.fleet_text.lines() {
            let depth = line.len() - line.trim_start().len();
            let word = line.split_whitespace().nth(1).unwrap_or_default();
            if depth == 2 {
                in_cluster = word == cluster;
                in_pool = false;
            } else if depth == 4 {
                in_pool = in_cluster && word == pool;
            }
            if in_pool {
                out.push(line.trim());
            }
        }
        out.join("\n")
    }
}

/// What (d) did, for the caller and the tests.
#[derive(Debug, Clone, Default)]
pub struct Failure {
    /// The signals right after the gate failed (the rollback done, the pause in place).
    pub failed: Signals,
    /// What `rota ctl retry` wrote, and the signals once the retry was applied and the gate
    /// failed again.
    pub retry: String,
    pub retried: Signals,
    /// What `rota propose` said of the canary wave, and the branch of its revert.
    pub proposal: Vec<String>,
    pub revert_branch: Option<String>,
    /// The signals once the merged revert is in force everywhere in the canary wave.
    pub merged: Signals,
}

impl Story<'_> {
    /// (d): the bad build, the gate, the rollback and the pause, the retry, the revert rota
    /// proposes and a person merges. Returns what every view said at each step.
    pub(super) async fn fails_once(&mut self) -> Result<Failure, String> {
        let canary = self.clusters_of("canary");
        let bad = self.discover_and_propose(&BAD_BUILD, "bad-image").await?;
        self.fleet.poke();
        self.wait(
            "a gate fails on 2026.11.4: canary-use1/general rolls back, dev-usc1/general pauses",
            |s, v| {
                let said = |c: &str, word: &str| {
                    s.pool(v, c, "general", &bad)
                        .is_some_and(|st| st.description.starts_with(word))
                };
                said("canary-use1", "failed") && said("dev-usc1", "paused")
            },
        )
        .await?;
        self.say("a health gate fails on 2026.11.4's nodes: canary-use1/general rolled back by itself (onGateFailure: rollback); dev-usc1/general paused for a person (onGateFailure: pause)");
        let failed = self.signals("the gate failed", &bad).await?;
        self.show_pools(&failed);

        let (retry, retried) = self.retry(&bad).await?;
        let (proposal, revert_branch) = self.propose_revert().await?;
        let merge = self.merge_revert(revert_branch.as_deref()).await?;
        self.wait(
            "the merged revert is in force: the canary wave is back on 2026.11.2",
            |s, v| s.all_on(v, &canary, &merge, |st| st == crate::report::State::Success),
        )
        .await?;
        self.say(
            "the revert is in force: both pools run 2026.11.2 again and nothing waits for a person",
        );
        let merged = self.signals("the revert merged", &merge).await?;
        self.show_pools(&merged);
        Ok(Failure {
            failed,
            retry,
            retried,
            proposal,
            revert_branch,
            merged,
        })
    }

    /// The `rota status --fleet` lines of the two pools, as the story shows them.
    fn show_pools(&mut self, s: &Signals) {
        self.note("rota status --fleet says:");
        for (c, p) in [("canary-use1", "general"), ("dev-usc1", "general")] {
            let lines = s.fleet_lines(c, p);
            let indented: Vec<String> = lines.lines().map(|l| format!("  {c:<12} {l}")).collect();
            self.note(&indented.join("\n"));
        }
    }

    /// The person tries the step dev-usc1/general's status suggests: `rota ctl retry`. The
    /// controller clears the halt and goes on; the gate fails again on the bad build's nodes,
    /// so the pool pauses again: a retry is for a cause that went away, and this one did not.
    async fn retry(&mut self, commit: &str) -> Result<(String, Signals), String> {
        let client = self
            .fleet
            .clients
            .get("dev-usc1")
            .cloned()
            .ok_or("demo: no client of dev-usc1")?;
        self.say("a person tries what dev-usc1/general's status suggests: rota ctl retry --cluster dev-usc1 --pool general");
        let now = self.fleet.clock.now();
        let r = crate::kube::operator::request(
            client.clone(),
            "dev-usc1",
            "general",
            Verb::Retry,
            Some("demo: is it the image?"),
            now,
        )
        .await?;
        let line = format!(
            "requested retry on dev-usc1/general as {} (rota.dev/request={})",
            r.by.as_deref().unwrap_or(""),
            r.id
        );
        self.note(&line);
        // Applied once the checkpoint names the request; then the gate's verdict stops it
        // again.
        let api = kube::Api::<crate::kube::crd::NodePoolRotation>::all(client);
        let start = std::time::Instant::now();
        loop {
            let npr = api
                .get("general")
                .await
                .map_err(|e| format!("demo: reading dev-usc1/general: {e}"))?;
            let st = npr.status.unwrap_or_default();
            let applied = st
                .checkpoint
                .as_ref()
                .is_some_and(|c| c.operator_request.as_deref() == Some(r.id.as_str()));
            let halted = st.checkpoint.as_ref().is_some_and(|c| c.halted.is_some());
            if applied && halted {
                break;
            }
            if start.elapsed() > self.opts.step_limit {
                return Err(format!(
                    "demo: the retry of dev-usc1/general was not applied and decided within {}s: {}",
                    self.opts.step_limit.as_secs(),
                    st.message
                ));
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        // The agent reports the pool paused again on the commit in force.
        self.wait("dev-usc1/general reports the gate failing again", |s, v| {
            s.pool(v, "dev-usc1", "general", commit)
                .is_some_and(|st| st.description.starts_with("paused"))
        })
        .await?;
        self.say(
            "after the retry the gate fails again: the image is the cause, not a passing glitch",
        );
        let retried = self.signals("the retry failed", commit).await?;
        Ok((line, retried))
    }

    /// `rota propose`'s revert pass over the canary wave: the agents' records of the failed
    /// gate are its evidence; the revert commit goes on its own branch, pushed (a forge would
    /// get its pull request). Returns the lines it printed and the branch.
    async fn propose_revert(&mut self) -> Result<(Vec<String>, Option<String>), String> {
        let r = self.repo.clone();
        let head = blocking(move || r.git(&["rev-parse", "HEAD"])).await?;
        let query = crate::promotion::Query {
            wave: Some("canary".into()),
            repo: self.repo.origin.clone(),
            rev: head.clone(),
            check: false,
            base: head.clone(),
            subdir: None,
            agent_signers: None,
        };
        let checks = crate::promotion::revert::checks_at(&query).await?;
        self.say("rota propose reads the agents' records: the failed gate calls for a revert of wave canary");
        let mut lines = Vec::new();
        let mut branch = None;
        for c in &checks {
            lines.push(format!("rota propose: {}", c.describe()));
            let RevertDecision::Revert(revert) = &c.decision else {
                continue;
            };
            let at = crate::promotion::commit::At {
                repo: &self.repo.work,
                rev: &head,
                subdir: None,
            };
            let to = crate::promotion::propose::Where {
                repo: &self.repo.work,
                remote: crate::promotion::propose::Remote::Named("origin"),
                base: "main",
                forge: None,
            };
            let said = crate::promotion::revert::propose(&at, revert, &to).await?;
            lines.push(format!("rota propose: revert wave {}: {said}", revert.wave));
            branch = Some(revert.branch());
        }
        for l in &lines {
            self.note(l);
        }
        Ok((lines, branch))
    }

    /// A person reviews the revert's branch and merges it (a merge commit, pushed).
    async fn merge_revert(&mut self, branch: Option<&str>) -> Result<String, String> {
        let branch = branch
            .ok_or("demo: rota propose proposed no revert of wave canary")?
            .to_string();
        self.say(&format!(
            "a person reviews the revert and merges it (branch {branch})"
        ));
        let r = self.repo.clone();
        let b = branch.clone();
        let merge = blocking(move || {
            r.git(&["fetch", "-q", "origin", &b])?;
            r.git(&[
                "merge",
                "-q",
                "--no-ff",
                "-m",
                &format!("Merge branch '{b}'"),
                "FETCH_HEAD",
            ])?;
            r.push()?;
            r.git(&["rev-parse", "HEAD"])
        })
        .await?;
        self.note(&format!("{} Merge branch '{branch}'", &merge[..7]));
        self.commits.insert("revert-merged".into(), merge.clone());
        self.fleet.poke();
        Ok(merge)
    }

    /// Every signal a person reads, at `commit`: the notes' statuses, `rota status --fleet`,
    /// the page and the NodePoolRotations.
    async fn signals(&self, step: &str, commit: &str) -> Result<Signals, String> {
        let store = GitNotesStore::new(&self.repo.origin, None, None);
        store.scope_to(self.order.iter().map(|(c, _)| c.clone()));
        let docs = store.docs(commit).await.map_err(|e| format!("demo: {e}"))?;
        let statuses = docs
            .iter()
            .flat_map(|d| &d.statuses)
            .map(|s| {
                let status = CommitStatus {
                    context: s.context.clone(),
                    state: s.state,
                    description: s.description.clone(),
                    target_url: s.target_url.clone(),
                    stop: s.stop.clone(),
                };
                (s.context.clone(), status)
            })
            .collect();
        let at = crate::ui::load::RepoAt {
            repo: self.repo.origin.clone(),
            rev: commit.to_string(),
            subdir: None,
            agent_signers: None,
        };
        let page = crate::ui::load::page(&at, self.fleet.clock.now())
            .await
            .map_err(|e| format!("demo: the fleet page: {e}"))?;
        let fleet_text = crate::ui::text::fleet(&page, &Default::default())?;
        let page_stops = page
            .waves
            .iter()
            .flat_map(|w| &w.clusters)
            .flat_map(|c| &c.pools)
            .map(|p| {
                (
                    format!("{}/{}", p.cluster, p.name),
                    p.stop.as_ref().map(|n| n.headline()),
                )
            })
            .collect();
        let html = crate::ui::html::page(&page, &[]);
        Ok(Signals {
            step: step.into(),
            commit: commit.into(),
            statuses,
            fleet_text,
            page_stops,
            page_needs_person: html.matches(r#"data-by="person""#).count(),
            pools: self.pools().await?,
        })
    }
}
