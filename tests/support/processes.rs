//! What the tests that spawn `rota` share: a child process killed when the test drops it
//! ([`Kill`]), and `rota sim serve` started over a fleet repo and ready ([`SimServe`]).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::git::rota;

/// A child process, killed and reaped when dropped (a failing test leaves nothing behind).
pub struct Kill(pub Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `rota sim serve --repo <work> --kubeconfig <kubeconfig>`, with what a test adds.
pub struct SimServe {
    cmd: Command,
}

impl SimServe {
    /// Every cluster of the fleet in `work`, its kubeconfig written to `kubeconfig`.
    pub fn new(work: &Path, kubeconfig: &Path) -> SimServe {
        let mut cmd = Command::new(rota());
        cmd.args(["sim", "serve", "--repo"])
            .arg(work)
            .arg("--kubeconfig")
            .arg(kubeconfig);
        SimServe { cmd }
    }

    /// `--workloads <file>`, `yaml` written to `file` first.
    pub fn workloads(mut self, file: &Path, yaml: &str) -> SimServe {
        std::fs::write(file, yaml).unwrap();
        self.cmd.arg("--workloads").arg(file);
        self
    }

    /// `--faults <file>`, `yaml` written to `file` first.
    pub fn faults(mut self, file: &Path, yaml: &str) -> SimServe {
        std::fs::write(file, yaml).unwrap();
        self.cmd.arg("--faults").arg(file);
        self
    }

    /// `--speed <times>`: fleet time runs that many times faster than the wall clock.
    pub fn speed(mut self, times: u32) -> SimServe {
        self.cmd.args(["--speed", &times.to_string()]);
        self
    }

    /// The server, once its first line says it is ready (that line, for the test's own
    /// assertions: `rota sim: ready: <n> clusters ...`).
    pub fn start(mut self) -> (Kill, String) {
        let mut child = self
            .cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the rota binary");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let child = Kill(child);
        assert!(line.starts_with("rota sim: ready"), "{line}");
        (child, line)
    }
}
