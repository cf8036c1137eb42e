//! The simulated fleet: Kubernetes API servers and clouds in one process, the embedded default
//! that the demo and every test run against.
//!
//! API side: `store` is one cluster's objects (its etcd), `selector` the label and field
//! selectors, `apiserver` the Kubernetes API over a store (tower service for kube-rs, loopback
//! HTTP for kubectl), `pdb` the disruption controller's arithmetic, `eviction` the eviction
//! subresource and graceful pod deletion, `kubeconfig` the file kubectl reads.
//!
//! World side: `cloud` is a simulated cloud account behind `rota_core::cloud::NodeGroups`, `faults`
//! what goes wrong in it; `kubelet`, `scheduler` and `workloads` are the cluster's own
//! controllers (`naming` the stable names the cloud and the kubelets give what they make),
//! `autoscaler` a cluster autoscaler sharing a group with the rotation; `registrar` runs those controllers against any other `NodeGroups` provider
//! (moto); `scenario` says what a simulated fleet holds and `world` runs it on tokio,
//! `timekeeping` keeping its deletions and its lag honest under load.
//!
//! The crate `rota` depends on it through its `sim` Cargo feature (on by default; the
//! agent's image leaves it out). It depends on `rota-core` only among rota's crates: it
//! implements the core's `NodeGroups`, and `wire` serves one over loopback HTTP.

pub mod apiserver;
pub mod autoscaler;
pub mod cloud;
pub mod ctx;
pub mod events;
pub mod eviction;
pub mod faults;
pub mod images;
pub mod karpenter;
pub mod kubeconfig;
pub mod kubelet;
pub mod naming;
pub mod onboard;
pub mod pdb;
pub mod quantity;
pub mod registrar;
pub mod requestlog;
pub mod scenario;
pub mod scheduler;
pub mod selector;
pub mod store;
pub mod timekeeping;
pub mod wire;
pub mod workloads;
pub mod world;
