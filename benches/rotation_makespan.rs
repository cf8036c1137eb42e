//! Rotation makespan on the in-memory model world (the sequence tests' model): a cluster of
//! 3 pools × 100 nodes moves to a new image with `batch: "10%"`.
//!
//! Prints, in simulated time: the makespan with the pools rotating in parallel
//! (`maxParallelPools: 3`), the lower bound the policy allows, and a one-pool-at-a-time
//! baseline; and the API requests per rotated node, counting per reconcile 4 reads (the
//! group, nodes, pods, PDBs) and 1 status write, plus one request per action.
//!
//! Run: `cargo bench --bench figures -- rotation_makespan`. (The model stands in for `rota sim` until the
//! simulated API server lands; the figures are the planner's, not the transport's.)

use std::time::Instant;

use crate::support::model::*;
use rota::fleet::resolved::BatchSize;
use rota::rotate::Phase;

const POOLS: u64 = 3;
const NODES: u32 = 100;
const BOOT: (u32, u32) = (4, 8);

fn pool(seed: u64) -> Scenario {
    let mut s = scenario(&format!("pool-{seed}"));
    s.seed = seed;
    s.size = NODES;
    s.batch = BatchSize::Percent(10);
    s.boot = BOOT;
    s.workloads = vec![
        Workload {
            name: "web".into(),
            replicas: 40,
            min_available: Some(36),
        },
        Workload {
            name: "api".into(),
            replicas: 20,
            min_available: Some(18),
        },
        Workload {
            name: "batch".into(),
            replicas: 60,
            min_available: None,
        },
    ];
    s.max_ticks = 5000;
    s
}

fn minutes(ticks: u32) -> f64 {
    f64::from(ticks) * TICK as f64 / 60.0
}

pub fn main() {
    let wall = Instant::now();
    let mut per_pool = Vec::new();
    let (mut requests, mut plans, mut actions) = (0u64, 0u64, 0u64);
    for seed in 1..=POOLS {
        let s = pool(seed);
        let o = run(&s, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(o.phase, Phase::Succeeded, "{}", o.message);
        let done = o.succeeded_at.expect("succeeded");
        per_pool.push(done);
        plans += u64::from(o.plans);
        actions += u64::from(o.actions);
        requests += u64::from(o.plans) * 5 + u64::from(o.actions);
        println!(
            "pool {seed}: {NODES} nodes rotated in {:.1} min ({} reconciles, {} actions)",
            minutes(done),
            o.plans,
            o.actions
        );
    }
    // Lower bound per batch: the fastest boot, one tick to Ready (cordon and the first
    // evictions go out in that same step), one eviction's grace (2 ticks) and the
    // termination (2 ticks); PDB rounds and slower boots come on top.
    let batches = NODES.div_ceil(BatchSize::Percent(10).nodes(NODES));
    let bound = batches * (BOOT.0 + 1 + 2 + 2);
    let parallel = *per_pool.iter().max().unwrap();
    let sequential: u32 = per_pool.iter().sum();
    let rotated = u64::from(NODES) * POOLS;
    println!(
        "--- {POOLS} pools x {NODES} nodes, batch 10%, boot {}-{} min",
        minutes(BOOT.0),
        minutes(BOOT.1)
    );
    println!(
        "makespan, pools in parallel (maxParallelPools: 3): {:.1} min",
        minutes(parallel)
    );
    println!(
        "lower bound the policy allows:                      {:.1} min ({batches} batches)",
        minutes(bound)
    );
    println!(
        "baseline, one pool at a time:                       {:.1} min ({:.2}x the parallel makespan)",
        minutes(sequential),
        f64::from(sequential) / f64::from(parallel)
    );
    println!(
        "API requests per rotated node: {:.1} ({requests} requests: {plans} reconciles x 5 + {actions} actions)",
        requests as f64 / rotated as f64
    );
    println!("(wall time {:.2}s)", wall.elapsed().as_secs_f64());
}
