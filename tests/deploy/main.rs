//! The `deploy` test target: packaging. The manifests and kustomize components as kubectl
//! renders them (typed, checked, promtool on the alert rules), the OCI image `scripts/image`
//! builds, shell completions and the man page.
//!
//! One binary holds these modules (each was a test binary of its own); tests/README.md says
//! which target a new test goes in. Run one module: `cargo test --test deploy <module>::`.

#[path = "../support/mod.rs"]
mod support;

mod completions;
mod deploy;
mod image;
mod proposals_deploy;
mod ui_deploy;
