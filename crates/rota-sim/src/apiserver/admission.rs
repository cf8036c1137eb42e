//! Who makes a request, and the admission rota relies on, in the simulated API server.
//!
//! **Authentication.** A bearer token names a user ([`Users`]); a request without one comes
//! from the simulation itself and is `system:admin` (group `system:masters`), as a loopback
//! admin kubeconfig would be; an unknown token is `401 Unauthorized`. An admin may act as
//! someone else with the impersonation headers (`Impersonate-User`, `Impersonate-Group`:
//! `kubectl --as`, a kubeconfig's `as:`), as a real API server lets those with the
//! `impersonate` verb; anyone else gets `403`. (kubectl sends no bearer token over plain
//! http, the sim's transport; it does send impersonation headers, so tests name users that
//! way.) `POST /apis/authentication.k8s.io/v1/selfsubjectreviews` answers who the caller is
//! (`kubectl auth whoami`, `rota ctl`).
//!
//! **Admission.** The ValidatingAdmissionPolicy rota ships
//! (`deploy/manifests/request-identity.yaml`), modelled natively and always on, as in a
//! cluster where rota is installed: a write that sets or changes a NodePoolRotation's
//! `rota.dev/request` (or its `rota.dev/request-note`) must name its writer,
//! `<verb>@<time>@<username>`, with `username` the authenticated user. The controller then
//! records an identity the API server vouched for, not a name anyone could type.
//! `tests/processes/ctl_sim.rs` runs the same cases through this model and through the shipped policy's
//! CEL, so the two cannot drift apart.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::super::store::{ApiError, ResourceType};

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub username: String,
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The simulation's own components (in-process clients, no token).
    pub fn admin() -> Self {
        UserInfo {
            username: "system:admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        }
    }
}

/// Bearer tokens and the users they authenticate.
#[derive(Debug, Clone, Default)]
pub struct Users(HashMap<String, UserInfo>);

impl Users {
    /// `token` authenticates `username` (in `groups`, plus `system:authenticated`).
    pub fn with(mut self, token: &str, username: &str, groups: &[&str]) -> Self {
        let mut groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        groups.push("system:authenticated".into());
        self.0.insert(
            token.to_string(),
            UserInfo {
                username: username.to_string(),
                groups,
            },
        );
        self
    }

    /// The user of a request's `Authorization` header value (if any). The sim's kubeconfig
    /// token `rota-sim` is an admin's, as before users existed.
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<UserInfo, ApiError> {
        let Some(header) = authorization else {
            return Ok(UserInfo::admin());
        };
        let token = header.strip_prefix("Bearer ").unwrap_or("").trim();
        if let Some(u) = self.0.get(token) {
            return Ok(u.clone());
        }
        if token == "rota-sim" {
            return Ok(UserInfo::admin());
        }
        Err(ApiError::new(401, "Unauthorized", "Unauthorized"))
    }

    /// The user a request acts as: the authenticated one, or the one it impersonates
    /// (`Impersonate-User`, with `Impersonate-Group`s), which only an admin may.
    pub fn user_of(&self, headers: &http::HeaderMap) -> Result<UserInfo, ApiError> {
        let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
        let user = self.authenticate(header("authorization"))?;
        let Some(as_user) = header("impersonate-user") else {
            return Ok(user);
        };
        if !user.groups.iter().any(|g| g == "system:masters") {
            return Err(ApiError::new(
                403,
                "Forbidden",
                format!(
                    "users \"{as_user}\" is forbidden: User \"{}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope",
                    user.username
                ),
            ));
        }
        let mut groups: Vec<String> = headers
            .get_all("impersonate-group")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_string))
            .collect();
        groups.push("system:authenticated".into());
        Ok(UserInfo {
            username: as_user.to_string(),
            groups,
        })
    }
}

/// The `SelfSubjectReview` answer for `user`.
pub fn self_subject_review(user: &UserInfo) -> Value {
    json!({
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": null},
        "status": {"userInfo": {"username": user.username, "groups": user.groups}}
    })
}

/// The annotations the policy guards.
pub const REQUEST: &str = "rota.dev/request";
pub const REQUEST_NOTE: &str = "rota.dev/request-note";
/// The shape of the request's time, as the policy's regex has it (`0`: any digit).
const STAMP: &str = "0000-00-00T00:00:00Z";
/// The shipped policy's (and binding's) name.
pub const POLICY: &str = "rota-request-identity";

