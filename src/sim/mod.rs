//! The simulated fleet: Kubernetes API servers and clouds in one process, the embedded default
//! that the demo and every test run against.

pub mod cloud;
pub mod faults;
pub mod quantity;
pub mod scenario;
pub mod scheduler;
