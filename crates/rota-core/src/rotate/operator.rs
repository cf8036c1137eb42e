//! Operator requests outside git: `rota ctl pause|resume|retry|complete-soak` sets the
//! annotation [`REQUEST_ANNOTATION`] on a NodePoolRotation; the controller reads it into the
//! planner's input, the planner applies it to the checkpoint (pure, like every decision), and
//! the controller clears the annotation once the status that records it is written. Git stays
//! the source of truth for the desired state: these only steer the rotation under way.
//!
//! The annotation's value is `<verb>@<time>@<who>` (`complete-soak@2026-11-24T06:00:00Z@ana`):
//! the whole value identifies the request, and the checkpoint remembers the last one applied,
//! so a request survives a crash between the status write and the clearing, and is applied
//! exactly once.
//!
//! `<who>` is the Kubernetes user that made the request, not a name anyone types: `rota ctl`
//! asks the API server who it is (a SelfSubjectReview), and the ValidatingAdmissionPolicy
//! rota ships (`deploy/manifests/request-identity.yaml`) rejects any write of the annotation
//! whose `<who>` is not the writer's own `request.userInfo.username`. So what the controller
//! records in statuses, Events and commit statuses is an identity the API server vouched for.
//! A free-text note (`rota ctl --by`, "from the incident channel") may go beside it in
//! [`REQUEST_NOTE_ANNOTATION`]; it is shown sanitised and cut, as a note, never as who.

use chrono::{DateTime, Utc};

use super::checkpoint::{Checkpoint, Stage};

/// The annotation `rota ctl` writes and the controller consumes.
pub const REQUEST_ANNOTATION: &str = "rota.dev/request";
/// An optional free-text note beside the request (`rota ctl --by`).
pub const REQUEST_NOTE_ANNOTATION: &str = "rota.dev/request-note";
/// Longest note shown (characters).
pub const MAX_NOTE_CHARS: usize = 80;

/// What an operator asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// Hold the rotation where it is (after the current action) until `resume`.
    Pause,
    /// Undo `pause`.
    Resume,
    /// Clear a halt (a gate failure or drain timeout with `pause`, nodes never Ready) and try
    /// again from where it stopped, with fresh timeouts.
    Retry,
    /// End the current batch or pool soak now (the gates must still pass), like GKE's
    /// `complete-upgrade`.
    CompleteSoak,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Pause => "pause",
            Verb::Resume => "resume",
            Verb::Retry => "retry",
            Verb::CompleteSoak => "complete-soak",
        }
    }

    pub fn parse(s: &str) -> Option<Verb> {
        [Verb::Pause, Verb::Resume, Verb::Retry, Verb::CompleteSoak]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// One request, as read from the annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub verb: Verb,
    pub at: DateTime<Utc>,
    /// The Kubernetes user that made the request (vouched for by the admission policy).
    pub by: Option<String>,
    /// The free-text note beside it, if any (sanitised, at most [`MAX_NOTE_CHARS`]).
    pub note: Option<String>,
    /// The annotation's value: the request's identity.
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OperatorError {
    #[error(
        "annotation {REQUEST_ANNOTATION}={:?}: expected <verb>@<RFC 3339 time>@<who> with verb pause, resume, retry or complete-soak",
        crate::sanitize::line(.value)
    )]
    Malformed { value: String },
}

impl Request {
    pub fn new(verb: Verb, at: DateTime<Utc>, by: Option<&str>) -> Request {
        let stamp = at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let id = match by {
            Some(who) => format!("{}@{stamp}@{who}", verb.as_str()),
            None => format!("{}@{stamp}", verb.as_str()),
        };
        Request {
            verb,
            at,
            by: by.map(str::to_string),
            note: None,
            id,
        }
    }

    /// With the free-text note `note` (sanitised and cut; empty: none).
    pub fn with_note(mut self, note: Option<&str>) -> Request {
        self.note = note.map(clean_note).filter(|n| !n.is_empty());
        self
    }

    pub fn parse(value: &str) -> Result<Request, OperatorError> {
        let bad = || OperatorError::Malformed {
            value: value.to_string(),
        };
        let mut parts = value.splitn(3, '@');
        let verb = parts.next().and_then(Verb::parse).ok_or_else(bad)?;
        let at = parts
            .next()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .ok_or_else(bad)?
            .with_timezone(&Utc);
        let by = parts.next().filter(|w| !w.is_empty()).map(str::to_string);
        Ok(Request {
            verb,
            at,
            by,
            note: None,
            id: value.to_string(),
        })
    }

    /// `rota ctl complete-soak by ana at 2026-11-24T06:00:00Z ("from the incident")`.
    pub fn describe(&self) -> String {
        let by = self.by.as_deref().map_or(String::new(), |w| {
            format!(" by {}", crate::sanitize::line(w))
        });
        let note = self
            .note
            .as_deref()
            .map_or(String::new(), |n| format!(" ({n:?})"));
        format!(
            "rota ctl {}{by} at {}{note}",
            self.verb.as_str(),
            self.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    }
}

/// A note as shown: one line, no control characters, at most [`MAX_NOTE_CHARS`].
pub fn clean_note(note: &str) -> String {
    let line = crate::sanitize::line(note.trim());
    let mut out: String = line.chars().take(MAX_NOTE_CHARS).collect();
    if line.chars().count() > MAX_NOTE_CHARS {
        out.pop();
        out.push('…');
    }
    out
}

/// Applies `request` to the checkpoint unless it was applied already. Returns what it did
/// (for the status message), `None` when there was nothing new to apply.
pub fn apply(cp: &mut Checkpoint, request: &Request, now: DateTime<Utc>) -> Option<String> {
    if cp.operator_request.as_deref() == Some(request.id.as_str()) {
        return None;
    }
    cp.operator_request = Some(request.id.clone());
    let what = request.describe();
    let done = match request.verb {
        Verb::Pause => {
            cp.operator_paused = Some(what.clone());
            format!("paused ({what})")
        }
        Verb::Resume => match cp.operator_paused.take() {
            Some(_) => format!("resumed ({what})"),
            None => format!("{what}: the rotation was not paused by an operator"),
        },
        Verb::Retry => match cp.halted.take() {
            Some(why) => {
                cp.restart_clocks(now);
                format!("retrying after \"{why}\" ({what})")
            }
            None => format!("{what}: the rotation was not halted"),
        },
        Verb::CompleteSoak => match &mut cp.stage {
            Stage::Soaking { until, .. } | Stage::PoolSoak { until } if *until > now => {
                *until = now;
                format!("soak ended early ({what})")
            }
            _ => format!("{what}: the rotation was not soaking"),
        },
    };
    Some(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_print_back() {
        let at: DateTime<Utc> = "2026-11-24T06:00:00Z".parse().unwrap();
        let r = Request::new(Verb::CompleteSoak, at, Some("ana"));
        assert_eq!(r.id, "complete-soak@2026-11-24T06:00:00Z@ana");
        assert_eq!(Request::parse(&r.id).unwrap(), r);
        let r = Request::parse("pause@2026-11-24T06:00:00Z").unwrap();
        assert_eq!((r.verb, r.by), (Verb::Pause, None));
        for bad in ["", "stop@2026-11-24T06:00:00Z", "pause", "pause@yesterday"] {
            let e = Request::parse(bad).unwrap_err().to_string();
            assert!(
                e.contains("rota.dev/request") && e.contains("pause, resume"),
                "{e}"
            );
        }
    }
}
