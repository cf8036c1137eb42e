//! `rota images discover`, the edge half: ask the clouds for each channel's newest image
//! where the fleet needs it (the queries and the decision are `rota_core::images`), say what
//! was found, and with `--write` commit the new versions, each pinned on the first wave, as
//! a textual edit of the fleet file (nothing else in it changes).
//!
//! Nothing is written unless every channel asked was answered: an error anywhere (a
//! parameter that is not an AMI, a family with no READY image, a region without the image)
//! changes nothing.

use std::path::Path;

use chrono::{DateTime, Utc};
use futures::StreamExt;

use rota_core::cloud::{FoundImage, NodeGroups};
use rota_core::fleet::{Fleet, SourceFile};
use rota_core::images::{self, Need, Outcome, Proposal};

pub use crate::promotion::pin::Target;
use crate::promotion::pin::commit_file;
use crate::promotion::propose::Where;
use rota_core::edit::{FleetEditor, PinChange};

/// Lookups in flight at once: enough to ask 20 regions × 2 arches in one round trip's time,
/// few enough to stay inside a cloud account's API rate.
const IN_FLIGHT: usize = 16;

/// One channel's answer: the decision, or every lookup that failed.
#[derive(Debug, Clone)]
pub struct ChannelReport {
    pub channel: String,
    pub result: Result<Outcome, Vec<String>>,
}

/// Asks the clouds for every channel with a `source` (or only `only`, which must have one).
pub async fn discover(
    fleet: &Fleet,
    clouds: &dyn NodeGroups,
    only: Option<&str>,
    now: DateTime<Utc>,
    security: Option<&str>,
) -> Result<Vec<ChannelReport>, String> {
    if let Some(c) = only
        && !fleet.spec.images.contains_key(c)
    {
        return Err(format!("the fleet has no channel {c}"));
    }
    let mut out = Vec::new();
    for (name, channel) in &fleet.spec.images {
        if only.is_some_and(|c| c != name) || (only.is_none() && channel.source.is_none()) {
            continue;
        }
        let queries = match images::queries(name, channel, &images::needs(fleet, name)) {
            Ok(q) => q,
            Err(e) => {
                out.push(ChannelReport {
                    channel: name.clone(),
                    result: Err(vec![e]),
                });
                continue;
            }
        };
        let answers: Vec<(Vec<Need>, Result<FoundImage, String>)> =
            futures::stream::iter(queries.into_iter().map(|(needs, q)| async move {
                // A cloud's answer is checked before anything of it is kept (its name goes
                // into a commit and a pull request), and its error text is made safe to print.
                let r = match clouds.find_image(&q).await {
                    Ok(found) => images::answers::check_found(q.cloud(), &found)
                        .map(|()| found)
                        .map_err(|e| format!("{q}: {e}")),
                    Err(e) => Err(rota_core::sanitize::line(&e.to_string()).into_owned()),
                };
                (needs, r)
            }))
            .buffered(IN_FLIGHT)
            .collect()
            .await;
        let errors: Vec<String> = answers
            .iter()
            .filter_map(|(_, r)| r.as_ref().err().cloned())
            .collect();
        let result = if errors.is_empty() {
            let found: Vec<(Vec<Need>, FoundImage)> = answers
                .into_iter()
                .filter_map(|(n, r)| r.ok().map(|f| (n, f)))
                .collect();
            Ok(images::decide(name, channel, &found, now, security))
        } else {
            Err(errors)
        };
        out.push(ChannelReport {
            channel: name.clone(),
            result,
        });
    }
    Ok(out)
}

/// One line (or a few) per channel, for the terminal.
pub fn describe(r: &ChannelReport, now: DateTime<Utc>) -> String {
    let c = &r.channel;
    match &r.result {
        Err(errors) => format!("{c}: cannot tell: {}", errors.join("; ")),
        Ok(Outcome::UpToDate { version }) => {
            format!("{c}: up to date: version {version} holds the newest images")
        }
        Ok(Outcome::Bake {
            version,
            released,
            until,
        }) => format!(
            "{c}: {version} (released {}) is baking: proposable from {} (in {}); --security REASON skips the bake",
            stamp(*released),
            stamp(*until),
            crate::ui::text::span(now, *until)
        ),
        Ok(Outcome::Mismatch { why }) => format!("{c}: waiting: {why}"),
        Ok(Outcome::Propose(p)) => {
            let mut s = format!(
                "{c}: new version {} (released {}, build {})",
                p.version,
                stamp(p.released),
                p.builds.join(", ")
            );
            if let Some(why) = &p.bake_skipped {
                s += &format!("; bake skipped for security: {why}");
            }
            s
        }
    }
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Where `--write` commits.
pub struct WriteTo<'a> {
    pub repo: &'a Path,
    /// The commit the fleet was read from (the new commit's parent).
    pub parent: &'a str,
    /// The fleet's directory inside the repo, if not its root.
    pub subdir: Option<&'a Path>,
    /// Where the commit goes: the current branch, a new one, or a proposal's branch.
    pub target: Target,
}

/// What `write` committed.
pub struct Written {
    pub id: git2::Oid,
    pub branch: String,
    pub title: String,
    /// The fleet as committed (loaded and validated before the commit).
    pub fleet: Fleet,
}

