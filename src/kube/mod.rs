//! The Kubernetes edge: the NodePoolRotation resource (and, with the controller runtime,
//! node and pod access, cordon, eviction and drain, leases, events).

pub mod crd;
pub mod index;
pub mod kubeconfig;
pub mod observe;
pub mod ownership;
pub mod summary;

use crate::errors::{Class, Classified, KubeCall, kube_status};

/// A kube-rs client error: API answers by status, transport failures are transient.
pub fn kube_error(err: &::kube::Error, call: KubeCall) -> Classified {
    match err {
        ::kube::Error::Api(s) => kube_status(s.code, call),
        _ => Classified::new(Class::Transient, "ApiUnreachable"),
    }
}
