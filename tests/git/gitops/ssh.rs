//! Fetching over ssh from a real OpenSSH server on loopback: key authentication, host keys
//! checked against a known_hosts file (good, unknown, changed), and a key the server refuses.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rota::source::{Auth, GitSource, SourceConfig};

use super::support::{init_repo, tmp};

struct Sshd {
    child: Child,
    port: u16,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keygen(path: &Path) -> String {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "", "-f"])
        .arg(path)
        .output()
        .expect("ssh-keygen (openssh-client) is installed");
    assert!(out.status.success(), "{out:?}");
    std::fs::read_to_string(path.with_extension("pub"))
        .unwrap()
        .trim()
        .to_string()
}

fn user() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Starts `/usr/sbin/sshd` (openssh-server) on 127.0.0.1 with its own host key and an
/// authorized_keys file holding `client_pub`.
fn start_sshd(dir: &Path, client_pub: &str) -> (Sshd, String) {
    let host_pub = keygen(&dir.join("host_ed25519"));
    std::fs::write(dir.join("authorized_keys"), format!("{client_pub}\n")).unwrap();
    // sshd insists on its privilege separation directory even for a private instance.
    std::fs::create_dir_all("/run/sshd")
        .expect("creating /run/sshd for sshd (run the tests as root, as scripts/test does)");
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_ed25519\nPidFile {d}/sshd.pid\n\
                 AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nUsePAM no\n\
                 PermitRootLogin prohibit-password\nAllowUsers {u}\nLogLevel ERROR\n",
                d = dir.display(),
                u = user()
            ),
        )
        .unwrap();
        let mut child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("/usr/sbin/sshd (openssh-server) is installed");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return (Sshd { child, port }, host_pub);
            }
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("sshd did not start");
}

fn ssh_config(url: &str, key: &Path, known_hosts: PathBuf) -> SourceConfig {
    SourceConfig {
        url: url.to_string(),
        branch: "main".into(),
        auth: Auth::SshKey {
            user: None,
            private_key: key.to_path_buf(),
            public_key: None,
            passphrase: None,
            known_hosts,
        },
        depth: Some(1),
    }
}

#[test]
fn fetch_over_ssh_checks_keys_both_ways() {
    let t = tmp();
    let work = t.path().join("work");
    let head = init_repo(&work);
    let client = t.path().join("client_ed25519");
    let client_pub = keygen(&client);
    let (sshd, host_pub) = start_sshd(t.path(), &client_pub);
    let url = format!("ssh://{}@127.0.0.1:{}{}", user(), sshd.port, work.display());

    let known = t.path().join("known_hosts");
    std::fs::write(&known, format!("[127.0.0.1]:{} {host_pub}\n", sshd.port)).unwrap();
    let src = GitSource::open(ssh_config(&url, &client, known), &t.path().join("m1")).unwrap();
    let f = src.fetch().expect("ssh fetch with a known host key");
    assert_eq!(f.commit.to_string(), head);
    assert!(
        src.repository().unwrap().is_shallow(),
        "depth works over ssh"
    );

    // The server's key changed (or someone is in the middle): refused.
    let other_pub = keygen(&t.path().join("other_host"));
    let changed = t.path().join("known_hosts_changed");
    std::fs::write(&changed, format!("[127.0.0.1]:{} {other_pub}\n", sshd.port)).unwrap();
    let src = GitSource::open(ssh_config(&url, &client, changed), &t.path().join("m2")).unwrap();
    let err = src.fetch().unwrap_err().to_string();
    assert!(
        err.contains("does not match") && err.contains("refusing to connect"),
        "{err}"
    );

    // Not listed at all (same host, port 22 entry only): refused, no trust on first use.
    let unknown = t.path().join("known_hosts_unknown");
    std::fs::write(&unknown, format!("127.0.0.1 {host_pub}\n")).unwrap();
    let src = GitSource::open(ssh_config(&url, &client, unknown), &t.path().join("m3")).unwrap();
    let err = src.fetch().unwrap_err().to_string();
    assert!(
        err.contains(&format!("[127.0.0.1]:{} is not in", sshd.port)),
        "{err}"
    );

    // A key the server does not authorize: a clear failure, not a retry loop.
    let stranger = t.path().join("stranger_ed25519");
    keygen(&stranger);
    let known = t.path().join("known_hosts");
    let src = GitSource::open(ssh_config(&url, &stranger, known), &t.path().join("m4")).unwrap();
    let err = src.fetch().unwrap_err().to_string();
    assert!(
        err.contains("the server rejected SSH key") && err.contains("stranger_ed25519"),
        "{err}"
    );
}
