//! What a cloud's answer may put into the fleet repo, a commit message or a pull request:
//! discovery copies each found image's ID into a file, derives the version's name from the
//! image's name and quotes the name as the "build" in the commit and the pull request. The
//! name is whatever its publisher typed (an AMI name takes 128 characters including `@`,
//! `[`, `]` and spaces), so it is checked before any of that: a name with a newline, an
//! escape sequence, markdown or an `@mention` is refused, by kind, never copied.
//!
//! And a value that is not what was asked for (an SSM parameter the fleet names that holds a
//! database URL rather than an AMI ID) is described by its kind and length, never quoted:
//! such errors end up in CI and CronJob logs.

use crate::cloud::{Cloud, FoundImage};

/// The longest build name taken (EC2's own limit for an AMI name).
pub const MAX_BUILD_NAME: usize = 128;

/// Whether `c` may appear in a build name: letters, digits, space and `. _ - / : + ( )`.
/// Nothing that markdown, a terminal or a forge reads as markup: no `@` (a mention), no
/// `[`/`]`/`<`/`>`/`` ` ``/`*`/`#`/`|` (links, HTML, code, emphasis, headings, tables).
fn build_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, ' ' | '.' | '_' | '-' | '/' | ':' | '+' | '(' | ')')
}

/// A found image fit to be written: its ID of its cloud's shape and its name a plain build
/// name (1 to [`MAX_BUILD_NAME`] of the characters above, no space at either end). The error
/// says what is wrong without quoting what the cloud sent.
pub fn check_found(cloud: Cloud, found: &FoundImage) -> Result<(), String> {
    // `check_image` quotes the ID in its error: described here instead. Printable ASCII
    // only, since an Azure resource ID is checked for its parts, not every character.
    if crate::fleet::validate::check_image(cloud, &found.id).is_err()
        || !found.id.chars().all(|c| c.is_ascii_graphic())
    {
        return Err(format!(
            "the cloud answered an image ID that is not a {cloud} image ID ({})",
            describe_value(&found.id)
        ));
    }
    let name = &found.name;
    let why = if name.is_empty() {
        Some("it is empty".to_string())
    } else if name.chars().count() > MAX_BUILD_NAME {
        Some(format!(
            "it is {} characters long (at most {MAX_BUILD_NAME})",
            name.chars().count()
        ))
    } else if name.starts_with(' ') || name.ends_with(' ') {
        Some("it starts or ends with a space".to_string())
    } else {
        name.chars().position(|c| !build_char(c)).map(|i| {
            let c = name.chars().nth(i).unwrap_or_default();
            format!(
                "character {} is {}",
                i + 1,
                crate::sanitize::line(&format!("{c:?}"))
            )
        })
    };
    match why {
        None => Ok(()),
        Some(why) => Err(format!(
            "image {} is named in a way rota does not copy into the fleet repo or a pull \
             request: {why} (a build name is letters, digits, space and . _ - / : + ( ))",
            found.id
        )),
    }
}

/// What kind of value `v` is, for an error that must not quote it: its length and what it
/// looks like (`87 characters, looks like a URL`).
pub fn describe_value(v: &str) -> String {
    let n = v.chars().count();
    let t = v.trim();
    let kind = if t.is_empty() {
        "empty"
    } else if t.contains("://") {
        "looks like a URL"
    } else if t.starts_with("-----BEGIN") {
        "looks like a PEM key or certificate"
    } else if t.starts_with('{') || t.starts_with('[') {
        "looks like JSON"
    } else if t.contains('\n') {
        "several lines of text"
    } else if t.starts_with("ami-") {
        "starts like an AMI ID but is not one"
    } else if t.contains(',') {
        "looks like a list"
    } else if t
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "+/=_-".contains(c))
        && n >= 16
    {
        "looks like a token or an encoded value"
    } else {
        "text"
    };
    format!("{n} characters, {kind}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(id: &str, name: &str) -> FoundImage {
        FoundImage {
            id: id.into(),
            name: name.into(),
            created: chrono::DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn real_build_names_pass() {
        for name in [
            "amazon-eks-node-al2023-x86_64-standard-1.31-v20241109",
            "bottlerocket-aws-k8s-1.31-x86_64-v1.26.2-360b7a38",
            "ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-20241109",
            "Deep Learning AMI GPU PyTorch 2.0.1 (Amazon Linux 2) 20230926",
        ] {
            assert_eq!(
                check_found(Cloud::Aws, &found("ami-0a1b2c3d4e5f60718", name)),
                Ok(()),
                "{name}"
            );
        }
    }

    #[test]
    fn hostile_names_are_refused_by_kind_never_quoted() {
        let id = "ami-0a1b2c3d4e5f60718";
        for (name, says) in [
            (
                "acme-general-2026-11-3\n\n## Approved",
                "character 23 is '\\n'",
            ),
            (
                "acme-\x1b]52;c;cm0gLXJmIC8=\x07-1",
                "character 6 is '\\u{1b}'",
            ),
            ("acme-general @octocat please merge", "character 14 is '@'"),
            ("acme [click](https://evil.example)", "character 6 is '['"),
            ("acme <img src=x>", "character 6 is '<'"),
            ("acme-`rm -rf`", "character 6 is '`'"),
            (" acme", "starts or ends with a space"),
            ("", "it is empty"),
        ] {
            let err = check_found(Cloud::Aws, &found(id, name)).unwrap_err();
            assert!(err.contains(says), "{name:?}: {err}");
            assert!(
                !err.contains("evil.example") && !err.contains("octocat"),
                "{err}"
            );
            assert!(!err.contains('\x1b') && !err.contains('\n'), "{err:?}");
        }
        let long = "a".repeat(129);
        assert!(
            check_found(Cloud::Aws, &found(id, &long))
                .unwrap_err()
                .contains("129 characters long")
        );
        let err = check_found(Cloud::Aws, &found("ami-x\x1b[2J", "acme-1")).unwrap_err();
        assert!(err.contains("image ID that is not"), "{err}");
        assert!(!err.contains('\x1b'), "{err:?}");
    }

    #[test]
    fn a_value_is_described_by_kind() {
        assert_eq!(
            describe_value("postgres://admin:hunter2@db.internal:5432/fleet"),
            "47 characters, looks like a URL"
        );
        assert_eq!(describe_value(""), "0 characters, empty");
        assert_eq!(
            describe_value("{\"password\": \"x\"}"),
            "17 characters, looks like JSON"
        );
        assert_eq!(
            describe_value("AKIAIOSFODNN7EXAMPLE"),
            "20 characters, looks like a token or an encoded value"
        );
        assert_eq!(
            describe_value("ami-zzz"),
            "7 characters, starts like an AMI ID but is not one"
        );
        assert!(!describe_value("hunter2").contains("hunter2"));
    }
}
