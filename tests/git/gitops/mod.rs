//! GitOps pieces against real peers: the `git` CLI and `git daemon`, `ssh-keygen` and `gpg`
//! for signatures, real HTTP on loopback for webhooks and a GitHub-compatible status API
//! double.

mod agent;
mod agent_flags;
mod forge_double;
mod notes;
mod probe;
mod source;
mod ssh;
mod status_api;
mod support;
mod trust;
mod webhook;
