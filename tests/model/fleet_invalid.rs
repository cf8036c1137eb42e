//! Every fixture under `tests/fixtures/fleet/invalid/` is the valid `valid/base.yaml` with one
//! mistake. Its header says the error expected (`# expect: ...`, optionally `# hint: ...`) and
//! the line that must be blamed carries the marker `# <- error`. The loader must reject the
//! fixture with that message at that file and line.

use std::path::Path;

use rota::fleet::{SourceFile, load_files};

const MARKER: &str = "# <- error";

fn fixture_files(dir: &str) -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn the_base_fixture_is_valid() {
    for path in fixture_files("tests/fixtures/fleet/valid") {
        let bytes = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if let Err(d) = load_files(&[SourceFile { path: name, bytes }]) {
            panic!("{} should be valid:\n{d}", path.display());
        }
    }
}

#[test]
fn every_invalid_fixture_reports_its_error_at_its_line() {
    let files = fixture_files("tests/fixtures/fleet/invalid");
    assert!(files.len() >= 30, "only {} invalid fixtures", files.len());
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let expect = text
            .lines()
            .find_map(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{name}: no `# expect:` header"));
        let hint = text.lines().find_map(|l| l.strip_prefix("# hint: "));
        let line = text
            .lines()
            .position(|l| l.contains(MARKER))
            .unwrap_or_else(|| panic!("{name}: no `{MARKER}` marker")) as u32
            + 1;
        let result = load_files(&[SourceFile {
            path: name.clone(),
            bytes: text.clone().into_bytes(),
        }]);
        let diags = match result {
            Ok(_) => {
                failures.push(format!(
                    "{name}: accepted, expected `{expect}` at line {line}"
                ));
                continue;
            }
            Err(d) => d,
        };
        let found = diags.iter().any(|d| {
            d.file == name
                && d.line == line
                && d.column > 0
                && d.message.contains(expect)
                && hint.is_none_or(|h| d.hint.as_deref().is_some_and(|x| x.contains(h)))
        });
        if !found {
            failures.push(format!(
                "{name}: expected `{expect}` (hint {hint:?}) at line {line}, got:\n{}",
                diags.render_human()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
