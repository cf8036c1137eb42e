//! The simulated fleet: Kubernetes API servers and clouds in one process, the embedded default
//! that the demo and every test run against.
//!
//! API side: `store` is one cluster's objects (its etcd), `selector` the label and field
//! selectors, `apiserver` the Kubernetes API over a store (tower service for kube-rs, loopback
//! HTTP for kubectl), `pdb` the disruption controller's arithmetic, `eviction` the eviction
//! subresource and graceful pod deletion, `kubeconfig` the file kubectl reads.

pub mod apiserver;
pub mod events;
pub mod eviction;
pub mod kubeconfig;
pub mod pdb;
pub mod selector;
pub mod store;
