//! Following the fleet repo: the poll loop, plus the optional push webhook receiver and the
//! optional working-copy watch, wired to one trigger. What the agent starts; it then reads
//! the newest commit from [`Follower::state`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::GitSource;
use super::poll::{SourceState, Trigger, poll_loop};
use super::watch::{WorkingCopyWatch, watch_working_copy};
use super::webhook::{Receiver, WebhookConfig, serve};

#[derive(Debug, Clone)]
pub struct FollowConfig {
    pub interval: Duration,
    /// Listen for push webhooks on this address.
    pub webhook: Option<(SocketAddr, WebhookConfig)>,
    /// Development: fetch when this local working copy changes.
    pub watch_dir: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("webhook listener on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("watching {dir}: {source}")]
    Watch {
        dir: PathBuf,
        #[source]
        source: notify::Error,
    },
}

/// A running follower; everything stops when `cancel` fires (the watch when this is dropped).
#[derive(Debug)]
pub struct Follower {
    pub state: watch::Receiver<SourceState>,
    /// Fire for an immediate fetch (e.g. after `rota promote` pushed).
    pub trigger: Trigger,
    /// Where the webhook receiver actually listens (port 0 resolved).
    pub webhook_addr: Option<SocketAddr>,
    _watch: Option<WorkingCopyWatch>,
}

/// Starts following `source`. Must be called inside a tokio runtime.
pub async fn follow(
    source: Arc<GitSource>,
    config: FollowConfig,
    cancel: CancellationToken,
) -> Result<Follower, FollowError> {
    let trigger = Trigger::new();
    let mut webhook_addr = None;
    if let Some((addr, hook)) = config.webhook {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| FollowError::Listen { addr, source })?;
        webhook_addr = listener.local_addr().ok();
        tokio::spawn(serve(
            listener,
            Arc::new(Receiver::new(hook)),
            trigger.clone(),
            cancel.clone(),
        ));
    }
    let watch = match config.watch_dir {
        Some(dir) => Some(
            watch_working_copy(&dir, trigger.clone())
                .map_err(|source| FollowError::Watch { dir, source })?,
        ),
        None => None,
    };
    let (tx, state) = watch::channel(SourceState::default());
    tokio::spawn(poll_loop(
        source,
        config.interval,
        trigger.clone(),
        tx,
        cancel,
    ));
    Ok(Follower {
        state,
        trigger,
        webhook_addr,
        _watch: watch,
    })
}
