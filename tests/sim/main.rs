//! The `sim` test target: the simulated fleet in process. kube-rs against the in-process API
//! server and the simulated clouds, on paused tokio time: the controller, leadership and
//! fencing, resuming from a checkpoint, the agent and adoption (over a local git repo), the chaos
//! suite, the API server's conformance and `rota demo`.
//!
//! One binary holds these modules (each was a test binary of its own); tests/README.md says
//! which target a new test goes in. Run one module: `cargo test --test sim <module>::`.

#[path = "../support/mod.rs"]
mod support;

mod adoption_sim;
mod agent_sim;
mod chaos;
mod chaos_owners;
mod controller_sim;
mod demo;
mod fleet_stop_sim;
mod karpenter_sim;
mod leadership_sim;
mod ledger_sim;
mod onboard_sim;
mod owners_bluegreen_sim;
mod owners_sim;
mod replace_sim;
mod resume_sim;
mod sim_api;
mod sim_world;
