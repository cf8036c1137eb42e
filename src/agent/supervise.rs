//! Supervision of the long-running tasks of `rota agent` and `rota controller`: a task that
//! panics or ends before the process was asked to stop takes the process down with a
//! non-zero exit code, so that Kubernetes restarts it, rather than leave a zombie whose
//! probes stay green while nothing acts (a status task that panicked on `Instant` overflow
//! once left the agent up, never acting on a later commit).
//!
//! Two layers: [`exit_on_panic`] makes any panic of any thread or task end the process (tokio
//! would otherwise catch it and carry on without that task), and [`until_stop_or_end`] waits
//! for a stop signal or for the first supervised task to end, naming it.

use std::future::Future;

use tokio::task::JoinHandle;

/// The exit code of a process brought down by a panic or a task that ended on its own
/// (EX_SOFTWARE, "internal software error").
pub const EXIT_TASK_FAILED: u8 = 70;

/// From now on, a panic anywhere prints its message (the default hook) and then exits the
/// process with [`EXIT_TASK_FAILED`]. For long-running commands only: tests and one-shot
/// commands keep the default behaviour.
pub fn exit_on_panic() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        eprintln!(
            "rota: a task panicked; exiting (code {EXIT_TASK_FAILED}) so that the process is restarted rather than left running without it"
        );
        std::process::exit(i32::from(EXIT_TASK_FAILED));
    }));
}

/// Why a supervised task ended before the stop signal.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TaskEnded {
    #[error("the {0} task panicked")]
    Panicked(&'static str),
    #[error("the {0} task ended before the process was asked to stop")]
    Returned(&'static str),
    #[error("the {0} task was cancelled")]
    Cancelled(&'static str),
}

/// Waits for `stop` or for the first of `tasks` to end, whichever comes first: `Ok` on stop
/// (the tasks still run, for the caller to wind down), the task that ended otherwise.
pub async fn until_stop_or_end(
    stop: impl Future<Output = ()>,
    tasks: &mut [(&'static str, JoinHandle<()>)],
) -> Result<(), TaskEnded> {
    if tasks.is_empty() {
        stop.await;
        return Ok(());
    }
    let names: Vec<&'static str> = tasks.iter().map(|(n, _)| *n).collect();
    let first = futures::future::select_all(tasks.iter_mut().map(|(_, h)| h));
    tokio::select! {
        _ = stop => Ok(()),
        (result, index, _) = first => {
            let name = names[index];
            Err(match result {
                Ok(()) => TaskEnded::Returned(name),
                Err(e) if e.is_panic() => TaskEnded::Panicked(name),
                Err(_) => TaskEnded::Cancelled(name),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_task_is_named_and_ends_the_wait() {
        let mut tasks = vec![
            ("controller", tokio::spawn(std::future::pending::<()>())),
            (
                "agent",
                tokio::spawn(async {
                    tokio::task::yield_now().await;
                    panic!("overflow when adding duration to instant");
                }),
            ),
        ];
        let r = until_stop_or_end(std::future::pending(), &mut tasks).await;
        assert_eq!(r, Err(TaskEnded::Panicked("agent")));
        assert_eq!(r.unwrap_err().to_string(), "the agent task panicked");
    }

    #[tokio::test]
    async fn a_task_that_returns_early_is_a_failure_too_and_stop_is_not() {
        let mut tasks = vec![("record fetches", tokio::spawn(async {}))];
        let r = until_stop_or_end(std::future::pending(), &mut tasks).await;
        assert_eq!(r, Err(TaskEnded::Returned("record fetches")));
        let mut tasks = vec![("agent", tokio::spawn(std::future::pending::<()>()))];
        assert_eq!(until_stop_or_end(async {}, &mut tasks).await, Ok(()));
    }
}