/// Adds every proposal's version and pins it on the first wave, checks that the result is a
/// valid fleet holding exactly that, and commits it (one commit for all channels); `None`
/// when there is nothing to propose.
pub fn write(
    files: &[SourceFile],
    fleet: &Fleet,
    reports: &[ChannelReport],
    to: &WriteTo<'_>,
) -> Result<Option<Written>, String> {
    let proposals: Vec<&Proposal> = reports
        .iter()
        .filter_map(|r| match &r.result {
            Ok(Outcome::Propose(p)) => Some(p),
            _ => None,
        })
        .collect();
    if proposals.is_empty() {
        return Ok(None);
    }
    let Some(first) = fleet.waves().first() else {
        return Err("the fleet has no waves: nothing to pin the new version on".into());
    };
    let mut editor = FleetEditor::new(files);
    let mut edited_path = None;
    for p in &proposals {
        editor.add_version(p)?;
        let from = first.images.get(&p.channel).cloned().ok_or_else(|| {
            format!(
                "wave {} does not pin channel {}; add `{}: \"{}\"` to its images by hand",
                first.name, p.channel, p.channel, p.version
            )
        })?;
        let change = PinChange {
            channel: p.channel.clone(),
            from,
            to: p.version.clone(),
        };
        let path = editor.move_pins(&first.name, &[change])?;
        if edited_path.as_ref().is_some_and(|e| *e != path) {
            return Err("the channels' versions are in different files: run with --channel".into());
        }
        edited_path = Some(path);
    }
    let path = edited_path.unwrap_or_default();
    let edited = editor
        .load()
        .map_err(|d| format!("the new versions would make the fleet invalid: {d}"))?;
    for p in &proposals {
        let pinned = edited
            .waves()
            .first()
            .and_then(|w| w.images.get(&p.channel));
        let held = edited
            .spec
            .images
            .get(&p.channel)
            .and_then(|c| c.versions.get(&p.version));
        if pinned != Some(&p.version) || held != Some(&p.images) {
            return Err(format!(
                "editing {path} did not add {}@{} pinned on wave {}",
                p.channel, p.version, first.name
            ));
        }
    }
    let title = format!(
        "images: {} on wave {}",
        proposals
            .iter()
            .map(|p| format!("{} {}", p.channel, p.version))
            .collect::<Vec<_>>()
            .join(", "),
        first.name
    );
    let mut message = format!("{title}\n");
    for p in &proposals {
        message += &format!(
            "\n{}@{}: build {}, released {}.\n",
            p.channel,
            p.version,
            code_spans(&p.builds),
            stamp(p.released)
        );
        if let Some(why) = &p.bake_skipped {
            message += &format!("The bake (minAge) was skipped for security: {why}\n");
        }
    }
    message += "\nWritten by rota images discover.\n";
    let text = editor
        .edited()
        .map(|(_, t)| t.to_string())
        .unwrap_or_default();
    let full_path = match to.subdir {
        Some(d) if !d.as_os_str().is_empty() && d != Path::new(".") => {
            format!("{}/{path}", d.display().to_string().trim_end_matches('/'))
        }
        _ => path,
    };
    let (id, branch) = commit_file(to.repo, to.parent, &full_path, &text, &message, &to.target)?;
    Ok(Some(Written {
        id,
        branch,
        title,
        fleet: edited,
    }))
}

/// Build names as markdown code spans: a forge renders nothing inside one (no link, no
/// mention). The names were already checked (`images::answers::check_found`); the span is
/// made safe on its own all the same.
fn code_spans(builds: &[String]) -> String {
    builds
        .iter()
        .map(|b| rota_core::sanitize::code_span(b))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where `--open-pr` proposes.
pub struct OpenPr<'a> {
    /// The commit the fleet was read from: each proposal's parent.
    pub parent: &'a str,
    pub subdir: Option<&'a Path>,
    /// The repo, the remote, the base branch and the forge.
    pub at: Where<'a>,
}

/// One pull request (or branch) per channel proposed: the channel's version on branch
/// `rota/images/<channel>`, rewritten from `parent` on each run and force-pushed, and the
/// forge's open pull request for that branch updated, or one opened; its body is `rota diff
/// --format markdown` of the change and the build it proposes. Returns a line per channel.
pub async fn open_prs(
    files: &[SourceFile],
    fleet: &Fleet,
    reports: &[ChannelReport],
    to: &OpenPr<'_>,
) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    for r in reports {
        let Ok(Outcome::Propose(p)) = &r.result else {
            continue;
        };
        let branch = format!("rota/images/{}", p.channel);
        let at = WriteTo {
            repo: to.at.repo,
            parent: to.parent,
            subdir: to.subdir,
            target: Target::ProposalBranch(branch.clone()),
        };
        let Some(written) = write(files, fleet, std::slice::from_ref(r), &at)? else {
            continue;
        };
        let mut evidence = format!(
            "rota images discover proposes {}@{}: build {}, released {}.\n",
            p.channel,
            p.version,
            code_spans(&p.builds),
            stamp(p.released)
        );
        if let Some(why) = &p.bake_skipped {
            evidence += &format!("\nThe bake (minAge) was skipped for security: {why}\n");
        }
        let line = crate::promotion::body::propose_change(
            &to.at,
            &branch,
            &written.title,
            &evidence,
            fleet,
            &written.fleet,
        )
        .await
        .map_err(|e| format!("{}: {e}", p.channel))?;
        lines.push(format!("{}: {line}", p.channel));
    }
    Ok(lines)
}
