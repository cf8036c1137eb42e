//! Signature verification with real signed commits: SSH keys from ssh-keygen, OpenPGP keys
//! from gpg in a private GNUPGHOME, commits signed by `git commit -S`. Cross-checked with
//! `git verify-commit` where it has an opinion.

use std::path::Path;
use std::process::Command;

use git2::{Oid, Repository};
use rota::source::trust::{RejectReason, TrustPolicy, Verifier};

use super::support::{git, init_repo, tmp};

fn run(dir: &Path, envs: &[(&str, &Path)], prog: &str, args: &[&str]) -> String {
    let mut c = Command::new(prog);
    c.args(args).current_dir(dir);
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c.output().unwrap_or_else(|e| panic!("{prog}: {e}"));
    assert!(
        out.status.success(),
        "{prog} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn ssh_key(dir: &Path, name: &str) -> std::path::PathBuf {
    let key = dir.join(name);
    run(
        dir,
        &[],
        "ssh-keygen",
        &[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            name,
            "-f",
            key.to_str().unwrap(),
        ],
    );
    key
}

/// Commits with `git -c ... commit -S` and the given signing configuration.
fn signed_commit(work: &Path, config: &[String], envs: &[(&str, &Path)], content: &str) -> Oid {
    std::fs::write(work.join("fleet.yaml"), content).unwrap();
    git(work, &["add", "-A"]);
    let mut args: Vec<String> = vec![
        "-c".into(),
        "user.name=Fleet Admin".into(),
        "-c".into(),
        "user.email=admin@acme.test".into(),
    ];
    for c in config {
        args.push("-c".into());
        args.push(c.clone());
    }
    args.extend(["commit", "-q", "-S", "-m", content].map(String::from));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    run(work, envs, "git", &argv);
    Oid::from_str(&git(work, &["rev-parse", "HEAD"])).unwrap()
}

/// Rewrites a signed commit's message keeping its signature: a forged commit.
fn tampered_copy(work: &Path, commit: Oid) -> Oid {
    let raw = git(work, &["cat-file", "commit", &commit.to_string()]);
    let forged = raw.replacen("kind: Fleet", "kind: Fleet # evil", 1) + "\n";
    let id = crate::support::git::git_stdin(
        work,
        &["hash-object", "-t", "commit", "-w", "--stdin"],
        forged.as_bytes(),
    );
    Oid::from_str(&id).unwrap()
}

fn verify_commit_agrees(work: &Path, allowed: &Path, commit: Oid) -> bool {
    Command::new("git")
        .args([
            "-c",
            &format!("gpg.ssh.allowedSignersFile={}", allowed.display()),
            "verify-commit",
        ])
        .arg(commit.to_string())
        .current_dir(work)
        .output()
        .unwrap()
        .status
        .success()
}

#[test]
fn ssh_signatures_against_an_allowed_signers_file() {
    let t = tmp();
    let work = t.path().join("work");
    let unsigned = Oid::from_str(&init_repo(&work)).unwrap();
    let admin = ssh_key(t.path(), "admin");
    let intruder = ssh_key(t.path(), "intruder");
    let allowed = t.path().join("allowed_signers");
    let admin_pub = std::fs::read_to_string(admin.with_extension("pub")).unwrap();
    std::fs::write(
        &allowed,
        format!("admin@acme.test namespaces=\"git\" {admin_pub}"),
    )
    .unwrap();

    let ssh_cfg = |key: &Path| {
        vec![
            "gpg.format=ssh".to_string(),
            format!("user.signingkey={}", key.with_extension("pub").display()),
        ]
    };
    let good = signed_commit(&work, &ssh_cfg(&admin), &[], "kind: Fleet\n# good\n");
    let foreign = signed_commit(&work, &ssh_cfg(&intruder), &[], "kind: Fleet\n# foreign\n");
    let forged = tampered_copy(&work, good);

    let verifier = Verifier::new(&TrustPolicy {
        ssh_allowed_signers: Some(allowed.clone()),
        gpg_keyring: None,
    })
    .unwrap();
    let repo = Repository::open(&work).unwrap();

    let trusted = verifier.verify(&repo, good).unwrap().expect("trusted");
    assert!(
        trusted.signer.starts_with("ssh:admin@acme.test SHA256:"),
        "{}",
        trusted.signer
    );
    assert!(verify_commit_agrees(&work, &allowed, good));

    let r = verifier.verify(&repo, unsigned).unwrap().unwrap_err();
    assert_eq!(r.reason, RejectReason::Unsigned);
    assert_eq!(
        r.message,
        format!(
            "commit {} is not signed; this fleet requires signed commits",
            &unsigned.to_string()[..12]
        )
    );

    let r = verifier.verify(&repo, foreign).unwrap().unwrap_err();
    assert_eq!(r.reason, RejectReason::UnknownKey, "{}", r.message);
    assert!(
        r.message.contains("SHA256:") && r.message.contains("allowed_signers"),
        "{}",
        r.message
    );
    assert!(!verify_commit_agrees(&work, &allowed, foreign));

    let r = verifier.verify(&repo, forged).unwrap().unwrap_err();
    assert_eq!(r.reason, RejectReason::BadSignature, "{}", r.message);
    assert!(!verify_commit_agrees(&work, &allowed, forged));
}

#[test]
fn openpgp_signatures_against_a_keyring() {
    let t = tmp();
    let work = t.path().join("work");
    init_repo(&work);
    let home = t.path().join("gnupg");
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let env = [("GNUPGHOME", home.as_path())];
    let new_key = |uid: &str| {
        run(
            t.path(),
            &env,
            "gpg",
            &[
                "--batch",
                "--passphrase",
                "",
                "--quick-gen-key",
                uid,
                "ed25519",
                "sign",
                "never",
            ],
        );
        let out = run(
            t.path(),
            &env,
            "gpg",
            &["--batch", "--with-colons", "--list-keys", uid],
        );
        out.lines()
            .find(|l| l.starts_with("fpr:"))
            .unwrap()
            .split(':')
            .nth(9)
            .unwrap()
            .to_string()
    };
    let admin = new_key("Fleet Admin <admin@acme.test>");
    let other = new_key("Someone Else <else@acme.test>");
    let keyring = t.path().join("trusted.asc");
    let armored = run(
        t.path(),
        &env,
        "gpg",
        &["--batch", "--armor", "--export", &admin],
    );
    std::fs::write(&keyring, armored + "\n").unwrap();

    let pgp_cfg = |fpr: &str| {
        vec![
            "gpg.format=openpgp".to_string(),
            format!("user.signingkey={fpr}"),
        ]
    };
    let good = signed_commit(&work, &pgp_cfg(&admin), &env, "kind: Fleet\n# pgp good\n");
    let foreign = signed_commit(&work, &pgp_cfg(&other), &env, "kind: Fleet\n# pgp other\n");
    let forged = tampered_copy(&work, good);
    let _ = Command::new("gpgconf")
        .args(["--kill", "all"])
        .env("GNUPGHOME", &home)
        .status();

    let verifier = Verifier::new(&TrustPolicy {
        ssh_allowed_signers: None,
        gpg_keyring: Some(keyring.clone()),
    })
    .unwrap();
    let repo = Repository::open(&work).unwrap();
    let ok = verifier.verify(&repo, good).unwrap().expect("trusted");
    assert_eq!(
        ok.signer,
        format!("openpgp:{admin} Fleet Admin <admin@acme.test>")
    );

    let r = verifier.verify(&repo, foreign).unwrap().unwrap_err();
    assert_eq!(r.reason, RejectReason::UnknownKey, "{}", r.message);
    assert!(
        r.message.contains("not in the trusted keyring"),
        "{}",
        r.message
    );

    let r = verifier.verify(&repo, forged).unwrap().unwrap_err();
    assert_eq!(r.reason, RejectReason::BadSignature, "{}", r.message);

    // Only SSH trusted: an OpenPGP signature, however good, is not accepted.
    let allowed = t.path().join("allowed_signers");
    std::fs::write(&allowed, "").unwrap();
    let ssh_only = Verifier::new(&TrustPolicy {
        ssh_allowed_signers: Some(allowed),
        gpg_keyring: None,
    })
    .unwrap();
    let r = ssh_only.verify(&repo, good).unwrap().unwrap_err();
    assert_eq!(r.reason, RejectReason::UntrustedFormat);
    assert!(
        r.message
            .ends_with("is signed with OpenPGP, but only SSH signers are trusted"),
        "{}",
        r.message
    );

    // A keyring file with no key in it is refused at start.
    let empty = t.path().join("empty.asc");
    std::fs::write(&empty, "").unwrap();
    let err = Verifier::new(&TrustPolicy {
        ssh_allowed_signers: None,
        gpg_keyring: Some(empty),
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("no OpenPGP public key could be imported"),
        "{err}"
    );
}

/// Invariant 5 at the source: an unsigned commit on top of signed ones is not acted on, gets
/// an `error` status (in git notes, readable with git) and the last good commit stays in
/// force until a signed commit arrives.
#[tokio::test]
async fn unsigned_commit_keeps_the_last_good_one_and_gets_an_error_status() {
    use rota::report::{GitNotesStore, State, StatusStore};
    use rota::source::trust::{Admission, LastGood};
    use rota::source::{Auth, GitSource, SourceConfig};

    let t = tmp();
    let work = t.path().join("work");
    init_repo(&work);
    let admin = ssh_key(t.path(), "admin");
    let allowed = t.path().join("allowed_signers");
    let admin_pub = std::fs::read_to_string(admin.with_extension("pub")).unwrap();
    std::fs::write(&allowed, format!("admin@acme.test {admin_pub}")).unwrap();
    let cfg = vec![
        "gpg.format=ssh".to_string(),
        format!("user.signingkey={}", admin.with_extension("pub").display()),
    ];
    let good = signed_commit(&work, &cfg, &[], "kind: Fleet\n# signed\n");
    let origin = t.path().join("origin.git");
    git(
        t.path(),
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            origin.to_str().unwrap(),
        ],
    );

    let src = GitSource::open(
        SourceConfig {
            url: origin.display().to_string(),
            branch: "main".into(),
            auth: Auth::None,
            depth: None,
        },
        &t.path().join("mirror"),
    )
    .unwrap();
    let notes = GitNotesStore::for_source(&src, "canary-use1");
    let verifier = Verifier::new(&TrustPolicy {
        ssh_allowed_signers: Some(allowed),
        gpg_keyring: None,
    })
    .unwrap();
    let mut last_good = LastGood::default();

    let f = src.fetch().unwrap();
    assert_eq!(f.commit, good);
    let a = last_good.admit(f.commit, src.verify(&verifier, f.commit).unwrap());
    assert_eq!(a, Admission::Act { commit: good });

    // An unsigned commit lands on the branch.
    std::fs::write(work.join("fleet.yaml"), "kind: Fleet\n# unsigned\n").unwrap();
    git(&work, &["commit", "-q", "-am", "sneaky"]);
    git(
        &work,
        &["push", "-q", origin.to_str().unwrap(), "HEAD:main"],
    );
    let f = src.fetch().unwrap();
    let a = last_good.admit(f.commit, src.verify(&verifier, f.commit).unwrap());
    let Admission::Keep {
        last_good: kept,
        rejected,
        reason,
    } = &a
    else {
        panic!("{a:?}")
    };
    assert_eq!((*kept, *rejected), (Some(good), f.commit));
    assert_eq!(reason.reason, RejectReason::Unsigned);
    assert_eq!(
        last_good.commit(),
        Some(good),
        "the last good commit stays in force"
    );
    // As the agent reports a commit it refuses: an `error` status saying why.
    let status = rota::report::CommitStatus::new(
        "rota/canary-use1",
        rota::report::State::Error,
        &reason.message,
    );
    notes.set(&f.commit.to_string(), &status).await.unwrap();
    let shown = git(
        &origin,
        &[
            "notes",
            "--ref",
            "rota/canary-use1",
            "show",
            &f.commit.to_string(),
        ],
    );
    let doc: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(doc["statuses"][0]["state"], "error");
    assert!(
        doc["statuses"][0]["description"]
            .as_str()
            .unwrap()
            .ends_with("is not signed; this fleet requires signed commits")
    );
    assert_eq!(
        notes.list(&f.commit.to_string()).await.unwrap()[0].state,
        State::Error
    );

    // The next signed commit is acted on again.
    let next = signed_commit(&work, &cfg, &[], "kind: Fleet\n# signed again\n");
    git(
        &work,
        &["push", "-q", origin.to_str().unwrap(), "HEAD:main"],
    );
    let f = src.fetch().unwrap();
    assert_eq!(f.commit, next);
    assert_eq!(
        last_good.admit(f.commit, src.verify(&verifier, f.commit).unwrap()),
        Admission::Act { commit: next }
    );
}
