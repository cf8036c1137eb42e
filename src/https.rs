//! The one HTTPS connector of rota's outgoing clients (git's protocol v2 probe, the forges'
//! status APIs, chat webhooks, Azure's REST transport): rustls with the ring provider and the
//! system's root certificates, plain HTTP allowed for loopback doubles, HTTP/1.1. Written
//! once so that a change of TLS policy reaches every client.

use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;

pub type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// The connector, giving up on a TCP connection after `connect_timeout` when one is given.
/// Err: the system's root certificates could not be loaded (said so in the message).
pub fn connector(connect_timeout: Option<Duration>) -> Result<Connector, String> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(connect_timeout);
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(rustls::crypto::ring::default_provider())
        .map_err(|e| format!("loading the system's TLS roots: {e}"))?
        .https_or_http()
        .enable_http1()
        .wrap_connector(http))
}

/// Whether a bearer credential may be sent to a URL of `scheme` and `host`: over TLS, or
/// plain HTTP to this machine (a loopback test double), where it never leaves it. Every
/// client that puts a cloud token on a request asks this first.
pub fn bearer_may_go_to(scheme: Option<&str>, host: Option<&str>) -> bool {
    match scheme {
        Some("https") => true,
        Some("http") => host.is_some_and(|h| {
            let h = h.trim_start_matches('[').trim_end_matches(']');
            h.eq_ignore_ascii_case("localhost")
                || h.parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }),
        _ => false,
    }
}
