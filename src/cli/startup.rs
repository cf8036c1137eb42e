//! Start-up shared by the long-running commands (`agent`, `controller`): logging, a valid
//! `--speed`, the tokio runtime and the metrics server. Both commands call it; it lives
//! below them.

use std::process::ExitCode;

/// Start-up shared by the long-running commands (`agent`, `controller`): logs to stderr in
/// the `--log-format` (filter `--log-filter`/`ROTA_LOG`, else `RUST_LOG`, default
/// `warn,rota=info`), a valid `--speed`, a tokio runtime. A usage or start-up problem is
/// printed and returned as exit code 2.
pub(super) fn long_running(
    speed: f64,
    ops: &crate::telemetry::OperateArgs,
) -> Result<tokio::runtime::Runtime, ExitCode> {
    if let Err(e) = crate::telemetry::init(ops.log_format, ops.log_filter.as_deref()) {
        eprintln!("rota: --log-filter: {e}");
        return Err(ExitCode::from(2));
    }
    if !(speed.is_finite() && speed > 0.0) {
        eprintln!("rota: --speed must be a positive number, got {speed}");
        return Err(ExitCode::from(2));
    }
    crate::agent::supervise::exit_on_panic();
    crate::memory::limit_arenas();
    let rt = tokio::runtime::Runtime::new().map_err(|e| {
        eprintln!("rota: cannot start the runtime: {e}");
        ExitCode::from(2)
    })?;
    rt.spawn(crate::memory::trim_periodically());
    Ok(rt)
}

/// The process's metrics, served on `--metrics-addr` (`/metrics`, `/healthz`, `/readyz`),
/// labelled with `cluster` (`""` for a process that serves no one cluster).
/// The bound address is logged (`serving metrics`, field `addr`): with port 0 that is how a
/// caller learns the port.
pub(super) async fn serve_metrics(
    ops: &crate::telemetry::OperateArgs,
    cluster: &str,
) -> Result<crate::metrics::Metrics, String> {
    let metrics = crate::metrics::Metrics::for_cluster(cluster);
    let addr = metrics
        .spawn_server(ops.metrics_addr)
        .await
        .map_err(|e| format!("--metrics-addr {}: {e}", ops.metrics_addr))?;
    tracing::info!(%addr, "serving metrics");
    Ok(metrics)
}
