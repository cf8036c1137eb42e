//! What the integration tests and the benches share: one module per test peer, double or
//! fixture. Each test target mounts this tree once (`#[path = "../support/mod.rs"] mod
//! support;` in `tests/<target>/main.rs`, and in `benches/main.rs`) and reaches its parts as
//! `crate::support::git`, `crate::support::moto`, ...
// Every target uses a part of it; the rest is not dead, only unused there.
#![allow(dead_code)]

pub mod aks_double;
pub mod api_schemas;
pub mod azure_double;
pub mod big_fleet;
pub mod canary_fleet;
pub mod eks_double;
pub mod example_repo;
pub mod gcp_double;
pub mod git;
pub mod gke_double;
pub mod kustomize;
pub mod loopback;
pub mod model;
#[cfg(feature = "aws")]
pub mod moto;
pub mod processes;
pub mod prometheus;
#[cfg(feature = "sim")]
pub mod sim_fleet;
pub mod venv;
