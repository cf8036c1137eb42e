//! rota: keeps fleets of Kubernetes node pools on the machine image their git repo declares.
//!
//! Module map (see `docs/architecture.md`): `fleet` reads and resolves the fleet repo (pure);
//! `rotate` plans (pure) and applies blue-green rotations; `kube` and `cloud` are the edges
//! that act; `sim` is the simulated fleet everything runs against without a real cluster;
//! `cli` holds one file per subcommand.

pub mod agent;
pub mod cli;
pub mod cloud;
pub mod controller;
pub mod demo;
pub mod errors;
pub mod fleet;
pub mod gates;
pub mod kube;
pub mod memory;
pub mod metrics;
pub mod notify;
pub mod report;
pub mod rotate;
pub mod sanitize;
pub mod serving;
pub mod shutdown;
pub mod sim;
pub mod source;
pub mod stuck;
pub mod telemetry;
pub mod ui;
pub mod waves;
