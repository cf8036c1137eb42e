//! The agent's OCI image, as `scripts/image` writes it (an OCI layout in
//! `<target dir>/image/oci`; `scripts/test` builds it before the test suite): the index names
//! it with the tag the kustomize base deploys, every blob matches its digest, the config runs
//! `rota` as user 65532 with no shell, and the root filesystem is complete: `rota --version`
//! and a real SSH signature verification run inside it (chroot, as the image's user), and
//! the binary is the one without the simulated fleet.
//!
//! Also: `deploy/Dockerfile` builds on the crate's `rust-version` without the `sim` feature.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;
use sha2::{Digest, Sha256};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The tag `scripts/image` gives the image and `deploy/` must deploy.
fn expected_ref() -> String {
    format!("ghcr.io/rota-dev/rota:{}", env!("CARGO_PKG_VERSION"))
}

/// `<target dir>/image/oci`, next to the `rota` this test was built with.
fn layout() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_rota"));
    let target = bin.parent().and_then(Path::parent).unwrap();
    let dir = target.join("image/oci");
    assert!(
        dir.join("index.json").is_file(),
        "no OCI image at {}: build it with `scripts/image --profile dev` (scripts/test does; \
         it needs buildah: apt-get install buildah)",
        dir.display()
    );
    dir
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A blob of the layout, checked against its digest.
fn blob(layout: &Path, descriptor: &Value) -> PathBuf {
    let digest = descriptor["digest"]
        .as_str()
        .expect("descriptor has a digest");
    let hex = digest.strip_prefix("sha256:").expect("sha256 digest");
    let path = layout.join("blobs/sha256").join(hex);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        hex::encode(Sha256::digest(&bytes)),
        hex,
        "{} does not match its digest",
        path.display()
    );
    assert_eq!(
        descriptor["size"].as_u64(),
        Some(bytes.len() as u64),
        "{}: size",
        path.display()
    );
    path
}

/// The image's manifest (the layout's only one, named with the expected tag) and config.
fn manifest_and_config() -> (PathBuf, Value, Value) {
    let layout = layout();
    let index = read_json(&layout.join("index.json"));
    let manifests = index["manifests"]
        .as_array()
        .expect("index lists manifests");
    assert_eq!(manifests.len(), 1, "one image in the layout: {index}");
    let desc = &manifests[0];
    assert_eq!(
        desc["annotations"]["org.opencontainers.image.ref.name"].as_str(),
        Some(expected_ref().as_str()),
        "the image's name in the layout"
    );
    assert_eq!(
        desc["mediaType"].as_str(),
        Some("application/vnd.oci.image.manifest.v1+json")
    );
    let manifest = read_json(&blob(&layout, desc));
    let config = read_json(&blob(&layout, &manifest["config"]));
    (layout, manifest, config)
}

