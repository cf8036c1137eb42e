//! Who proposed and who merged a version, from the fleet repo's history: the commits on the
//! branch's first-parent line whose change adds the version (`"2026.11.2":` under a channel)
//! or pins it (`general: "2026.11.2"` in a wave), each with its author, committer, time, the
//! pull request its message names (`#123`, `!45`, `pull/123`) and, for a merge, the author of
//! the merged branch's head. Read from the diffs' added lines: a commit that touches no YAML
//! line naming the version is not read further.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeZone, Utc};
use git2::{DiffOptions, Oid, Repository};
use serde::Serialize;

/// How far back (first parents) the history is read.
pub const HISTORY_DEPTH: usize = 20_000;

/// A commit as the evidence names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitRef {
    pub commit: String,
    pub subject: String,
    pub author: String,
    pub committer: String,
    pub at: DateTime<Utc>,
    /// The pull or merge request the message names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pr: Option<String>,
    /// For a merge: the author of the merged head (who proposed the change).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proposed_by: Option<String>,
    /// The waves whose pin the change sets (from the lines around it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waves: Vec<String>,
}

/// What the history says of one `channel@version`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionHistory {
    /// The first commit that added the version to its channel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proposed: Option<CommitRef>,
    /// Every commit that pinned it in a wave, oldest first.
    pub pinned: Vec<CommitRef>,
}

/// `#123` / `!45` (GitLab) / `pull/123` in a commit message.
pub fn pr_reference(message: &str) -> Option<String> {
    let bytes = message.as_bytes();
    for (i, c) in bytes.iter().enumerate() {
        if (*c == b'#' || *c == b'!') && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
            let end = bytes[i + 1..]
                .iter()
                .position(|b| !b.is_ascii_digit())
                .map_or(bytes.len(), |p| i + 1 + p);
            return Some(message[i..end].to_string());
        }
    }
    let at = message.find("pull/")?;
    let digits: String = message[at + 5..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (!digits.is_empty()).then(|| format!("#{digits}"))
}

fn who(s: &git2::Signature) -> String {
    format!("{} <{}>", s.name().unwrap_or("?"), s.email().unwrap_or("?"))
}

fn commit_ref(c: &git2::Commit, waves: Vec<String>) -> CommitRef {
    let message = c.message().unwrap_or("");
    CommitRef {
        commit: c.id().to_string(),
        subject: message.lines().next().unwrap_or("").to_string(),
        author: who(&c.author()),
        committer: who(&c.committer()),
        at: Utc
            .timestamp_opt(c.committer().when().seconds(), 0)
            .single()
            .unwrap_or_default(),
        pr: pr_reference(message),
        proposed_by: c.parent(1).ok().map(|p| who(&p.author())),
        waves,
    }
}

/// Whether `line` pins `version` of `channel` (`general: "2026.11.2"`, quoted or not, block
/// or flow style).
fn pins(line: &str, channel: &str, version: &str) -> bool {
    [
        format!("{channel}: \"{version}\""),
        format!("{channel}: '{version}'"),
        format!("{channel}: {version}"),
    ]
    .iter()
    .any(|p| {
        line.match_indices(p.as_str()).any(|(i, _)| {
            let after = line[i + p.len()..].chars().next();
            after.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_'))
        })
    })
}

/// Whether `line` adds `version` as a key (`"2026.11.2":` or `2026.11.2:`).
fn adds(line: &str, version: &str) -> bool {
    let t = line.trim_start();
    t.starts_with(&format!("\"{version}\":"))
        || t.starts_with(&format!("'{version}':"))
        || t.starts_with(&format!("{version}:"))
}

/// The wave a pin line belongs to: `name:` on the line itself (flow style) or the nearest
/// `- name:` above it in the new file.
fn wave_of(new_text: &[&str], line_no: usize, line: &str) -> Option<String> {
    let name_in = |l: &str| -> Option<String> {
        let at = l.find("name:")?;
        let rest = l[at + 5..].trim_start();
        let end = rest.find([',', '}', ' ']).unwrap_or(rest.len());
        let n = rest[..end].trim_matches(['"', '\'']);
        (!n.is_empty()).then(|| n.to_string())
    };
    if let Some(n) = name_in(line) {
        return Some(n);
    }
    new_text[..line_no.saturating_sub(1).min(new_text.len())]
        .iter()
        .rev()
        .find(|l| l.trim_start().starts_with("- name:"))
        .and_then(|l| name_in(l))
}

