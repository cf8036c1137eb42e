//! The refs rota keeps in its mirror of the fleet repo: the notes namespace it writes
//! statuses under, where a fetch mirrors the remote's notes and stop ref, and the
//! remote-tracking ref of the branch. The fetch planner, the ls-refs probe and the mirror
//! all name them; they live below the three.

/// The notes namespace rota writes statuses under, and where fetches mirror the remote's.
pub const NOTES_PREFIX: &str = "refs/notes/rota/";
pub const REMOTE_NOTES_PREFIX: &str = "refs/rota/remote-notes/";
/// The mirror's copy of the fleet stop's ref (`rota_core::fleet::stops::STOP_REF`).
pub const REMOTE_STOP_REF: &str = "refs/rota/remote-stop";

/// The remote-tracking ref a fetch updates.
pub(super) fn tracking_ref(branch: &str) -> String {
    format!("refs/remotes/origin/{branch}")
}
