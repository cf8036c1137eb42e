//! The Kubernetes Events a pass posts on its NodePoolRotation, as data: a stop (who must do
//! what), an operator's request (applied, or ignored and why), and the patch that clears
//! the request's annotation once the status records it.

use std::fmt;

use crate::rotate::operator::{OperatorError, REQUEST_ANNOTATION, REQUEST_NOTE_ANNOTATION};
use crate::rotate::operator::{Request, Verb};
use crate::rotate::resource::NodePoolRotationStatus;
use crate::rotate::stop::MovedBy;

/// Kubernetes keeps an Event's note to 1 kB.
const NOTE_ROOM: usize = 1000;

/// One Event to post on the pool's NodePoolRotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// A Warning (a person must act, or something failed), else Normal.
    pub warning: bool,
    pub reason: String,
    /// `Rotate`, or the batch a step's Event belongs to (`Batch3`, see `step_events`).
    pub action: String,
    pub note: String,
}

impl Event {
    pub fn new(warning: bool, reason: &str, action: &str, note: String) -> Event {
        Event {
            warning,
            reason: reason.to_string(),
            action: action.to_string(),
            note: note.chars().take(NOTE_ROOM).collect(),
        }
    }
}

/// As the golden logs show it: `Warning DrainTimeout (Rotate): ...`.
impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.warning { "Warning" } else { "Normal" };
        write!(f, "{kind} {} ({}): {}", self.reason, self.action, self.note)
    }
}

/// Every stop says who must do what: the Event to post when a pool stops, or what holds it
/// changes (a Warning when it waits for a person): its reason, and the note's cause,
/// blockers and next step. `None` while it moves or nothing changed.
pub fn stop_event(
    prev: Option<&NodePoolRotationStatus>,
    status: &NodePoolRotationStatus,
) -> Option<Event> {
    let note = status.stop.as_ref()?;
    // A wait rota ends is said once per reason: a drain's blocked pods change with every
    // eviction, and an Event each time would flood the resource. What holds a pool for a
    // person is said again whenever it changes.
    let same = prev.and_then(|p| p.stop.as_ref()).is_some_and(|p| {
        p.reason == note.reason && (note.by == MovedBy::Rota || p.blocked_by == note.blocked_by)
    });
    (!same).then(|| {
        Event::new(
            note.by == MovedBy::Person,
            &note.reason,
            "Rotate",
            note.line(),
        )
    })
}

/// The Event an operator's request gets, with the annotation's value it answers. One reason
/// per verb: the event recorder folds repeats of a reason into one Event (a count), which
/// would hide a resume behind the pause before it.
pub fn request_event(
    request: &Result<Request, OperatorError>,
    steered: Option<&str>,
) -> (String, Event) {
    match request {
        Ok(r) => {
            let reason = match r.verb {
                Verb::Pause => "OperatorPause",
                Verb::Resume => "OperatorResume",
                Verb::Retry => "OperatorRetry",
                Verb::CompleteSoak => "OperatorCompleteSoak",
            };
            let note = steered.unwrap_or("applied").to_string();
            (r.id.clone(), Event::new(false, reason, "Rotate", note))
        }
        Err(e @ OperatorError::Malformed { value }) => {
            let note = format!("ignored: {e}");
            let event = Event::new(true, "OperatorRequestInvalid", "Rotate", note);
            (value.clone(), event)
        }
    }
}

/// Remove the operator's request annotation while it still holds `value` (a newer request
/// stays for the next pass), and its free-text note with it (`with_note`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClearRequest {
    pub value: String,
    pub with_note: bool,
}

impl ClearRequest {
    /// The JSON patch (RFC 6902) that does it: its `test` op fails on a newer request.
    pub fn ops(&self) -> serde_json::Value {
        let pointer = |name: &str| format!("/metadata/annotations/{}", name.replace('/', "~1"));
        let path = pointer(REQUEST_ANNOTATION);
        let mut ops = vec![
            serde_json::json!({"op": "test", "path": path, "value": self.value}),
            serde_json::json!({"op": "remove", "path": path}),
        ];
        if self.with_note {
            ops.push(serde_json::json!({"op": "remove", "path": pointer(REQUEST_NOTE_ANNOTATION)}));
        }
        serde_json::Value::Array(ops)
    }
}
