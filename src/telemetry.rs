//! Logging: tracing init (human or JSON lines), the span conventions, and secret redaction.
//!
//! Spans: one `pool` span per pool reconcile (fields `cluster`, `pool`) and one `batch` span
//! inside it (field `batch`): every event logged while rotating carries which pool and batch
//! it belongs to, in both formats, without each call site repeating them.
//!
//! Secrets: every credential rota holds (forge tokens, git passwords, webhook secrets,
//! notification URLs that embed a token) is a [`Secret`], whose `Debug` and `Display` print
//! `***`; the value is read only where it is sent. [`redact`] scrubs known secret values out of
//! free text that came from elsewhere (an error body echoing a request, a URL).

use std::io;

use tracing::Span;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

pub use crate::source::Secret;

/// How log lines look.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// For a terminal: `2026-11-22T04:00:00Z INFO pool{cluster=… pool=…}: message`.
    #[default]
    Human,
    /// One JSON object per line, with the current span's fields (for log pipelines).
    Json,
}

/// The operational flags `rota agent` and `rota controller` share: flatten into their `Args`
/// (`#[command(flatten)] pub ops: OperateArgs`). deploy/manifests/deployment.yaml uses them.
#[derive(Clone, Debug, clap::Args)]
pub struct OperateArgs {
    /// Log line format.
    #[arg(long, value_enum, default_value_t = LogFormat::Human, env = "ROTA_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// Log filter (`RUST_LOG` syntax, e.g. `rota=debug`); default `warn,rota=info`, or
    /// `RUST_LOG` if set.
    #[arg(long, env = "ROTA_LOG")]
    pub log_filter: Option<String>,
    /// Where to serve `/metrics`, `/healthz` and `/readyz` (port 0: any free port, logged).
    #[arg(long, env = "ROTA_METRICS_ADDR", default_value = "0.0.0.0:9090")]
    pub metrics_addr: std::net::SocketAddr,
    /// A rotation without progress for this long is Stuck (condition, Event, metric, alert).
    #[arg(long, env = "ROTA_STUCK_AFTER", default_value = "30m")]
    pub stuck_after: rota_core::fleet::duration::GoDuration,
    /// How far the cloud's describe calls may lag behind writes (AWS Auto Scaling's are
    /// eventually consistent; e.g. 30s). When set, a rotation first keeps the cluster
    /// autoscaler from scaling down any node of the pool, waits this long, and waits it again
    /// after each capacity change of its own, so that no capacity it writes is computed from a
    /// describe that misses a scale-down. 0s: describes are taken as consistent.
    #[arg(long, env = "ROTA_DESCRIBE_LAG", default_value = "0s")]
    pub describe_lag: rota_core::fleet::duration::GoDuration,
    /// How often a pool with nothing to rotate (every node on its image, no rotation under
    /// way) describes its cloud group anyway, to notice changes only the cloud shows (a
    /// template someone edited). A node joining or leaving the pool, a spec change or a new
    /// leader describes it at once.
    #[arg(long, env = "ROTA_IDLE_DESCRIBE_INTERVAL", default_value = "1h")]
    pub idle_describe_interval: rota_core::fleet::duration::GoDuration,
    /// No cluster autoscaler shares the pools' cloud groups: the operator's statement, since
    /// rota cannot tell from the cluster (the autoscaler may run outside it). Replacement
    /// nodes are then not annotated `cluster-autoscaler.kubernetes.io/scale-down-disabled`
    /// (two node patches a rotated node saved), annotations an earlier run added are
    /// removed at once, and `--describe-lag` waits only for rota's own capacity changes.
    /// Wrong where an autoscaler does run: it may remove a replacement node that waits empty.
    #[arg(long, env = "ROTA_NO_CLUSTER_AUTOSCALER")]
    pub no_cluster_autoscaler: bool,
}

/// The default filter when `RUST_LOG` is unset: rota at info, its dependencies at warn.
pub const DEFAULT_FILTER: &str = "warn,rota=info";

/// Install the global subscriber writing to stderr. `filter` overrides `RUST_LOG`. An
/// invalid filter is an error; a subscriber already installed (tests, a second init) is kept.
pub fn init(format: LogFormat, filter: Option<&str>) -> Result<(), String> {
    let filter = match filter {
        Some(f) => EnvFilter::try_new(f).map_err(|e| format!("invalid log filter {f:?}: {e}"))?,
        None => {
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER))
        }
    };
    let _ = tracing::subscriber::set_global_default(subscriber(format, filter, io::stderr));
    Ok(())
}

/// The filter of the one-shot commands that read agents' notes (`status`, `where`,
/// `promote`) when `RUST_LOG` is unset: their warnings (a note skipped as invalid, records
/// refused or about another cluster) on stderr, where the person who ran them sees why a
/// cluster shows no status; nothing else.
pub const ONE_SHOT_FILTER: &str = "warn";

