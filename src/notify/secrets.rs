//! Secrets by name: the fleet repo names a secret (`urlSecret: team-a-slack`), the agent
//! resolves the name in the one directory it was given (`--secrets-dir`, a mounted Kubernetes
//! Secret) and reads it with a size cap.
//!
//! Why not paths: the fleet repo is written by everyone who can open a pull request, and
//! `urlFile: /dev/zero` made the agent read without end (1.8 GiB in 2 s). A name here is a
//! Secret key (`[A-Za-z0-9]([-._A-Za-z0-9]*[A-Za-z0-9])?`), so it cannot hold `/` or `..`;
//! the file it names must resolve inside the directory (the symlinks a mounted Secret is made
//! of, `key -> ..data/key`, stay inside it) and be a regular file of at most [`MAX_SECRET`]
//! bytes. Anything else is refused with an error that names the secret, never its content.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use crate::telemetry::Secret;

/// The largest secret read: a webhook URL or a token is far shorter.
pub const MAX_SECRET: u64 = 64 * 1024;

/// Longest secret name (a Kubernetes Secret key).
pub const MAX_NAME: usize = 253;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SecretsError {
    #[error(
        "secret {name:?} is not a secret name: use the key of the mounted Secret (letters, digits, '-', '_', '.'; no path)"
    )]
    BadName { name: String },
    #[error("secret {name:?} is named but the agent has no --secrets-dir")]
    NoDir { name: String },
    #[error("secret {name:?} is not in {dir}: {message}")]
    Missing {
        name: String,
        dir: PathBuf,
        message: String,
    },
    #[error("secret {name:?} resolves outside {dir}: refused")]
    Outside { name: String, dir: PathBuf },
    #[error("secret {name:?} is not a regular file: refused")]
    NotAFile { name: String },
    #[error("secret {name:?} is larger than {MAX_SECRET} bytes: refused")]
    TooLarge { name: String },
    #[error("secret {name:?} is empty")]
    Empty { name: String },
}

/// The directory secrets are resolved in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretsDir {
    dir: PathBuf,
}

/// Whether `name` can be a secret name (pure; also what the JSON Schema says).
pub fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.');
    !b.is_empty()
        && b.len() <= MAX_NAME
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(inner)
}

impl SecretsDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SecretsDir { dir: dir.into() }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Reads the secret `name`, trimming the trailing newline editors and `echo` add.
    pub fn read(&self, name: &str) -> Result<Secret, SecretsError> {
        let bad = || SecretsError::BadName {
            name: rota_core::fleet::diagnostics::shorten(name.to_string(), 80),
        };
        if !valid_name(name) {
            return Err(bad());
        }
        let missing = |e: std::io::Error| SecretsError::Missing {
            name: name.to_string(),
            dir: self.dir.clone(),
            message: e.to_string(),
        };
        let root = self.dir.canonicalize().map_err(missing)?;
        let real = root.join(name).canonicalize().map_err(missing)?;
        if !real.starts_with(&root) || real == root {
            return Err(SecretsError::Outside {
                name: name.to_string(),
                dir: self.dir.clone(),
            });
        }
        let not_file = || SecretsError::NotAFile {
            name: name.to_string(),
        };
        // Checked before opening: opening a FIFO would block, a device may never end.
        if !std::fs::metadata(&real).map_err(missing)?.is_file() {
            return Err(not_file());
        }
        let file = std::fs::File::open(&real).map_err(missing)?;
        // And again on what was opened, in case the file was swapped in between.
        if !file.metadata().map_err(missing)?.is_file() {
            return Err(not_file());
        }
        let mut bytes = Vec::new();
        file.take(MAX_SECRET + 1)
            .read_to_end(&mut bytes)
            .map_err(missing)?;
        if bytes.len() as u64 > MAX_SECRET {
            return Err(SecretsError::TooLarge {
                name: name.to_string(),
            });
        }
        let text = String::from_utf8(bytes).map_err(|_| SecretsError::NotAFile {
            name: name.to_string(),
        })?;
        let value = text.trim_end_matches(['\n', '\r']);
        if value.is_empty() {
            return Err(SecretsError::Empty {
                name: name.to_string(),
            });
        }
        Ok(Secret::new(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory laid out as the kubelet mounts a Secret: `key -> ..data/key`,
    /// `..data -> ..2026_11_24_05_00_00.1`, the files in the timestamped folder.
    fn mounted(entries: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let stamped = d.path().join("..2026_11_24_05_00_00.1");
        std::fs::create_dir(&stamped).unwrap();
        for (k, v) in entries {
            std::fs::write(stamped.join(k), v).unwrap();
            std::os::unix::fs::symlink(format!("..data/{k}"), d.path().join(k)).unwrap();
        }
        std::os::unix::fs::symlink("..2026_11_24_05_00_00.1", d.path().join("..data")).unwrap();
        d
    }

    #[test]
    fn reads_a_mounted_secret_by_name() {
        let d = mounted(&[("team-a.slack", "https://hooks.example/T/B/x\n")]);
        let s = SecretsDir::new(d.path()).read("team-a.slack").unwrap();
        assert_eq!(s.expose(), "https://hooks.example/T/B/x");
    }

    #[test]
    fn refuses_paths_and_dot_dot() {
        let d = mounted(&[("a", "x")]);
        let dir = SecretsDir::new(d.path());
        for name in [
            "/dev/zero",
            "../a",
            "..",
            ".",
            "a/../a",
            "..data",
            "",
            "a b",
            "-a",
        ] {
            assert!(
                matches!(dir.read(name), Err(SecretsError::BadName { .. })),
                "{name:?}: {:?}",
                dir.read(name)
            );
        }
        let long = "a".repeat(MAX_NAME + 1);
        assert!(matches!(dir.read(&long), Err(SecretsError::BadName { .. })));
    }

    #[test]
    fn refuses_symlinks_out_of_the_dir_devices_and_fifos() {
        let d = mounted(&[]);
        let dir = SecretsDir::new(d.path());
        std::os::unix::fs::symlink("/dev/zero", d.path().join("zero")).unwrap();
        assert!(
            matches!(dir.read("zero"), Err(SecretsError::Outside { .. })),
            "{:?}",
            dir.read("zero")
        );
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(outside.path(), "https://x").unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("out")).unwrap();
        assert!(matches!(dir.read("out"), Err(SecretsError::Outside { .. })));
        let fifo = d.path().join("fifo");
        let ok = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo (coreutils) is needed by this test")
            .success();
        assert!(ok, "mkfifo failed");
        assert_eq!(
            dir.read("fifo"),
            Err(SecretsError::NotAFile {
                name: "fifo".into()
            })
        );
        std::fs::create_dir(d.path().join("sub")).unwrap();
        assert!(matches!(
            dir.read("sub"),
            Err(SecretsError::NotAFile { .. })
        ));
    }

    #[test]
    fn caps_the_size_and_refuses_empty_or_missing() {
        let big = "x".repeat(MAX_SECRET as usize + 1);
        let d = mounted(&[("big", big.as_str()), ("empty", "\n")]);
        let dir = SecretsDir::new(d.path());
        assert!(matches!(
            dir.read("big"),
            Err(SecretsError::TooLarge { .. })
        ));
        assert!(matches!(dir.read("empty"), Err(SecretsError::Empty { .. })));
        assert!(matches!(
            dir.read("nope"),
            Err(SecretsError::Missing { .. })
        ));
    }
}
