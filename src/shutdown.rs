//! How a long-running rota process (`agent`, `controller`, `sim serve`, `demo --serve`) is
//! asked to stop: Ctrl-C, or SIGTERM as Kubernetes sends before it kills a pod.

/// Resolves on the first Ctrl-C or SIGTERM.
pub async fn wait_for_stop() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    // Without a SIGTERM handler (not unix, or it could not be installed): Ctrl-C only.
    let _ = tokio::signal::ctrl_c().await;
}
