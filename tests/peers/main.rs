//! The `peers` test target: the other external peers. moto (the AWS emulator) and the test
//! peers' venv with the clouds' published API descriptions, the cloud conformance suite over
//! every provider, a real Prometheus server for the Prometheus gate, and Chromium for the page.
//!
//! One binary holds these modules (each was a test binary of its own); tests/README.md says
//! which target a new test goes in. Run one module: `cargo test --test peers <module>::`.

#[path = "../support/mod.rs"]
mod support;

mod aws_moto;
mod cloud_conformance;
mod eks_moto;
mod owner_clients;
mod owner_schemas;
mod prometheus_gate;
mod ui_browser;
