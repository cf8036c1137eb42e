//! The fleet repo: its model, loading, validation and the resolution of one cluster's desired
//! state. Pure code: no kube, no tokio, no network.

pub mod duration;
pub mod resolved;
