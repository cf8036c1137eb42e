//! The Kubernetes edge, read side: the NodePoolRotation resource and its CRD (`crd`), the
//! watch-fed cluster index (`index`) with its pods by node (`pods`), what it decodes of a pod
//! (`projection`) and of a node (`node_projection`), what it keeps of each object (`summary`,
//! a node's labels in `node_labels`), one pool
//! read from it for the planner (`observe`), which resources this version owns
//! (`ownership`), the kubeconfig (`kubeconfig`), clients of the simulated fleet's API servers
//! in process (`sim`, with the `sim` feature), Karpenter's objects (`karpenter`), and how a Kubernetes API error is classified
//! ([`kube_error`]). The writes (cordon, eviction, status, events) are
//! `controller::apply`; the Lease is `controller::leader`; an operator's request to a pool
//! (`rota ctl`, the annotation the controller applies) is `operator`.

pub mod crd;
pub mod index;
pub mod karpenter;
pub mod karpenter_import;
pub mod kubeconfig;
pub mod node_labels;
pub mod node_projection;
pub mod observe;
pub mod operator;
pub mod ownership;
pub mod pods;
pub mod projection;
#[cfg(feature = "sim")]
pub mod sim;
pub mod summary;

use rota_core::errors::{Class, Classified, KubeCall, kube_status};

/// A kube-rs client error: API answers by status, transport failures are transient.
pub fn kube_error(err: &::kube::Error, call: KubeCall) -> Classified {
    match err {
        ::kube::Error::Api(s) => kube_status(s.code, call),
        _ => Classified::new(Class::Transient, "ApiUnreachable"),
    }
}
