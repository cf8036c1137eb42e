//! The `git` test target: git as the peer. Histories, reverts and force-pushes, `git daemon`
//! and `git http-backend`, sshd, ssh-keygen and gpg signatures, git notes, the forges' status and
//! pull-request doubles: the GitOps source and agent (`gitops`), the fleet views over history,
//! promotion, and hostile histories.
//!
//! One binary holds these modules (each was a test binary of its own); tests/README.md says
//! which target a new test goes in. Run one module: `cargo test --test git <module>::`.

#[path = "../support/mod.rs"]
mod support;

mod fleet_git;
mod gitops;
mod hostile_git;
mod hostile_views;
mod managed_pools;
mod promote;
mod proposal_body;
