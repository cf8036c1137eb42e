//! The benches, one binary: each module is a scenario with its own `main`, picked by name.
//!
//! `cargo bench --bench figures -- agent_scale` runs one scenario (a name runs every scenario
//! whose name contains it: `-- scale` runs `agent_scale`, `fleet_scale` and `sim_scale`);
//! `cargo bench --bench figures` runs them all; `-- --list` lists them. Each scenario keeps its
//! own environment variables (in its module's header) and its own smoke pass: without
//! `--bench`, as `cargo test --all-targets` runs this binary, every scenario runs its small
//! smoke size. When more than one scenario runs, each runs in a child process of this binary
//! (`<binary> <scenario> [--bench]`), so that one's memory, threads and global state (the
//! figures read the process's RSS, some install a tracing subscriber) never reach the next.

use std::process::{Command, ExitCode};

#[path = "../tests/support/mod.rs"]
mod support;

mod agent_latency;
mod agent_scale;
mod controller_sim;
mod fleet_scale;
mod fleet_validate;
mod git_poll;
mod gitops;
mod images_discover;
mod ledger_scale;
mod owner_rotation;
mod rotation_makespan;
mod sim_scale;
mod sim_store;
mod status_writes;
mod ui_page;

/// Every scenario by name, as `cargo bench --bench figures -- <name>` picks it.
const SCENARIOS: &[(&str, fn())] = &[
    ("agent_latency", agent_latency::main),
    ("agent_scale", agent_scale::main),
    ("controller_sim", controller_sim::main),
    ("fleet_scale", fleet_scale::main),
    ("fleet_validate", fleet_validate::main),
    ("git_poll", git_poll::main),
    ("gitops", gitops::main),
    ("images_discover", images_discover::main),
    ("ledger_scale", ledger_scale::main),
    ("owner_rotation", owner_rotation::main),
    ("rotation_makespan", rotation_makespan::main),
    ("sim_scale", sim_scale::main),
    ("sim_store", sim_store::main),
    ("status_writes", status_writes::main),
    ("ui_page", ui_page::main),
];

/// The scenarios `names` pick, in table order: for each name, the scenario of that exact name,
/// else every scenario whose name contains it; all of them when no name is given.
fn pick(names: &[&str]) -> Vec<&'static (&'static str, fn())> {
    SCENARIOS
        .iter()
        .filter(|(n, _)| {
            names.is_empty()
                || names
                    .iter()
                    .any(|w| *n == *w || (n.contains(w) && !SCENARIOS.iter().any(|(o, _)| o == w)))
        })
        .collect()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bench = args.iter().any(|a| a == "--bench");
    if args.iter().any(|a| a == "--list") {
        for (name, _) in SCENARIOS {
            println!("{name}: bench");
        }
        return ExitCode::SUCCESS;
    }
    // Flags (`--bench`, and the test harness's flags `cargo test` may pass) are not names.
    let names: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect();
    let mut picked = pick(&names);
    if picked.is_empty() {
        let all: Vec<&str> = SCENARIOS.iter().map(|(n, _)| *n).collect();
        if bench {
            eprintln!(
                "no bench scenario matches {names:?}; the scenarios: {}",
                all.join(", ")
            );
            return ExitCode::FAILURE;
        }
        // `cargo test --all-targets <filter>` hands its test filter to this binary too: a
        // filter that names no scenario runs every smoke pass, as when each was a binary.
        picked = pick(&[]);
    }
    if let [(_, run)] = picked[..] {
        run();
        return ExitCode::SUCCESS;
    }
    let me = std::env::current_exe().expect("the bench binary's own path");
    let mut failed = Vec::new();
    for (name, _) in picked {
        eprintln!("== bench scenario {name}");
        let mut child = Command::new(&me);
        child.arg(name);
        if bench {
            child.arg("--bench");
        }
        let status = child
            .status()
            .unwrap_or_else(|e| panic!("running {} {name}: {e}", me.display()));
        if !status.success() {
            failed.push(*name);
        }
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("bench scenarios failed: {}", failed.join(", "));
        ExitCode::FAILURE
    }
}
