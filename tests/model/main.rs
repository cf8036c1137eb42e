//! The `model` test target: the pure parts in process, nothing spawned and no peer. The
//! planner driven through whole rotations against the model world (`support::model`, golden step
//! logs in tests/golden), stuck detection, the fleet repo's loader and checks on the examples, an
//! invalid-repo corpus, a hostile-repo corpus and property tests.
//!
//! One binary holds these modules (each was a test binary of its own); tests/README.md says
//! which target a new test goes in. Run one module: `cargo test --test model <module>::`.

#[path = "../support/mod.rs"]
mod support;

mod fleet_fuzz;
mod fleet_invalid;
mod fleet_repo;
mod hostile_repo;
mod rotation_sequences;
mod stuck_rotation;
