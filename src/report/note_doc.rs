//! The note document: the JSON each agent writes on a fleet commit under its own cluster's
//! notes ref (its statuses, and its pools' completion and gate-failure records, optionally
//! signed). Its shape only: [`super::notes`] writes it and [`super::note_reader`] reads it,
//! bounded and validated; both stand on this file.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::evidence::SignedRecords;
use super::status::{CommitStatus, State};
use crate::source::NOTES_PREFIX;
use rota_core::waves::PoolRecord;

/// The note document of one cluster on one commit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NoteDoc {
    pub cluster: String,
    #[serde(default)]
    pub statuses: Vec<NoteStatus>,
    #[serde(default)]
    pub pools: Vec<PoolRecord>,
    /// `pools`, signed by the agent's key (see [`super::evidence`]); absent when the agent
    /// has no signing key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<SignedRecords>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NoteStatus {
    pub context: String,
    pub state: State,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_url: Option<String>,
    pub updated_at: DateTime<Utc>,
    /// The pool's stop note, when it is stopped or waits (machine-written, like the rest;
    /// readers sanitize it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<rota_core::rotate::stop::StopNote>,
}

impl NoteStatus {
    /// The commit status this entry of the note stands for.
    pub fn status(&self) -> CommitStatus {
        CommitStatus {
            context: self.context.clone(),
            state: self.state,
            description: self.description.clone(),
            target_url: self.target_url.clone(),
            stop: self.stop.clone(),
        }
    }
}

/// `refs/notes/rota/<cluster>`.
pub fn notes_ref(cluster: &str) -> String {
    format!("{NOTES_PREFIX}{cluster}")
}
