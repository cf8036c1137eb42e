//! The simulated fleet: Kubernetes API servers and clouds in one process, the embedded default
//! that the demo and every test run against.
//!
//! `store` is one cluster's objects (its etcd), `selector` the label and field selectors the
//! API understands.

pub mod selector;
pub mod store;
