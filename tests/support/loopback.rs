//! An HTTP/1 server on a loopback port, for the API doubles and the tests' small servers: it
//! accepts connections until it is dropped and hands every request to one handler. What the
//! handler answers, records or checks is the double's own.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// A running server; dropping it stops accepting (connections already open finish on their
/// own tasks).
pub struct Loopback {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Loopback {
    /// Serve `handler` on a fresh loopback port.
    pub async fn serve<H, Fut>(handler: H) -> Loopback
    where
        H: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding a loopback port");
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let handler = handler.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| {
                        let answer = handler(req);
                        async move { Ok::<_, Infallible>(answer.await) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Loopback {
            url: format!("http://{addr}"),
            addr,
            task,
        }
    }

    /// Stop accepting now (a double stops before it checks what it served).
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.task.abort();
    }
}