/// The history of every `(channel, version)` asked, from `head`'s first-parent line.
pub fn versions(
    repo: &Repository,
    head: Oid,
    asked: &[(String, String)],
) -> Result<BTreeMap<(String, String), VersionHistory>, git2::Error> {
    let mut line_of: Vec<Oid> = Vec::new();
    let mut at = Some(repo.find_commit(head)?);
    while let Some(c) = at {
        line_of.push(c.id());
        if line_of.len() >= HISTORY_DEPTH {
            break;
        }
        at = c.parent(0).ok();
    }
    let mut out: BTreeMap<(String, String), VersionHistory> = asked
        .iter()
        .map(|k| (k.clone(), VersionHistory::default()))
        .collect();
    for id in line_of.into_iter().rev() {
        let c = repo.find_commit(id)?;
        let tree = c.tree()?;
        let parent = c.parent(0).ok().map(|p| p.tree()).transpose()?;
        let mut opts = DiffOptions::new();
        opts.pathspec("*.yaml").pathspec("*.yml").context_lines(0);
        let diff = repo.diff_tree_to_tree(parent.as_ref(), Some(&tree), Some(&mut opts))?;
        let mut added: Vec<(String, usize, String)> = Vec::new();
        diff.print(git2::DiffFormat::Patch, |delta, _, line| {
            if line.origin() == '+' {
                let path = delta
                    .new_file()
                    .path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                let text = String::from_utf8_lossy(line.content())
                    .trim_end()
                    .to_string();
                added.push((path, line.new_lineno().unwrap_or(0) as usize, text));
            }
            true
        })?;
        if added.is_empty() {
            continue;
        }
        for ((channel, version), h) in out.iter_mut() {
            if !added.iter().any(|(_, _, l)| l.contains(version.as_str())) {
                continue;
            }
            if h.proposed.is_none() && added.iter().any(|(_, _, l)| adds(l, version)) {
                h.proposed = Some(commit_ref(&c, Vec::new()));
            }
            let pin_lines: Vec<&(String, usize, String)> = added
                .iter()
                .filter(|(_, _, l)| pins(l, channel, version))
                .collect();
            if pin_lines.is_empty() {
                continue;
            }
            let mut waves = Vec::new();
            for (path, no, l) in pin_lines {
                let text = tree
                    .get_path(std::path::Path::new(path))
                    .ok()
                    .and_then(|e| repo.find_blob(e.id()).ok())
                    .map(|b| String::from_utf8_lossy(b.content()).into_owned())
                    .unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                if let Some(w) = wave_of(&lines, *no, l)
                    && !waves.contains(&w)
                {
                    waves.push(w);
                }
            }
            h.pinned.push(commit_ref(&c, waves));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_adds_and_pull_requests_are_read_from_lines() {
        assert!(pins(
            "      images: {general: \"2026.11.2\"}",
            "general",
            "2026.11.2"
        ));
        assert!(pins("        general: 2026.11.2", "general", "2026.11.2"));
        assert!(!pins("        general: 2026.11.21", "general", "2026.11.2"));
        assert!(!pins("        gpu: 2026.11.2", "general", "2026.11.2"));
        assert!(adds("        \"2026.11.2\": {aws: ami-1}", "2026.11.2"));
        assert!(!adds("      images: {general: \"2026.11.2\"}", "2026.11.2"));
        assert_eq!(
            pr_reference("Merge pull request #42 from a/b").as_deref(),
            Some("#42")
        );
        assert_eq!(pr_reference("promote (!7)").as_deref(), Some("!7"));
        assert_eq!(pr_reference("see https://x/pull/9").as_deref(), Some("#9"));
        assert_eq!(pr_reference("no reference here"), None);
        let text = [
            "  waves:",
            "    - name: canary",
            "      clusters: [a]",
            "      images: {general: \"2\"}",
        ];
        assert_eq!(wave_of(&text, 4, text[3]).as_deref(), Some("canary"));
        assert_eq!(
            wave_of(&[], 1, "    - {name: main, images: {general: \"2\"}}").as_deref(),
            Some("main")
        );
    }
}
