//! Where the test peers' Python venv is (moto server, the pinned API descriptions): the
//! peers of every target find it here, including builds without the `aws` feature.

use std::path::PathBuf;

/// The venv that holds the test peers (moto).
pub fn peers_venv() -> PathBuf {
    if let Some(v) = std::env::var_os("ROTA_PEERS_VENV") {
        return PathBuf::from(v);
    }
    // target/<profile>/deps/<test binary>: the venv sits in the target directory, wherever
    // CARGO_TARGET_DIR put it.
    let exe = std::env::current_exe().expect("test binary path");
    let target = exe
        .ancestors()
        .nth(3)
        .expect("test binary lives in <target>/<profile>/deps");
    target.join("peers-venv")
}
