//! The wire under the Azure SDK's HTTP pipeline: rota's own hyper + rustls (ring) client, and
//! the policy that puts the bearer token on each request.
//!
//! `azure_core` is built without its default `reqwest` transport (which would bring a second
//! HTTP stack and aws-lc into the build); [`HyperTransport`] implements its `HttpClient` trait
//! instead, for ARM calls and for the token requests `azure_identity` makes.
//!
//! [`BearerPolicy`] replaces the SDK's bearer-token policy for one reason: that policy refuses
//! any `http://` URL, and the test double of ARM serves plain HTTP on loopback. This one
//! refuses `http://` too, except to a loopback address, where the token never leaves the
//! machine. Tokens come from the credential, which caches and refreshes them.

use std::sync::Arc;

use async_trait::async_trait;
use azure_core::credentials::TokenCredential;
use azure_core::error::ErrorKind;
use azure_core::http::headers::{HeaderName, HeaderValue, Headers};
use azure_core::http::policies::{Policy, PolicyResult};
use azure_core::http::{AsyncRawResponse, Context, HttpClient, Request, StatusCode, Url};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// `azure_core::http::HttpClient` over hyper.
#[derive(Clone)]
pub struct HyperTransport {
    client: Client<Https, Full<Bytes>>,
}

impl std::fmt::Debug for HyperTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HyperTransport")
    }
}

impl HyperTransport {
    /// HTTPS with the system's root certificates (and plain HTTP for loopback doubles).
    pub fn new() -> Result<Self, String> {
        let connector = crate::https::connector(None)?;
        Ok(HyperTransport {
            client: Client::builder(TokioExecutor::new()).build(connector),
        })
    }
}

#[async_trait]
impl HttpClient for HyperTransport {
    async fn execute_request(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
        let body = match request.body() {
            azure_core::http::Body::Bytes(b) => b.clone(),
            azure_core::http::Body::SeekableStream(_) => {
                return Err(azure_core::Error::with_message(
                    ErrorKind::Other,
                    "streamed request bodies are not used by rota's Azure client",
                ));
            }
        };
        let mut builder = hyper::Request::builder()
            .method(request.method().as_str())
            .uri(request.url().as_str());
        for (name, value) in request.headers().iter() {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let req = builder
            .body(Full::new(body))
            .map_err(|e| azure_core::Error::new(ErrorKind::DataConversion, e))?;
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| azure_core::Error::new(ErrorKind::Io, e))?;
        let status = StatusCode::from(resp.status().as_u16());
        let mut headers = Headers::new();
        for (name, value) in resp.headers() {
            if let Ok(v) = value.to_str() {
                headers.insert(
                    HeaderName::from(name.as_str().to_string()),
                    HeaderValue::from(v.to_string()),
                );
            }
        }
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| azure_core::Error::new(ErrorKind::Io, e))?
            .to_bytes();
        Ok(AsyncRawResponse::from_bytes(status, headers, bytes))
    }
}

/// Whether a bearer token may be sent to `url`: over TLS, or to this machine.
pub fn token_may_go_to(url: &Url) -> bool {
    crate::https::bearer_may_go_to(Some(url.scheme()), url.host_str())
}

/// Puts `Authorization: Bearer <token>` on every request, the token for `scope` from the
/// credential (which caches it until shortly before it expires).
#[derive(Debug)]
pub struct BearerPolicy {
    credential: Arc<dyn TokenCredential>,
    scope: String,
}

impl BearerPolicy {
    pub fn new(credential: Arc<dyn TokenCredential>, scope: impl Into<String>) -> Self {
        BearerPolicy {
            credential,
            scope: scope.into(),
        }
    }
}

#[async_trait]
impl Policy for BearerPolicy {
    async fn send(
        &self,
        ctx: &Context,
        request: &mut Request,
        next: &[Arc<dyn Policy>],
    ) -> PolicyResult {
        if !token_may_go_to(request.url()) {
            return Err(azure_core::Error::with_message(
                ErrorKind::Other,
                format!(
                    "refusing to send a bearer token to {} (not HTTPS, not loopback)",
                    request.url()
                ),
            ));
        }
        let token = self
            .credential
            .get_token(&[self.scope.as_str()], None)
            .await?;
        request.insert_header("authorization", format!("Bearer {}", token.token.secret()));
        next[0].send(ctx, request, &next[1..]).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_go_over_tls_or_to_loopback_only() {
        let ok = [
            "https://management.azure.com/x",
            "http://127.0.0.1:8080/x",
            "http://[::1]:1/x",
            "http://localhost:9/x",
        ];
        for u in ok {
            assert!(token_may_go_to(&Url::parse(u).unwrap()), "{u}");
        }
        let refused = [
            "http://management.azure.com/x",
            "http://10.0.0.1/x",
            "ftp://127.0.0.1/x",
        ];
        for u in refused {
            assert!(!token_may_go_to(&Url::parse(u).unwrap()), "{u}");
        }
    }
}
