//! Cloud node groups behind one narrow trait: the only way rota changes machines.
//!
//! A pool's machines live in a cloud group (AWS Auto Scaling group, GCP managed instance group,
//! Azure scale set). rota needs five things from it: see the group and its instances, change
//! the image new instances boot from, change the desired capacity, change the maximum size,
//! and terminate one instance. The trait and its value types are the core's
//! (`rota_core::cloud`, re-exported here); this folder holds the providers, each behind a
//! Cargo feature (`aws`, `gcp`, `azure`, all on by default), [`registry`] that picks one per
//! group, [`retry`] (bounded retries with backoff), [`metered`] (calls counted and timed) and
//! [`lazy_owner`] (a managed pools' owner adapter, built on its first call).
//! The simulated cloud is `rota_sim::cloud`.

#[cfg(feature = "aws")]
pub mod aws;
#[cfg(feature = "azure")]
pub mod azure;
#[cfg(feature = "gcp")]
pub mod gcp;
pub mod lazy_owner;
pub mod metered;
pub mod registry;
pub mod retry;

pub use rota_core::cloud::*;
