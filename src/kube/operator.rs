//! An operator's request (`rota ctl pause|resume|retry|complete-soak`) written on a pool's
//! NodePoolRotation: the caller's identity asked of the API server (a SelfSubjectReview, as
//! `kubectl auth whoami` does), then the annotation `rota.dev/request=<verb>@<time>@<user>`
//! set, as `kubectl annotate` would. The controller applies it once
//! ([`rota_core::rotate::operator`]). Used by `rota ctl` and by `rota demo`, which runs the
//! retry a stopped pool suggests, against the same API.

use chrono::{DateTime, Utc};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use super::crd::NodePoolRotation;
use rota_core::rotate::operator::{REQUEST_ANNOTATION, REQUEST_NOTE_ANNOTATION, Request, Verb};

/// Sets the request annotation on `pool` of `cluster` (refused when the NodePoolRotation of
/// that name belongs to another cluster: a wrong context); returns the request written.
/// `now` is the request's time (the fleet's clock in the demo).
pub async fn request(
    client: kube::Client,
    cluster: &str,
    pool: &str,
    verb: Verb,
    note: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Request, String> {
    let api: Api<NodePoolRotation> = Api::all(client);
    let npr = api
        .get_opt(pool)
        .await
        .map_err(|e| format!("reading NodePoolRotation {pool}: {e}"))?
        .ok_or_else(|| {
            format!(
                "no NodePoolRotation {pool:?} in cluster {cluster:?} (kubectl get nodepoolrotations lists them)"
            )
        })?;
    if npr.spec.cluster != cluster {
        return Err(format!(
            "NodePoolRotation {pool:?} belongs to cluster {:?}, not {cluster:?}: wrong --context?",
            npr.spec.cluster
        ));
    }
    let who = whoami(&api).await?;
    // Whole seconds, so that the value reads well in `kubectl get -o yaml`; the value is the
    // request's identity, so two requests in the same second by the same person are one.
    let r = Request::new(verb, now, Some(&who)).with_note(note);
    // The note is replaced (or removed) with the request: it never outlives the request it
    // was written for.
    let patch = serde_json::json!({"metadata": {"annotations": {
        REQUEST_ANNOTATION: r.id,
        REQUEST_NOTE_ANNOTATION: r.note,
    }}});
    api.patch(pool, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| format!("annotating NodePoolRotation {pool}: {e}"))?;
    Ok(r)
}

/// The caller's Kubernetes user name, as the API server authenticates it.
async fn whoami(api: &Api<NodePoolRotation>) -> Result<String, String> {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let reviews: Api<SelfSubjectReview> = Api::all(api.clone().into_client());
    let review = reviews
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .map_err(|e| {
            format!(
                "asking the API server who you are (SelfSubjectReview, Kubernetes 1.28 or later; `kubectl auth whoami` does the same): {e}"
            )
        })?;
    review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| {
            "the API server did not say who you are (SelfSubjectReview without a user name)"
                .to_string()
        })
}
