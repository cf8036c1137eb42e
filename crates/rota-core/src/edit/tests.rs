//! The editor on the example fleet repo: each edit changes exactly its bytes and no other, so
//! that a change to how rota writes the fleet repo is a reviewed diff of these texts.

use super::*;
use crate::fleet::model::{AwsImages, CloudImages};

const FLEET: &str = include_str!("../../../../examples/fleet-repo/fleet.yaml");
const CLUSTER: &str = include_str!("../../../../examples/fleet-repo/clusters/aws/prod-use1.yaml");

/// Every YAML file of the example fleet repo, by its path in the repo (what a commit holds).
fn files() -> Vec<SourceFile> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fleet-repo");
    let mut out = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                let rel = path
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.push(SourceFile::new(
                    rel,
                    std::fs::read_to_string(&path).unwrap(),
                ));
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    assert!(
        out.iter()
            .any(|f| f.path == "fleet.yaml" && f.bytes == FLEET.as_bytes())
    );
    out
}

fn change(channel: &str, from: &str, to: &str) -> PinChange {
    PinChange {
        channel: channel.into(),
        from: from.into(),
        to: to.into(),
    }
}

fn text_of<'a>(editor: &'a FleetEditor, path: &str) -> &'a [u8] {
    &editor
        .files()
        .iter()
        .find(|f| f.path == path)
        .expect("the file is there")
        .bytes
}

#[test]
fn a_promotion_moves_its_pins_only_and_its_revert_gives_every_byte_back() {
    let mut editor = FleetEditor::new(&files());
    let path = editor
        .move_pins("main", &[change("general", "2026.11.1", "2026.11.2")])
        .unwrap();
    assert_eq!(path, "fleet.yaml");
    let promoted = FLEET.replace(
        "      images: {general: \"2026.11.1\", gpu: \"2026.10.3\"}\n  rollout:",
        "      images: {general: \"2026.11.2\", gpu: \"2026.10.3\"}\n  rollout:",
    );
    assert_ne!(
        promoted, FLEET,
        "the example's main wave pins general 2026.11.1"
    );
    assert_eq!(editor.edited(), Some(("fleet.yaml", promoted.as_str())));
    assert_eq!(
        text_of(&editor, "clusters/aws/prod-use1.yaml"),
        CLUSTER.as_bytes()
    );
    let fleet = editor.load().expect("the promoted fleet loads");
    let main = fleet.waves().iter().find(|w| w.name == "main").unwrap();
    assert_eq!(main.images["general"], "2026.11.2");
    // The revert is the same edit the other way: the file is byte for byte the original.
    editor
        .move_pins("main", &[change("general", "2026.11.2", "2026.11.1")])
        .unwrap();
    assert_eq!(text_of(&editor, "fleet.yaml"), FLEET.as_bytes());
}

#[test]
fn a_discovered_version_is_added_and_pinned_on_the_first_wave_with_nothing_else_moved() {
    let released: chrono::DateTime<chrono::Utc> = "2026-11-25T08:00:00Z".parse().unwrap();
    let p = Proposal {
        channel: "gpu".into(),
        version: "2026.11.9".into(),
        released,
        images: CloudImages {
            released: Some(released),
            aws: Some(AwsImages::One("ami-0123456789abcdef0".into())),
            gcp: Some("projects/acme-images/global/images/gpu-2026-11-9".into()),
            ..Default::default()
        },
        builds: vec!["gpu-2026-11-9".into()],
        bake_skipped: None,
    };
    let mut editor = FleetEditor::new(&files());
    assert_eq!(editor.add_version(&p).unwrap(), "fleet.yaml");
    editor
        .move_pins("canary", &[change("gpu", "2026.11.1", "2026.11.9")])
        .unwrap();
    let expected = FLEET
        .replace(
            "          gcp: projects/acme-images/global/images/gpu-2026-11-1\n",
            "          gcp: projects/acme-images/global/images/gpu-2026-11-1\n        \
             \"2026.11.9\":\n          released: \"2026-11-25T08:00:00Z\"\n          \
             aws: ami-0123456789abcdef0\n          \
             gcp: projects/acme-images/global/images/gpu-2026-11-9\n",
        )
        .replace(
            "images: {general: \"2026.11.2\", gpu: \"2026.11.1\"}",
            "images: {general: \"2026.11.2\", gpu: \"2026.11.9\"}",
        );
    // Both places are in the example (else the expectation would be the file unchanged).
    assert_eq!(expected.lines().count(), FLEET.lines().count() + 4);
    assert!(!expected.contains("gpu: \"2026.11.1\"}"), "{expected}");
    assert_eq!(editor.edited(), Some(("fleet.yaml", expected.as_str())));
    assert_eq!(
        text_of(&editor, "clusters/aws/prod-use1.yaml"),
        CLUSTER.as_bytes()
    );
    let fleet = editor.load().expect("the edited fleet loads");
    assert_eq!(fleet.waves()[0].images["gpu"], "2026.11.9");
    assert_eq!(fleet.spec.images["gpu"].versions["2026.11.9"], p.images);
}

#[test]
fn a_refused_edit_leaves_every_file_as_it_was() {
    let mut editor = FleetEditor::new(&files());
    // Someone moved the pin since: the edit names what it expected and changes nothing.
    let e = editor
        .move_pins("main", &[change("general", "2026.10.1", "2026.11.2")])
        .unwrap_err();
    assert!(
        e.contains("expected the pin general = \"2026.10.1\""),
        "{e}"
    );
    let e = editor
        .move_pins("main", &[change("arm", "1", "2")])
        .unwrap_err();
    assert!(e.contains("does not pin channel arm"), "{e}");
    assert_eq!(editor.edited(), None);
    assert_eq!(text_of(&editor, "fleet.yaml"), FLEET.as_bytes());
    assert_eq!(
        text_of(&editor, "clusters/aws/prod-use1.yaml"),
        CLUSTER.as_bytes()
    );
}
