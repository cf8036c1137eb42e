//! Reading the files of a fleet repo, from a directory or from a git revision (straight from the
//! object database, no checkout), with the limits that keep a hostile repo from costing more
//! than a bounded amount of time and memory; and loading a [`Fleet`] from either.
//!
//! Both readers produce the same list of [`SourceFile`]s (path relative to the repo root, with
//! `/`), sorted by path, so everything after this point is identical for both: the core's
//! `fleet::load_read` parses and validates them.

use std::path::{Component, Path, PathBuf};

use rota_core::fleet::diagnostics::{Diagnostic, Diagnostics, Location};
use rota_core::fleet::{Fleet, SourceFile, load_read};

/// Largest YAML file read; a real fleet file is a few KiB.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Largest sum of YAML files read.
pub const MAX_TOTAL_BYTES: u64 = 64 * 1024 * 1024;
/// Most YAML files read.
pub const MAX_FILES: usize = 20_000;
/// Deepest folder nesting walked.
const MAX_DIR_DEPTH: usize = 16;
/// Most git tree entries (files, folders, anything) visited in one load of a revision. A
/// fleet repo has hundreds; a tree that reuses one subtree at every level has as many as
/// (fan-out)^(depth) from a few KiB of objects, and must stop here rather than spin.
pub const MAX_TREE_ENTRIES: usize = 100_000;
/// Largest symbolic link read from a git tree. Git stores a link's target path as a blob
/// and nothing bounds it: a 200 MiB "path" packs to under 1 MiB. A real target is a short
/// relative path (PATH_MAX is 4096).
pub const MAX_LINK_BYTES: u64 = 4096;
/// Most times one git tree object (the same folder content) is walked in one load: a real
/// repo repeats a folder a few times (identical overlays); a tree bomb repeats it at will.
pub const MAX_SUBTREE_REPEATS: u32 = 256;

/// Load the fleet repo in folder `path` (recursively, skipping hidden entries).
pub fn load_dir(path: impl AsRef<Path>) -> Result<Fleet, Diagnostics> {
    let (files, diags) = read_dir(path.as_ref())?;
    load_read(&files, diags)
}

/// Load the fleet repo at revision `rev` of the git repository at `repo_path`.
pub fn load_git(repo_path: impl AsRef<Path>, rev: &str) -> Result<Fleet, Diagnostics> {
    load_git_at(repo_path, rev, None)
}

/// Like [`load_git`], with the fleet repo in folder `subdir` of the git tree; file paths in
/// diagnostics are relative to that folder. [`Fleet::commit`] is the commit read.
pub fn load_git_at(
    repo_path: impl AsRef<Path>,
    rev: &str,
    subdir: Option<&Path>,
) -> Result<Fleet, Diagnostics> {
    let (files, diags, commit) = read_git(repo_path.as_ref(), rev, subdir)?;
    Ok(load_read(&files, diags)?.at_commit(commit))
}

fn is_yaml(name: &str) -> bool {
    name.ends_with(".yaml") || name.ends_with(".yml")
}

fn whole_file(file: &str, message: impl Into<String>) -> Diagnostic {
    Diagnostic::new(
        &Location {
            file: file.to_string(),
            line: 0,
            column: 0,
        },
        "",
        message,
    )
}

fn too_large(file: &str, size: u64) -> Diagnostic {
    whole_file(
        file,
        format!("file is {size} bytes, larger than the limit of {MAX_FILE_BYTES} bytes"),
    )
    .with_hint("split it into several files")
}

/// Budget shared by one load.
#[derive(Default)]
struct Budget {
    files: usize,
    bytes: u64,
    /// Git tree entries visited, and walks per tree object (reading from git only).
    entries: usize,
    subtrees: std::collections::HashMap<git2::Oid, u32>,
}

impl Budget {
    fn take(&mut self, file: &str, size: u64) -> Result<(), Diagnostic> {
        if size > MAX_FILE_BYTES {
            return Err(too_large(file, size));
        }
        self.files += 1;
        self.bytes += size;
        if self.files > MAX_FILES {
            return Err(whole_file(
                file,
                format!("more than {MAX_FILES} YAML files in the repo"),
            ));
        }
        if self.bytes > MAX_TOTAL_BYTES {
            return Err(whole_file(
                file,
                format!("YAML files add up to more than {MAX_TOTAL_BYTES} bytes"),
            ));
        }
        Ok(())
    }
}

