//! The simulated fleet: Kubernetes API servers and clouds in one process, the embedded default
//! that the demo and every test run against.
//!
//! `store` is one cluster's objects (its etcd), `selector` the label and field selectors the
//! API understands. `cloud` is a simulated cloud account behind `crate::cloud::NodeGroups`,
//! `faults` what goes wrong in it; `kubelet`, `scheduler` and `workloads` are the cluster's
//! own controllers; `scenario` says what a simulated fleet holds and `world` runs one cluster.

pub mod cloud;
pub mod faults;
pub mod quantity;
pub mod scenario;
pub mod scheduler;
pub mod selector;
pub mod store;
pub mod kubelet;
pub mod workloads;
pub mod world;
