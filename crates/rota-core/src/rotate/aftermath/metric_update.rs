//! One metric update a pass's aftermath asks for ([`MetricUpdate`]), recorded on the pool's
//! series by the controller's executor. [`super::transitions`] counts them and
//! [`super::of`] gathers them; it lives below both.

/// One metric update, recorded on the pool's series by the executor.
#[derive(Clone, Debug, PartialEq)]
pub enum MetricUpdate {
    /// The pool's gauges follow the composed status (phase, nodes, progress).
    Status,
    /// New nodes Ready (`rota_nodes_brought_up_total`).
    BroughtUp(u64),
    /// One new node's boot-to-Ready, in seconds.
    BootToReady(f64),
    /// Old nodes drained (`rota_nodes_drained_total`).
    Drained(u64),
    /// One old node's drain, in seconds.
    DrainDuration(f64),
    /// A batch from its surge (or a replace batch from its start) to its end, in seconds.
    BatchDuration(f64),
    /// A gate stopped the rotation: `rota_pool_gate_failed` holds it until the pool moves.
    GateFailed(String),
    /// The pool moves: no gate holds it.
    GateCleared,
}
