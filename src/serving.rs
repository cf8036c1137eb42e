//! Limits every HTTP server of the agent shares (the webhook receiver, `/metrics` and the
//! probes), so that no client can starve them: a cap on open connections (the ones over it
//! are closed at once, unread), a deadline for request headers, and a lifetime after which a
//! connection is closed whatever it is doing (idle keep-alive included).
//!
//! Why: the metrics server had neither a header timeout nor a cap (50 half-open connections
//! were still open after 150 s), and the webhook receiver let 100 unauthenticated connections
//! grow the agent from 40 to 450 MiB.

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::TokioTimer;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The limits of one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; more are closed as soon as they are accepted.
    pub max_connections: usize,
    /// A request's headers must arrive within this, counted from when the server waits for
    /// them (a connection that sends nothing is closed after it too).
    pub header_timeout: Duration,
    /// A connection is closed this long after it was accepted, busy or idle.
    pub max_connection_age: Duration,
}

/// `/metrics`, `/healthz`, `/readyz`: a scrape or a probe takes milliseconds.
pub const METRICS: Limits = Limits {
    max_connections: 64,
    header_timeout: Duration::from_secs(5),
    max_connection_age: Duration::from_secs(60),
};

/// Push webhooks: a forge sends one request per connection within a few seconds.
pub const WEBHOOK: Limits = Limits {
    max_connections: 32,
    header_timeout: Duration::from_secs(5),
    max_connection_age: Duration::from_secs(40),
};

/// The connection slots of one server.
#[derive(Clone, Debug)]
pub struct Slots {
    limits: Limits,
    free: Arc<Semaphore>,
}

impl Slots {
    pub fn new(limits: Limits) -> Self {
        Slots {
            limits,
            free: Arc::new(Semaphore::new(limits.max_connections)),
        }
    }

    /// A slot for a connection just accepted, or `None`: close it now.
    pub fn admit(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.free).try_acquire_owned().ok()
    }

    /// Connections open now.
    pub fn in_use(&self) -> usize {
        self.limits.max_connections - self.free.available_permits()
    }

    /// An HTTP/1 connection builder with the header deadline armed.
    pub fn http1(&self) -> http1::Builder {
        let mut b = http1::Builder::new();
        b.timer(TokioTimer::new())
            .header_read_timeout(self.limits.header_timeout);
        b
    }

    /// Runs one connection to its end or its age limit, holding `slot` meanwhile.
    pub async fn run<F, E>(&self, slot: OwnedSemaphorePermit, conn: F) -> Result<(), String>
    where
        F: std::future::Future<Output = Result<(), E>>,
        E: std::fmt::Display,
    {
        let out = match tokio::time::timeout(self.limits.max_connection_age, conn).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!(
                "closed after {}s (connection age limit)",
                self.limits.max_connection_age.as_secs()
            )),
        };
        drop(slot);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn slots_cap_connections_and_age_ends_them() {
        let slots = Slots::new(Limits {
            max_connections: 2,
            header_timeout: Duration::from_secs(1),
            max_connection_age: Duration::from_secs(10),
        });
        let a = slots.admit().unwrap();
        let b = slots.admit().unwrap();
        assert!(slots.admit().is_none(), "the third is refused");
        assert_eq!(slots.in_use(), 2);
        let r = slots
            .run(a, std::future::pending::<Result<(), String>>())
            .await;
        assert!(r.unwrap_err().contains("age limit"));
        assert_eq!(slots.in_use(), 1, "the slot is given back");
        drop(b);
        assert!(slots.admit().is_some());
    }
}
