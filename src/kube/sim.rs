//! kube-rs clients for the simulated fleet's API servers, in process: the client talks to the
//! `ApiServer` as a tower service, through kube-rs' real request and response code, without a
//! socket. Here rather than in `rota-sim`, so that the simulated fleet does not depend on kube
//! or k8s-openapi (it speaks JSON over HTTP types, as a real API server does); the demo's
//! `LocalFleet`, the tests and the benches build their clients with these.

use rota_sim::apiserver::ApiServer;
use rota_sim::store::Store;

/// A client of `server`, in process. Needs a tokio runtime.
pub fn server_client(server: ApiServer) -> kube::Client {
    kube::Client::new(server, "default")
}

/// A client of a new API server over `store` (one cluster's objects).
pub fn client(store: Store) -> kube::Client {
    server_client(ApiServer::new(store))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Api, ListParams};

    #[tokio::test]
    async fn a_client_lists_what_the_store_holds() {
        let store = Store::new();
        let names: Vec<String> = Api::<Namespace>::all(client(store))
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect();
        assert!(names.iter().any(|n| n == "kube-system"), "{names:?}");
    }
}