/// [`init`] for a one-shot command: human lines on stderr, `RUST_LOG` else
/// [`ONE_SHOT_FILTER`] (`RUST_LOG=rota=debug` adds the time each read took).
pub fn init_one_shot() {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(ONE_SHOT_FILTER));
    let _ =
        tracing::subscriber::set_global_default(subscriber(LogFormat::Human, filter, io::stderr));
}

/// Build a subscriber for `format` writing to `writer` (tests capture logs with this).
pub fn subscriber<W>(
    format: LogFormat,
    filter: EnvFilter,
    writer: W,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_target(true);
    match format {
        LogFormat::Human => Box::new(builder.with_ansi(false).finish()),
        LogFormat::Json => Box::new(
            builder
                .json()
                .with_current_span(true)
                .with_span_list(true)
                .finish(),
        ),
    }
}

/// The span of one pool's reconcile: enter it around observe, plan and apply.
pub fn pool_span(cluster: &str, pool: &str) -> Span {
    tracing::info_span!("pool", cluster = %cluster, pool = %pool)
}

/// The span of one batch, inside a pool span.
pub fn batch_span(batch: u32) -> Span {
    tracing::info_span!("batch", batch = batch)
}

/// Replace every occurrence of each secret's value in `text` with `***`. For text rota did not
/// build itself (an HTTP error body, a git error message) before it is logged or stored in a
/// status. Empty secrets are skipped (replacing "" would garble everything).
pub fn redact(text: &str, secrets: &[&Secret]) -> String {
    let mut out = text.to_string();
    for s in secrets {
        let v = s.expose();
        if !v.is_empty() {
            out = out.replace(v, "***");
        }
    }
    out
}

/// A `MakeWriter` that appends to a shared buffer: captures a run's logs in tests.
#[derive(Clone, Default)]
pub struct CapturedLogs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl CapturedLogs {
    pub fn contents(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("not poisoned")).into_owned()
    }
}

impl io::Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().expect("not poisoned").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for CapturedLogs {
    type Writer = CapturedLogs;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operate_flags_parse_with_defaults() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            ops: OperateArgs,
        }
        let c =
            Cli::try_parse_from(["rota", "--log-format", "json", "--stuck-after", "45m"]).unwrap();
        assert_eq!(c.ops.log_format, LogFormat::Json);
        assert_eq!(c.ops.stuck_after.as_duration().as_secs(), 2700);
        assert_eq!(c.ops.metrics_addr.port(), 9090);
        assert!(Cli::try_parse_from(["rota", "--stuck-after", "soon"]).is_err());
    }

    #[test]
    fn secrets_print_as_stars() {
        let s = Secret::new("ghp_live_token_123");
        assert_eq!(format!("{s}"), "***");
        assert!(!format!("{s:?}").contains("ghp_live"));
        assert_eq!(
            redact(
                "401 for token ghp_live_token_123 at https://x:ghp_live_token_123@h",
                &[&s]
            ),
            "401 for token *** at https://x:***@h"
        );
        assert_eq!(redact("abc", &[&Secret::new("")]), "abc");
    }

    #[test]
    fn json_lines_carry_pool_and_batch_spans() {
        let logs = CapturedLogs::default();
        let sub = subscriber(LogFormat::Json, EnvFilter::new("info"), logs.clone());
        tracing::subscriber::with_default(sub, || {
            let pool = pool_span("prod-use1", "general");
            let _p = pool.enter();
            let b = batch_span(3);
            let _b = b.enter();
            tracing::info!(nodes = 2, "surging");
        });
        let line = logs.contents();
        let v: serde_json::Value = serde_json::from_str(line.trim()).expect(&line);
        assert_eq!(v["fields"]["message"], "surging");
        assert_eq!(v["span"]["name"], "batch");
        assert_eq!(v["span"]["batch"], 3);
        assert_eq!(v["spans"][0]["cluster"], "prod-use1");
        assert_eq!(v["spans"][0]["pool"], "general");
    }

    #[test]
    fn human_lines_name_the_pool() {
        let logs = CapturedLogs::default();
        let sub = subscriber(LogFormat::Human, EnvFilter::new("info"), logs.clone());
        tracing::subscriber::with_default(sub, || {
            let _p = pool_span("c1", "p1").entered();
            tracing::warn!("drain blocked");
        });
        let text = logs.contents();
        assert!(text.contains("WARN"), "{text}");
        assert!(text.contains("pool{cluster=c1 pool=p1}"), "{text}");
        assert!(text.contains("drain blocked"), "{text}");
    }
}
