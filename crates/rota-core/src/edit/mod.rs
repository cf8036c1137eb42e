//! The one fleet-file editor: every change rota writes into the fleet repo's YAML goes
//! through here, a discovered version added to its channel ([`FleetEditor::add_version`],
//! `rota images discover --write`) and a wave's pins moved ([`FleetEditor::move_pins`]: a
//! promotion, a revert, and a discovered version's first wave).
//!
//! Edits are textual, as a person would make them: only what changes is written, and
//! comments, quoting, blank lines and key order stay, so that the pull request shows the
//! change and nothing else. Each edit reads the text it changes again; [`FleetEditor::load`]
//! then loads the whole edited fleet, and the caller checks it holds what was asked before
//! anything is committed. Pure: files in, files out; the commit is the edge's
//! (`rota::promotion::pin`).

mod pins;
mod versions;

pub use pins::{PinChange, edit_pins};
pub use versions::insert_version;

use crate::fleet::{Diagnostics, Fleet, SourceFile, load_files};
use crate::images::Proposal;

/// The fleet repo's files (at one commit), with the edits made so far.
#[derive(Debug, Clone)]
pub struct FleetEditor {
    files: Vec<SourceFile>,
    /// The file the edits changed; one file a commit (the Fleet document's).
    edited: Option<String>,
}

impl FleetEditor {
    pub fn new(files: &[SourceFile]) -> FleetEditor {
        FleetEditor {
            files: files.to_vec(),
            edited: None,
        }
    }

    /// Adds `p`'s version at the end of its channel's `versions` map. Returns the file
    /// edited.
    pub fn add_version(&mut self, p: &Proposal) -> Result<String, String> {
        let (path, text) = insert_version(&self.files, p)?;
        Ok(self.replace(path, text))
    }

    /// Moves wave `wave`'s pin of each change's channel from its `from` to its `to` (a pin
    /// that does not say `from` is refused: someone moved it since). Returns the file edited.
    pub fn move_pins(&mut self, wave: &str, changes: &[PinChange]) -> Result<String, String> {
        let (path, text) = edit_pins(&self.files, wave, changes)?;
        Ok(self.replace(path, text))
    }

    /// The file the edits changed and its new text (`None`: nothing edited yet).
    pub fn edited(&self) -> Option<(&str, &str)> {
        let path = self.edited.as_deref()?;
        let f = self.files.iter().find(|f| f.path == path)?;
        Some((path, std::str::from_utf8(&f.bytes).unwrap_or_default()))
    }

    /// Every file, edited or not, as the commit will hold them.
    pub fn files(&self) -> &[SourceFile] {
        &self.files
    }

    /// The edited fleet, loaded and validated as an agent would load it.
    pub fn load(&self) -> Result<Fleet, Diagnostics> {
        load_files(&self.files)
    }

    fn replace(&mut self, path: String, text: String) -> String {
        match self.files.iter_mut().find(|f| f.path == path) {
            Some(f) => *f = SourceFile::new(path.clone(), text),
            None => self.files.push(SourceFile::new(path.clone(), text)),
        }
        self.edited = Some(path.clone());
        path
    }
}

#[cfg(test)]
mod tests;