#[test]
fn the_config_runs_rota_as_65532_with_no_shell() {
    let (_, manifest, config) = manifest_and_config();
    assert_eq!(
        manifest["config"]["mediaType"].as_str(),
        Some("application/vnd.oci.image.config.v1+json")
    );
    assert_eq!(config["os"], "linux");
    assert_eq!(config["architecture"], "amd64");
    let c = &config["config"];
    assert_eq!(c["User"], "65532:65532");
    // Exec form: nothing goes through a shell (the image has none).
    assert_eq!(c["Entrypoint"], serde_json::json!(["/usr/local/bin/rota"]));
    assert_eq!(c["Cmd"], serde_json::json!(["agent"]));
    let env: Vec<&str> = c["Env"]
        .as_array()
        .expect("Env")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(env.contains(&"HOME=/var/cache/rota"), "{env:?}");
    assert!(
        env.contains(&"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"),
        "{env:?}"
    );
    let ports = c["ExposedPorts"].as_object().expect("ExposedPorts");
    assert!(
        ports.contains_key("9090/tcp") && ports.contains_key("8080/tcp"),
        "{ports:?}"
    );
    assert_eq!(
        c["Labels"]["org.opencontainers.image.version"].as_str(),
        Some(env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        manifest["layers"].as_array().map(Vec::len),
        Some(1),
        "one layer: {manifest}"
    );
}

/// The image's layers unpacked in order (once per test run), owners kept.
fn rootfs() -> &'static Path {
    static ROOTFS: OnceLock<PathBuf> = OnceLock::new();
    ROOTFS.get_or_init(|| {
        let (layout, manifest, _) = manifest_and_config();
        let dir = layout.parent().unwrap().join("test-rootfs");
        if dir.exists() {
            std::fs::remove_dir_all(&dir).unwrap();
        }
        std::fs::create_dir_all(&dir).unwrap();
        for layer in manifest["layers"].as_array().expect("layers") {
            let path = blob(&layout, layer);
            // GNU tar recognises plain and gzip-compressed layers by their content.
            let out = Command::new("tar")
                .args(["--numeric-owner", "--same-owner", "-xf"])
                .arg(&path)
                .arg("-C")
                .arg(&dir)
                .output()
                .expect("tar is installed");
            assert!(
                out.status.success(),
                "tar -xf {}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // A container runtime gives every container /dev/null (ssh-keygen opens it); the
        // image itself carries no device nodes, so this copy gets the one a runtime would.
        std::fs::create_dir_all(dir.join("dev")).unwrap();
        let out = Command::new("mknod")
            .args(["-m", "666"])
            .arg(dir.join("dev/null"))
            .args(["c", "1", "3"])
            .output()
            .expect("mknod is installed (coreutils)");
        assert!(
            out.status.success(),
            "mknod dev/null: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    })
}

/// `chroot` from this process's PATH (coreutils puts it in /usr/sbin): the image's programs
/// run with the image's PATH, which must not decide where chroot itself is found.
fn chroot() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join("chroot"))
        .find(|p| p.is_file())
        .expect("chroot is not installed (coreutils)")
}

/// Runs a program of the image inside its root filesystem as the image's user (65532).
fn in_image(args: &[&str]) -> std::process::Output {
    let rootfs = rootfs();
    let id = Command::new("id")
        .arg("-u")
        .output()
        .expect("id (coreutils)");
    assert_eq!(
        String::from_utf8_lossy(&id.stdout).trim(),
        "0",
        "running the image's root filesystem needs chroot, i.e. root (scripts/test and CI run as root)"
    );
    Command::new(chroot())
        .arg("--userspec=65532:65532")
        .arg(rootfs)
        .args(args)
        .env_clear()
        .env("HOME", "/var/cache/rota")
        .env("PATH", "/usr/local/bin:/usr/bin")
        .output()
        .expect("chroot is installed (coreutils)")
}

#[test]
fn rota_version_runs_inside_the_images_root_filesystem() {
    let out = in_image(&["/usr/local/bin/rota", "--version"]);
    assert!(
        out.status.success(),
        "rota --version in the image: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("rota {}", env!("CARGO_PKG_VERSION"))
    );
    // The binary is the one without the `sim` feature: no simulated fleet, no demo.
    for gone in ["sim", "demo"] {
        let out = in_image(&["/usr/local/bin/rota", gone, "--help"]);
        assert!(!out.status.success(), "`rota {gone}` exists in the image");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("unrecognized subcommand"), "{err}");
    }
    let out = in_image(&["/usr/local/bin/rota", "agent", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--cloud"), "{help}");
    assert!(!help.contains("--cloud-endpoint"), "{help}");
}

#[test]
fn the_root_filesystem_has_no_shell_and_a_home_for_65532() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let rootfs = rootfs();
    for shell in [
        "bin/sh",
        "bin/bash",
        "usr/bin/sh",
        "usr/bin/bash",
        "bin/busybox",
    ] {
        assert!(
            std::fs::symlink_metadata(rootfs.join(shell)).is_err(),
            "{shell} is in the image"
        );
    }
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap();
    assert!(
        passwd
            .lines()
            .any(|l| l.starts_with("nonroot:x:65532:65532:")),
        "{passwd}"
    );
    let home = std::fs::metadata(rootfs.join("var/cache/rota")).unwrap();
    assert_eq!((home.uid(), home.gid()), (65532, 65532));
    let tmp = std::fs::metadata(rootfs.join("tmp")).unwrap();
    assert_eq!(tmp.permissions().mode() & 0o7777, 0o1777);
    assert!(rootfs.join("etc/ssl/certs/ca-certificates.crt").is_file());
    let rota = std::fs::metadata(rootfs.join("usr/local/bin/rota")).unwrap();
    assert_eq!(rota.uid(), 0, "the binary is root's, not writable by 65532");
}

/// Signature verification hands signatures to ssh-keygen (src/source/trust.rs): the image's
/// ssh-keygen must run, as 65532, with the libraries the image carries.
#[test]
fn ssh_keygen_in_the_image_verifies_a_signature_as_the_images_user() {
    let rootfs = rootfs();
    let work = rootfs.join("tmp/sig-test");
    if work.exists() {
        std::fs::remove_dir_all(&work).unwrap();
    }
    std::fs::create_dir_all(&work).unwrap();
    let key = work.join("key");
    let run = |cmd: &mut Command| {
        let out = cmd
            .output()
            .expect("ssh-keygen is installed (openssh-client)");
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "", "-f"])
        .arg(&key));
    std::fs::write(work.join("msg"), "tree 0123\n").unwrap();
    run(Command::new("ssh-keygen")
        .args(["-Y", "sign", "-n", "git", "-f"])
        .arg(&key)
        .arg(work.join("msg")));
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    std::fs::write(work.join("allowed"), format!("ci@rota {public}")).unwrap();
    std::fs::remove_file(&key).unwrap();
    let check = |msg: &str| {
        std::fs::write(work.join("input"), msg).unwrap();
        // No shell in the image: stdin comes from a file chroot's caller opens.
        let input = std::fs::File::open(work.join("input")).unwrap();
        Command::new(chroot())
            .arg("--userspec=65532:65532")
            .arg(rootfs)
            .args([
                "/usr/bin/ssh-keygen",
                "-Y",
                "verify",
                "-f",
                "/tmp/sig-test/allowed",
                "-I",
                "ci@rota",
                "-n",
                "git",
                "-s",
                "/tmp/sig-test/msg.sig",
            ])
            .env_clear()
            .env("HOME", "/var/cache/rota")
            .stdin(input)
            .output()
            .expect("chroot is installed")
    };
    let good = check("tree 0123\n");
    assert!(
        good.status.success(),
        "ssh-keygen -Y verify in the image: {}{}",
        String::from_utf8_lossy(&good.stdout),
        String::from_utf8_lossy(&good.stderr)
    );
    let bad = check("tree 4567\n");
    assert!(!bad.status.success(), "a changed message must not verify");
}

/// OpenPGP trust runs gpg as src/source/trust.rs does: import the armored keyring into a
/// private home (which starts gpg-agent: without it the import fails), verify a detached
/// signature, stop the agent with gpgconf. All inside the image, as 65532.
#[test]
fn gpg_in_the_image_imports_a_keyring_and_verifies_a_signature_as_the_images_user() {
    let rootfs = rootfs();
    let work = rootfs.join("tmp/gpg-test");
    if work.exists() {
        std::fs::remove_dir_all(&work).unwrap();
    }
    std::fs::create_dir_all(&work).unwrap();
    // The signer's key lives on the host, in a home of its own.
    let signer = tempfile::tempdir().unwrap();
    let host_gpg = |args: &[&str]| {
        let out = Command::new("gpg")
            .arg("--homedir")
            .arg(signer.path())
            .args(["--batch", "--no-tty", "--passphrase", ""])
            .args(args)
            .output()
            .expect("gpg is installed (gnupg)");
        assert!(
            out.status.success(),
            "gpg {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    host_gpg(&[
        "--quick-gen-key",
        "ci <ci@rota>",
        "ed25519",
        "sign",
        "never",
    ]);
    std::fs::write(work.join("keyring.asc"), host_gpg(&["--export", "--armor"])).unwrap();
    std::fs::write(work.join("msg"), "tree 0123\n").unwrap();
    let msg = work.join("msg");
    let sig = work.join("msg.asc");
    host_gpg(&[
        "--detach-sign",
        "--armor",
        "-o",
        sig.to_str().unwrap(),
        msg.to_str().unwrap(),
    ]);
    let _ = Command::new("gpgconf")
        .arg("--homedir")
        .arg(signer.path())
        .args(["--kill", "all"])
        .status();
    let home = work.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let chown = Command::new("chown")
        .arg("65532:65532")
        .arg(&home)
        .status()
        .unwrap();
    assert!(chown.success());
    std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();

    let gpg = |args: &[&str]| {
        let mut argv = vec![
            "/usr/bin/gpg",
            "--homedir",
            "/tmp/gpg-test/home",
            "--batch",
            "--no-tty",
            "--status-fd",
            "1",
            "--trust-model",
            "always",
        ];
        argv.extend_from_slice(args);
        in_image(&argv)
    };
    let import = gpg(&["--import", "/tmp/gpg-test/keyring.asc"]);
    let stdout = String::from_utf8_lossy(&import.stdout);
    let _ = in_image(&[
        "/usr/bin/gpgconf",
        "--homedir",
        "/tmp/gpg-test/home",
        "--kill",
        "all",
    ]);
    assert!(
        import.status.success() && stdout.contains("IMPORT_OK"),
        "gpg --import in the image: {stdout}{}",
        String::from_utf8_lossy(&import.stderr)
    );
    let verify = gpg(&["--verify", "/tmp/gpg-test/msg.asc", "/tmp/gpg-test/msg"]);
    let stdout = String::from_utf8_lossy(&verify.stdout);
    let _ = in_image(&[
        "/usr/bin/gpgconf",
        "--homedir",
        "/tmp/gpg-test/home",
        "--kill",
        "all",
    ]);
    assert!(
        verify.status.success() && stdout.contains("VALIDSIG"),
        "gpg --verify in the image: {stdout}{}",
        String::from_utf8_lossy(&verify.stderr)
    );
}

/// The image's agent cannot drive a simulated cloud: given a kubeconfig written by `rota sim
/// serve`, it refuses at start, naming the missing feature, instead of falling through to the
/// real providers.
#[test]
fn the_images_controller_refuses_a_simulated_clouds_kubeconfig() {
    let rootfs = rootfs();
    let dir = rootfs.join("tmp/sim-kubeconfig");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config"),
        r#"apiVersion: v1
kind: Config
current-context: a
clusters:
- name: a
  cluster:
    server: http://127.0.0.1:1
    extensions:
    - name: rota.dev/sim-cloud
      extension: {url: "http://127.0.0.1:9"}
contexts:
- {name: a, context: {cluster: a, user: a}}
users:
- {name: a, user: {token: t}}
"#,
    )
    .unwrap();
    let out = in_image(&[
        "/usr/local/bin/rota",
        "controller",
        "--kubeconfig",
        "/tmp/sim-kubeconfig/config",
        "--metrics-addr",
        "127.0.0.1:0",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("names a simulated cloud (http://127.0.0.1:9")
            && err.contains("built without the `sim` feature"),
        "{err}"
    );
}

/// `kubectl kustomize deploy/`: the images its Deployments run.
fn deployed_images() -> Vec<String> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(root().join("deploy"))
        .output()
        .expect("kubectl is installed (scripts/test installs it)");
    assert!(
        out.status.success(),
        "kubectl kustomize deploy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut images = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v: serde_yaml::Value = serde::Deserialize::deserialize(doc).unwrap();
        let v = serde_json::to_value(v).unwrap();
        if v["kind"] == "Deployment" {
            for c in v["spec"]["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
            {
                images.push(c["image"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    images
}

#[test]
fn the_kustomize_base_deploys_the_images_tag() {
    let (layout, _, _) = manifest_and_config();
    let index = read_json(&layout.join("index.json"));
    let built = index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
        .as_str()
        .unwrap()
        .to_string();
    let images = deployed_images();
    assert!(!images.is_empty(), "deploy/ renders no Deployment");
    assert_eq!(
        images,
        vec![built],
        "deploy/ must run the image scripts/image builds"
    );
}

#[test]
fn the_dockerfile_builds_on_the_crates_rust_version_without_sim() {
    let text = std::fs::read_to_string(root().join("deploy/Dockerfile")).unwrap();
    let from = format!("FROM rust:{}-", env!("CARGO_PKG_RUST_VERSION"));
    assert!(
        text.lines().any(|l| l.starts_with(&from)),
        "deploy/Dockerfile must build on `{from}...` (Cargo.toml rust-version)"
    );
    let build = text
        .lines()
        .find(|l| l.contains("cargo build"))
        .expect("the Dockerfile builds rota");
    assert!(build.contains("--no-default-features"), "{build}");
    assert!(build.contains("--features clouds"), "{build}");
    assert!(build.contains("--locked"), "{build}");
    assert!(
        text.contains(&format!("-t {}", expected_ref())),
        "the Dockerfile's build line tags {}",
        expected_ref()
    );
    assert!(text.contains("USER 65532:65532"));
    assert!(text.contains(r#"ENTRYPOINT ["/usr/local/bin/rota"]"#));
}
