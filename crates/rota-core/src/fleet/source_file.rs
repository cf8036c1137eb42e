//! One YAML file of the fleet repo as read ([`SourceFile`]): its path and bytes. The loader
//! reads it and the git and file readers make it; it lives below both.

/// One YAML file of the repo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// Relative to the repo root, `/`-separated.
    pub path: String,
    pub bytes: Vec<u8>,
}

impl SourceFile {
    /// A file from text, for tests and tools that build a repo in memory.
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> Self {
        SourceFile {
            path: path.into(),
            bytes: text.into().into_bytes(),
        }
    }
}