/// Read every `*.yaml`/`*.yml` under `root`, skipping hidden entries. Symlinks are followed
/// only when they stay inside the repo. Errors about single files are collected; an
/// unreadable root is an `Err` with one diagnostic.
pub fn read_dir(root: &Path) -> Result<(Vec<SourceFile>, Diagnostics), Diagnostics> {
    let canonical_root = root.canonicalize().map_err(|e| {
        Diagnostics::from(whole_file(
            &root.display().to_string(),
            format!("cannot read the fleet repo: {e}"),
        ))
    })?;
    if !canonical_root.is_dir() {
        return Err(Diagnostics::from(whole_file(
            &root.display().to_string(),
            "not a directory",
        )));
    }
    let mut files = Vec::new();
    let mut diags = Diagnostics::new();
    let mut budget = Budget::default();
    walk(
        &canonical_root,
        &canonical_root,
        "",
        0,
        &mut files,
        &mut diags,
        &mut budget,
    );
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((files, diags))
}

fn walk(
    root: &Path,
    dir: &Path,
    rel: &str,
    depth: usize,
    files: &mut Vec<SourceFile>,
    diags: &mut Diagnostics,
    budget: &mut Budget,
) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            diags.push(whole_file(rel, format!("cannot read folder: {e}")));
            return;
        }
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let rel_path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let path = entry.path();
        let Ok(ft) = entry.file_type() else { continue };
        let mut target = path.clone();
        if ft.is_symlink() {
            match path.canonicalize() {
                Ok(t) if t.starts_with(root) => target = t,
                Ok(_) | Err(_) => {
                    // Only YAML files and folders matter; anything else is not ours to judge.
                    if is_yaml(&name) || path.is_dir() || path.canonicalize().is_err() {
                        diags.push(
                            whole_file(
                                &rel_path,
                                "symbolic link points outside the fleet repo (or nowhere)",
                            )
                            .with_hint("rota reads only files inside the repo"),
                        );
                    }
                    continue;
                }
            }
        }
        let Ok(meta) = std::fs::metadata(&target) else {
            continue;
        };
        if meta.is_dir() {
            if depth + 1 > MAX_DIR_DEPTH {
                diags.push(whole_file(
                    &rel_path,
                    format!("folders nested deeper than {MAX_DIR_DEPTH} levels are not read"),
                ));
                continue;
            }
            // A symlinked folder inside the repo would be read twice (or loop): skip it.
            if ft.is_symlink() {
                continue;
            }
            walk(root, &target, &rel_path, depth + 1, files, diags, budget);
        } else if meta.is_file() && is_yaml(&name) {
            if let Err(d) = budget.take(&rel_path, meta.len()) {
                diags.push(d);
                continue;
            }
            // Read at most the cap plus one byte: the file may have grown since `metadata`.
            match read_capped(&target) {
                Ok(Some(bytes)) => files.push(SourceFile {
                    path: rel_path,
                    bytes,
                }),
                Ok(None) => diags.push(too_large(&rel_path, MAX_FILE_BYTES + 1)),
                Err(e) => diags.push(whole_file(&rel_path, format!("cannot read file: {e}"))),
            }
        }
    }
}

fn read_capped(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= MAX_FILE_BYTES).then_some(bytes))
}

