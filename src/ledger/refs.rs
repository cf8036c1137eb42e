//! What names and signs a cluster's ledger: its ref (`refs/rota/ledger/<cluster>`) and the
//! payload each append's signature covers. The book, the recorder, the index and the
//! verifier all use them; they live below the four.

/// The prefix of the ledger refs.
pub const LEDGER_PREFIX: &str = "refs/rota/ledger/";

/// The ledger ref of `cluster`.
pub fn ledger_ref(cluster: &str) -> String {
    format!("{LEDGER_PREFIX}{cluster}")
}

/// The first line of what each append's signature covers (see [`signed_payload`]).
pub const PAYLOAD_HEADER: &str = "rota-ledger v1";

/// What an agent signs for one append: the cluster, the parent and the tree. The tree's ID
/// is the hash of every file of the ledger as of that append, so the signature covers the
/// content, and the parent chains it to what came before: an append moved to another ref,
/// or a tree edited afterwards, no longer verifies.
pub fn signed_payload(cluster: &str, parent: Option<&str>, tree: &str) -> String {
    format!(
        "{PAYLOAD_HEADER}\ncluster {cluster}\nparent {}\ntree {tree}\n",
        parent.unwrap_or("none")
    )
}
