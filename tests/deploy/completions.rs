//! `rota completions` and `rota man`, checked by the programs that read them: the bash script
//! is sourced by a real bash and asked for completions as bash's `complete` would (every
//! subcommand of the CLI, a subcommand's flags); the zsh and fish scripts pass their shells'
//! syntax checks; the man pages render with groff without a warning and `man -l` shows a
//! subcommand's flags.

use std::path::Path;
use std::process::{Command, Output};

use clap::CommandFactory;

fn rota(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_rota"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rota {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn tool(name: &str, package: &str) -> Command {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .unwrap();
    assert!(
        found.status.success(),
        "{name} is not installed: apt-get install {package} (scripts/test installs it)"
    );
    Command::new(name)
}

/// What the bash completion function offers for `words` (the last one being completed).
fn bash_complete(script: &Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let cword = words.len() - 1;
    let prev = if cword > 0 { words[cword - 1] } else { "" };
    let program = format!(
        r#"source '{script}'
complete -p rota >/dev/null || {{ echo 'no completion registered for rota' >&2; exit 1; }}
COMP_WORDS=({words})
COMP_CWORD={cword}
COMP_LINE='{line}'
COMP_POINT=${{#COMP_LINE}}
_rota rota '{cur}' '{prev}'
printf '%s\n' "${{COMPREPLY[@]}}"
"#,
        script = script.display(),
        words = quoted.join(" "),
        line = words.join(" "),
        cur = words[cword],
    );
    let out = tool("bash", "bash")
        .args(["--norc", "--noprofile", "-c", &program])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bash: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_every_subcommand_and_a_subcommands_flags() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("rota.bash");
    std::fs::write(&script, rota(&["completions", "bash"]).stdout).unwrap();

    let offered = bash_complete(&script, &["rota", ""]);
    let cli = rota::cli::Cli::command();
    let subcommands: Vec<&str> = cli.get_subcommands().map(|c| c.get_name()).collect();
    assert!(subcommands.len() >= 10, "{subcommands:?}");
    for name in &subcommands {
        assert!(
            offered.iter().any(|o| o == name),
            "`rota <TAB>` does not offer {name}: {offered:?}"
        );
    }
    // This test binary has the `sim` feature (the default): its commands are there.
    assert!(offered.iter().any(|o| o == "sim"), "{offered:?}");

    let offered = bash_complete(&script, &["rota", "ag"]);
    assert_eq!(offered, vec!["agent".to_string()]);
    let offered = bash_complete(&script, &["rota", "agent", "--metr"]);
    assert_eq!(offered, vec!["--metrics-addr".to_string()]);
    let offered = bash_complete(&script, &["rota", "completions", ""]);
    for shell in ["bash", "zsh", "fish"] {
        assert!(offered.iter().any(|o| o == shell), "{offered:?}");
    }
}

#[test]
fn zsh_and_fish_accept_their_scripts() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, package, check) in [
        ("zsh", "zsh", vec!["-n"]),
        ("fish", "fish", vec!["--no-execute"]),
    ] {
        let script = dir.path().join(format!("rota.{shell}"));
        let text = rota(&["completions", shell]).stdout;
        assert!(
            String::from_utf8_lossy(&text).contains("metrics-addr"),
            "{shell}: the script lacks the agent's flags"
        );
        std::fs::write(&script, text).unwrap();
        let out = tool(shell, package)
            .args(&check)
            .arg(&script)
            .output()
            .unwrap();
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{shell} {check:?} rota.{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// groff's rendering of a man page, failing on any warning (-ww) or error.
fn groff(page: &Path) -> String {
    let out = tool("groff", "groff")
        // -k: preconv, as man-db runs it, for the pages' UTF-8 (em dashes, arrows).
        .args(["-k", "-man", "-Tutf8", "-ww"])
        .arg(page)
        .env("LC_ALL", "C.UTF-8")
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "groff {}: {}",
        page.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    // Bold and underline come as overstrikes in some groff versions: drop them.
    let text = String::from_utf8(out.stdout).unwrap();
    let mut plain = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if chars.peek() == Some(&'\u{8}') {
            chars.next();
            continue;
        }
        plain.push(c);
    }
    plain
}

#[test]
fn the_man_pages_render_and_list_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("rota.1");
    std::fs::write(&page, rota(&["man"]).stdout).unwrap();
    let text = groff(&page);
    assert!(
        text.contains("rota - Keeps Kubernetes node pools"),
        "{text}"
    );
    let cli = rota::cli::Cli::command();
    for sub in cli.get_subcommands() {
        assert!(
            text.contains(&format!("rota-{}(1)", sub.get_name())),
            "rota(1) does not list {}: {text}",
            sub.get_name()
        );
    }

    let pages = dir.path().join("man1");
    rota(&["man", "--dir", pages.to_str().unwrap()]);
    for sub in cli.get_subcommands() {
        let p = pages.join(format!("rota-{}.1", sub.get_name()));
        assert!(p.is_file(), "no {}", p.display());
        groff(&p);
    }
    let out = tool("man", "man-db")
        .args(["-l", "-P", "cat"])
        .arg(pages.join("rota-agent.1"))
        .env("MANWIDTH", "100")
        .env("LC_ALL", "C.UTF-8")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "man -l rota-agent.1: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let agent = String::from_utf8_lossy(&out.stdout);
    for flag in ["--cluster", "--repo", "--metrics-addr", "--cloud"] {
        assert!(agent.contains(flag), "rota-agent(1) lacks {flag}: {agent}");
    }
}