fn annotation<'v>(o: Option<&'v Value>, key: &str) -> &'v str {
    o.and_then(|o| o.pointer("/metadata/annotations"))
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The shipped policy's rule: `Ok` when `new` may replace `old` (None: a create) for `user`.
/// Written as the CEL is: no request and no note, or both unchanged, or the request is
/// `<verb>@<RFC 3339 seconds, Z>@<username>` (a note never stands alone).
pub fn request_identity(old: Option<&Value>, new: &Value, username: &str) -> Result<(), String> {
    let req = annotation(Some(new), REQUEST);
    let note = annotation(Some(new), REQUEST_NOTE);
    let unchanged = req == annotation(old, REQUEST) && note == annotation(old, REQUEST_NOTE);
    if (req.is_empty() && note.is_empty()) || unchanged {
        return Ok(());
    }
    let chars = |s: &str| s.chars().count();
    let named = ["pause", "resume", "retry", "complete-soak"]
        .iter()
        .any(|v| {
            req.starts_with(&format!("{v}@"))
                && chars(req) == chars(v) + 22 + chars(username)
                && req.ends_with(&format!("@{username}"))
        });
    // ^[a-z-]+@YYYY-MM-DDTHH:MM:SSZ@
    let stamped = req.split_once('@').is_some_and(|(verb, rest)| {
        !verb.is_empty()
            && verb.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
            && rest.len() > 21
            && rest.is_char_boundary(21)
            && rest.as_bytes()[20] == b'@'
            && rest
                .bytes()
                .take(20)
                .zip(STAMP.bytes())
                .all(|(b, p)| match p {
                    b'0' => b.is_ascii_digit(),
                    p => b == p,
                })
    });
    if named && stamped {
        Ok(())
    } else {
        Err(format!(
            "rota.dev/request must be <verb>@<time>@{username} (your own Kubernetes user name): use rota ctl"
        ))
    }
}

/// Admission for a write of `new` over `old` by `user` to a resource of type `rt`.
pub fn admit(
    rt: &ResourceType,
    old: Option<&Value>,
    new: &Value,
    user: &UserInfo,
) -> Result<(), ApiError> {
    if rt.group != "rota.dev" || rt.plural != "nodepoolrotations" {
        return Ok(());
    }
    request_identity(old, new, &user.username).map_err(|why| {
        ApiError::new(
            403,
            "Forbidden",
            format!(
                "{} {:?} is forbidden: ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: {why}",
                rt.qualified(),
                new.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("")
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npr(request: Option<&str>, note: Option<&str>) -> Value {
        let mut a = serde_json::Map::new();
        if let Some(r) = request {
            a.insert(REQUEST.into(), json!(r));
        }
        if let Some(n) = note {
            a.insert(REQUEST_NOTE.into(), json!(n));
        }
        json!({"metadata": {"name": "general", "annotations": a}})
    }

    #[test]
    fn only_your_own_name_may_be_written_into_a_request() {
        let ana = "pause@2026-11-24T06:00:00Z@ana@example.com";
        let ok =
            |old: Option<&Value>, new: &Value, user: &str| request_identity(old, new, user).is_ok();
        assert!(ok(None, &npr(Some(ana), None), "ana@example.com"));
        assert!(!ok(None, &npr(Some(ana), None), "mallory"));
        // Someone else's name after ours, or ours after someone else's.
        assert!(!ok(
            None,
            &npr(Some("pause@2026-11-24T06:00:00Z@mallory@ana"), None),
            "ana"
        ));
        assert!(!ok(
            None,
            &npr(Some("pause@2026-11-24T06:00:00Z"), None),
            "ana"
        ));
        assert!(!ok(None, &npr(Some("pause@yesterday@ana"), None), "ana"));
        let old = npr(Some(ana), None);
        // Unchanged (the agent's apply, a status write), or removed (the controller).
        assert!(ok(
            Some(&old),
            &npr(Some(ana), None),
            "system:serviceaccount:rota-system:rota"
        ));
        assert!(ok(
            Some(&old),
            &npr(None, None),
            "system:serviceaccount:rota-system:rota"
        ));
        // A note attached to someone else's request.
        assert!(!ok(Some(&old), &npr(Some(ana), Some("it was bob")), "bob"));
        assert!(ok(
            Some(&old),
            &npr(Some(ana), Some("oncall")),
            "ana@example.com"
        ));
        // A note without a request, waiting for the next one.
        assert!(!ok(None, &npr(None, Some("it was bob")), "bob"));
    }

    #[test]
    fn tokens_name_users_and_no_token_is_the_simulation() {
        let users = Users::default().with("t-ana", "ana", &["oncall"]);
        assert_eq!(
            users.authenticate(Some("Bearer t-ana")).unwrap().username,
            "ana"
        );
        assert_eq!(users.authenticate(None).unwrap().username, "system:admin");
        assert_eq!(
            users
                .authenticate(Some("Bearer rota-sim"))
                .unwrap()
                .username,
            "system:admin"
        );
        assert_eq!(
            users.authenticate(Some("Bearer nope")).unwrap_err().code,
            401
        );
        let mut h = http::HeaderMap::new();
        h.insert("impersonate-user", "bob".parse().unwrap());
        assert_eq!(
            users.user_of(&h).unwrap().username,
            "bob",
            "the admin acts as bob"
        );
        h.insert("authorization", "Bearer t-ana".parse().unwrap());
        assert_eq!(users.user_of(&h).unwrap_err().code, 403, "ana may not");
    }
}