/// Read every YAML file of the tree of `rev` (any revision git understands: a branch, a tag,
/// a commit ID, `HEAD~2`) in the repository at `repo_path`, from the object database.
/// Returns the files, per-file problems, and the commit ID the revision names.
/// With `subdir`, only that folder of the tree is the fleet repo (the contract's `--path`).
pub fn read_git(
    repo_path: &Path,
    rev: &str,
    subdir: Option<&Path>,
) -> Result<(Vec<SourceFile>, Diagnostics, String), Diagnostics> {
    let fail = |msg: String| Diagnostics::from(whole_file(&repo_path.display().to_string(), msg));
    let repo = git2::Repository::open(repo_path)
        .map_err(|e| fail(format!("not a git repository: {}", e.message())))?;
    let object = repo
        .revparse_single(rev)
        .map_err(|e| fail(format!("unknown revision {rev:?}: {}", e.message())))?;
    let commit = object
        .peel_to_commit()
        .map_err(|e| fail(format!("revision {rev:?} is not a commit: {}", e.message())))?;
    let mut tree = commit
        .tree()
        .map_err(|e| fail(format!("cannot read the tree of {rev:?}: {}", e.message())))?;
    if let Some(dir) = subdir.filter(|d| !d.as_os_str().is_empty() && *d != Path::new(".")) {
        tree = tree
            .get_path(dir)
            .and_then(|e| repo.find_tree(e.id()))
            .map_err(|_| fail(format!("revision {rev:?} has no folder {}", dir.display())))?;
    }
    let odb = repo
        .odb()
        .map_err(|e| fail(format!("cannot open the object database: {}", e.message())))?;
    let mut walk = TreeWalk {
        repo: &repo,
        odb: &odb,
        root: &tree,
        files: Vec::new(),
        diags: Diagnostics::new(),
        budget: Budget::default(),
    };
    // Over a budget the whole revision is refused: half a fleet must never be acted on.
    walk.walk(&tree, "", 0).map_err(Diagnostics::from)?;
    let TreeWalk {
        mut files, diags, ..
    } = walk;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((files, diags, commit.id().to_string()))
}

/// One walk of a revision's tree: every YAML file read, within the budgets, and every file
/// that cannot be read named in `diags`.
struct TreeWalk<'r> {
    repo: &'r git2::Repository,
    odb: &'r git2::Odb<'r>,
    root: &'r git2::Tree<'r>,
    files: Vec<SourceFile>,
    diags: Diagnostics,
    budget: Budget,
}

