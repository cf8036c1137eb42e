//! Secrets the commands read from a file or the environment (the agent's git and forge
//! tokens, an SSH key's passphrase): one rule for where a secret comes from and what an empty
//! one means. Its own file so that `agent`, `forge` and `git_auth` share it without importing
//! each other.

use std::path::Path;

use crate::source::Secret;

/// A secret from `file` when given, else from the environment variable `var` (looked up
/// through `env`), else `None`. An empty one is an error naming where it came from.
pub(crate) fn secret_from(
    file: Option<&Path>,
    var: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Secret>, String> {
    if let Some(f) = file {
        return Secret::from_file(f).map(Some).map_err(|e| e.to_string());
    }
    match env(var) {
        Some(v) if v.is_empty() => Err(format!("the environment variable {var} is empty")),
        Some(v) => Ok(Some(Secret::new(v))),
        None => Ok(None),
    }
}
