//! The example fleet repo (`examples/fleet-repo`) copied into a test's own directory, for
//! tests that add to a fleet as a user would (`rota clusters import` writing a cluster file
//! beside the others) and then validate the whole repo.

use std::path::Path;

/// Copy every file of `examples/fleet-repo` under `dir`, keeping its folders.
pub fn copy_to(dir: &Path) {
    copy(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo"),
        dir,
    );
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}
