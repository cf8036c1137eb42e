//! The simulated Kubernetes API server: one `ApiServer` per cluster, over a `Store`. It is a
//! tower `Service` (so a kube-rs client built on it, `rota::kube::sim`, talks to it in process,
//! through kube-rs' real request and response code) and is served over loopback HTTP for kubectl
//! (`serve_http`).
//!
//! Paths: discovery (`/version`, `/api`, `/apis`, `/api/v1`, `/apis/<g>[/<v>]`), then
//! `/api/v1[/namespaces/<ns>]/<plural>[/<name>[/<sub>]]` and the same under
//! `/apis/<g>/<v>`. Verbs: list and watch (`?watch=true`), create, get, update (PUT), patch
//! (JSON, merge, strategic merge, apply), delete, deletecollection; subresources `status` and
//! `pods/eviction`. Errors are `metav1.Status` bodies with the Kubernetes codes and reasons.

pub mod admission;
pub mod discovery;
pub mod faults;
mod http;
pub mod patch;
mod server;
mod table;

pub use self::http::{HttpServer, serve_http, serve_http_logged};
pub use self::server::{ApiServer, Body};
