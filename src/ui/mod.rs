//! `rota ui`: the fleet at a glance, as a read-only web page served from the fleet repo and
//! the agents' status notes (no cluster access). `model` is what the page shows (pure, also
//! behind `rota status --fleet` and `rota where`), `load` reads git, `html` renders, `server`
//! serves it over HTTP with the embedded assets; `summary` is what `rota status --fleet` and
//! the page lead with on a big fleet (counts per wave and the exceptions); `view` keeps the
//! built model between requests, `query` reads the page's filters from its URL and
//! `html_size` renders a big fleet (or a filtered view) as summary, exceptions and pages.

pub mod html;
pub mod html_size;
pub mod load;
pub mod metrics;
pub mod model;
pub mod query;
pub mod server;
pub mod summary;
pub mod text;
pub mod view;

use std::net::SocketAddr;
use std::path::PathBuf;

use hyper::StatusCode;

/// What can keep the page from showing.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    #[error("git repository {}: {message}", repo.display())]
    Git { repo: PathBuf, message: String },
    #[error("status notes: {0}")]
    Notes(String),
    #[error("the fleet repo at this commit is not valid:\n{0}")]
    Fleet(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

impl UiError {
    /// The error as a client of the page is told it: the server's own paths left out (where
    /// the repo lives on the server's disk is nobody's business over HTTP, and a map for
    /// whoever probes it). The log line keeps the whole error.
    pub fn public(&self, repo: &std::path::Path) -> String {
        let text = match self {
            UiError::Git { message, .. } => format!("git repository: {message}"),
            other => other.to_string(),
        };
        let here = repo.display().to_string();
        if here.len() > 1 {
            text.replace(&here, "(the fleet repo)")
        } else {
            text
        }
    }

    /// The HTTP status a request that hit this error gets.
    pub fn status(&self) -> StatusCode {
        match self {
            // An unknown revision is the caller's mistake; the rest is ours or the repo's.
            UiError::Git { message, .. } if message.starts_with("revision") => {
                StatusCode::NOT_FOUND
            }
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}
