//! The Kubernetes edge: the NodePoolRotation resource (and, with the controller runtime,
//! node and pod access, cordon, eviction and drain, leases, events).

pub mod crd;
pub mod index;
pub mod kubeconfig;
pub mod observe;
pub mod ownership;
