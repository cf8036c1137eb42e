//! The `processes` test target: rota as processes. The built binary spawned as `rota agent`,
//! `rota controller`, `rota sim serve` and the operator commands, talking to each other over
//! loopback, with kubectl and git beside them; attacks on the agent's servers; what reaches the
//! logs.
//!
//! One binary holds these modules (each was a test binary of its own); tests/README.md says
//! which target a new test goes in. Run one module: `cargo test --test processes <module>::`.

#[path = "../support/mod.rs"]
mod support;

mod agent_processes;
mod controller_processes;
mod ctl_sim;
mod hostile_servers;
mod operate_processes;
mod secrets_in_logs;
mod sim_kubectl;
mod sim_serve_kubectl;
mod stop_processes;