impl TreeWalk<'_> {
    /// Walks `tree` (at `rel`, `depth` folders down). Over a budget the whole revision is
    /// refused (`Err`); a file that cannot be read is a diagnostic and the walk goes on.
    fn walk(&mut self, tree: &git2::Tree<'_>, rel: &str, depth: usize) -> Result<(), Diagnostic> {
        for entry in tree.iter() {
            self.budget.entries += 1;
            if self.budget.entries > MAX_TREE_ENTRIES {
                let at = format!("{rel}/{}", String::from_utf8_lossy(entry.name_bytes()));
                return Err(whole_file(
                    at.trim_start_matches('/'),
                    format!("the git tree has more than {MAX_TREE_ENTRIES} entries: not read"),
                )
                .with_hint(
                    "a fleet repo has hundreds of files; is this tree built to reuse folders?",
                ));
            }
            let name = String::from_utf8_lossy(entry.name_bytes()).into_owned();
            if name.starts_with('.') {
                continue;
            }
            let rel_path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if !rota_core::sanitize::is_clean_line(&name)
                && (is_yaml(&name) || entry.kind() == Some(git2::ObjectType::Tree))
            {
                // A path is printed in every diagnostic: it must not drive the terminal.
                self.diags.push(
                    whole_file(
                        &rota_core::sanitize::line(&rel_path),
                        "the name holds control characters: not read",
                    )
                    .with_hint("rename it"),
                );
                continue;
            }
            match entry.kind() {
                Some(git2::ObjectType::Tree) => self.folder(&entry, &rel_path, depth)?,
                Some(git2::ObjectType::Blob) if is_yaml(&name) => {
                    self.yaml_file(&entry, rel, rel_path)
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// A folder: walked unless too deep; a tree reused too often refuses the revision.
    fn folder(
        &mut self,
        entry: &git2::TreeEntry<'_>,
        rel_path: &str,
        depth: usize,
    ) -> Result<(), Diagnostic> {
        if depth + 1 > MAX_DIR_DEPTH {
            self.diags.push(whole_file(
                rel_path,
                format!("folders nested deeper than {MAX_DIR_DEPTH} levels are not read"),
            ));
            return Ok(());
        }
        let walks = self.budget.subtrees.entry(entry.id()).or_default();
        *walks += 1;
        if *walks > MAX_SUBTREE_REPEATS {
            // Short: it goes into a 140-character status after a long path.
            return Err(whole_file(
                rel_path,
                format!("a tree repeated over {MAX_SUBTREE_REPEATS} times: not read"),
            )
            .with_hint(format!(
                "git tree {} is reused at every level: a tree bomb",
                &entry.id().to_string()[..12]
            )));
        }
        match self.repo.find_tree(entry.id()) {
            Ok(sub) => self.walk(&sub, rel_path, depth + 1),
            Err(_) => Ok(()),
        }
    }

    /// A YAML file (or a symlink to one inside the tree), read within the byte budget.
    fn yaml_file(&mut self, entry: &git2::TreeEntry<'_>, rel: &str, rel_path: String) {
        let mut oid = entry.id();
        if entry.filemode() == 0o120000 {
            match self.link_target(oid, rel, &rel_path) {
                Some(target) => oid = target,
                None => return,
            }
        }
        // The header gives the size without inflating the object.
        let size = match self.odb.read_header(oid) {
            Ok((size, _)) => size as u64,
            Err(e) => {
                self.diags.push(whole_file(
                    &rel_path,
                    format!("cannot read blob: {}", e.message()),
                ));
                return;
            }
        };
        if let Err(d) = self.budget.take(&rel_path, size) {
            self.diags.push(d);
            return;
        }
        match self.odb.read(oid) {
            Ok(o) => self.files.push(SourceFile {
                path: rel_path,
                bytes: o.data().to_vec(),
            }),
            Err(e) => self.diags.push(whole_file(
                &rel_path,
                format!("cannot read blob: {}", e.message()),
            )),
        }
    }

    /// A symlink's blob is the target path. Followed only to a plain file inside the tree
    /// (what `rota validate` of a checkout reads too), and its own blob is budgeted like any
    /// other before it is read. `None` (with a diagnostic) when it is not followed.
    fn link_target(&mut self, link: git2::Oid, rel: &str, rel_path: &str) -> Option<git2::Oid> {
        let target = match self.odb.read_header(link) {
            Ok((size, _)) if size as u64 > MAX_LINK_BYTES => {
                self.diags.push(
                    whole_file(
                        rel_path,
                        format!(
                            "symbolic link target is {size} bytes, over the limit of {MAX_LINK_BYTES}: not read"
                        ),
                    )
                    .with_hint("a link names a path; this one is built to cost memory"),
                );
                return None;
            }
            Ok(_) => self
                .odb
                .read(link)
                .ok()
                .map(|o| String::from_utf8_lossy(o.data()).into_owned()),
            Err(_) => None,
        };
        let inside = target
            .as_deref()
            .and_then(|t| normalize(rel, t))
            .and_then(|p| self.root.get_path(&p).ok())
            .filter(|e| e.kind() == Some(git2::ObjectType::Blob) && e.filemode() != 0o120000);
        if inside.is_none() {
            self.diags.push(
                whole_file(
                    rel_path,
                    "symbolic link points outside the fleet repo (or nowhere)",
                )
                .with_hint("rota reads only files inside the repo"),
            );
        }
        inside.map(|e| e.id())
    }
}

/// The repo-relative path a symlink in folder `dir` pointing at `target` names, or `None`
/// when it is absolute or climbs out of the repo.
fn normalize(dir: &str, target: &str) -> Option<PathBuf> {
    let target = Path::new(target);
    if target.is_absolute() {
        return None;
    }
    let mut parts: Vec<String> = dir
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    for c in target.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlink_targets_stay_inside() {
        assert_eq!(normalize("a", "b.yaml"), Some(PathBuf::from("a/b.yaml")));
        assert_eq!(normalize("a", "../b.yaml"), Some(PathBuf::from("b.yaml")));
        assert_eq!(normalize("", "../b.yaml"), None);
        assert_eq!(normalize("a", "/etc/passwd"), None);
    }
}
