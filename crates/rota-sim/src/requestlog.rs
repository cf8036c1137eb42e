//! The simulated fleet's request log: one line per HTTP request its Kubernetes API servers
//! and its cloud endpoint answered, with the bytes sent back, so a bench can count what a
//! client (`rota agent` in another process) asked and received.
//!
//! A line is tab-separated: `server`, `method`, `path?query`, `status`, `bytes`. It is
//! written when the response body ends (a watch: when the client closes it), so bytes are
//! what really went out.

use std::io::Write;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};

/// Where the lines go (shared by every server of one `rota sim serve`).
#[derive(Clone)]
pub struct RequestLog {
    out: Arc<Mutex<std::io::LineWriter<std::fs::File>>>,
}

impl RequestLog {
    pub fn create(path: &Path) -> std::io::Result<RequestLog> {
        let f = std::fs::File::create(path)?;
        Ok(RequestLog {
            out: Arc::new(Mutex::new(std::io::LineWriter::new(f))),
        })
    }

    pub fn record(&self, server: &str, method: &str, target: &str, status: u16, bytes: u64) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        // A failed write loses one line of a bench's log; it must not fail the request.
        let _ = writeln!(out, "{server}\t{method}\t{target}\t{status}\t{bytes}");
    }
}

/// A response body that counts its bytes and logs its request's line when it is dropped.
pub struct Counted<B> {
    inner: B,
    bytes: u64,
    line: Option<(RequestLog, String, String, String, u16)>,
}

impl<B> Counted<B> {
    pub fn new(
        inner: B,
        log: RequestLog,
        server: &str,
        method: &str,
        target: &str,
        status: u16,
    ) -> Counted<B> {
        Counted {
            inner,
            bytes: 0,
            line: Some((log, server.into(), method.into(), target.into(), status)),
        }
    }
}

impl<B> Counted<B> {
    /// A body that logs nothing (no log configured).
    pub fn unlogged(inner: B) -> Counted<B> {
        Counted {
            inner,
            bytes: 0,
            line: None,
        }
    }
}

impl<B> Drop for Counted<B> {
    fn drop(&mut self) {
        if let Some((log, server, method, target, status)) = self.line.take() {
            log.record(&server, &method, &target, status, self.bytes);
        }
    }
}

impl<B> HttpBody for Counted<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let p = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = &p
            && let Some(d) = f.data_ref()
        {
            self.bytes += d.len() as u64;
        }
        p
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full};

    #[tokio::test]
    async fn a_line_per_request_with_the_bytes_sent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("requests.log");
        let log = RequestLog::create(&path).unwrap();
        let body = Counted::new(
            Full::new(Bytes::from_static(b"hello")),
            log.clone(),
            "kube:c1",
            "GET",
            "/api/v1/pods?limit=500",
            200,
        );
        let got = body.collect().await.unwrap().to_bytes();
        assert_eq!(&got[..], b"hello");
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "kube:c1\tGET\t/api/v1/pods?limit=500\t200\t5\n");
    }
}
