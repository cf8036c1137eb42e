//! `rota images discover`: for each channel with a `source`, the newest image per cloud,
//! region and arch the fleet's pools need; whether it is one build everywhere and has baked
//! (`minAge`); with `--write`, the commit that adds it as a version and pins it on the first
//! wave (on the current branch, or on a new `--branch` for a pull request). Run again, it
//! finds the version there and changes nothing.
//!
//! Exit codes: 0 a version was proposed (and, with `--write`, committed) or every channel is
//! up to date; 1 only waits (a build still baking, a region that has not got it yet);
//! 2 an error (a lookup failed, the repo cannot be read or edited): nothing written.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use rota_core::images::Outcome;

use super::cloud::CloudArgs;
use crate::discovery::{self, WriteTo};

#[derive(Args, Debug)]
pub struct ImagesArgs {
    #[command(subcommand)]
    pub command: ImagesCommand,
}

#[derive(Subcommand, Debug)]
pub enum ImagesCommand {
    /// Find each channel's newest image where the fleet needs it; with --write, add it as a
    /// version pinned on the first wave.
    Discover(DiscoverArgs),
}

#[derive(Args, Debug)]
pub struct DiscoverArgs {
    /// The fleet repo.
    #[arg(long, env = "ROTA_REPO", default_value = ".")]
    pub repo: PathBuf,
    /// The commit to read the fleet from (with --write: the tip of the branch to commit on).
    #[arg(long, default_value = "HEAD")]
    pub rev: String,
    /// The fleet's directory inside the repo.
    #[arg(long = "path")]
    pub subdir: Option<PathBuf>,
    /// Only this channel (default: every channel with a source).
    #[arg(long)]
    pub channel: Option<String>,
    /// Commit the new versions, each pinned on the first wave.
    #[arg(long)]
    pub write: bool,
    /// With --write: commit on this new branch (for a pull request) instead of the current one.
    #[arg(long, requires = "write")]
    pub branch: Option<String>,
    /// Propose a build younger than the channel's minAge, for this reason (a CVE), which
    /// the commit message records.
    #[arg(long, value_name = "REASON")]
    pub security: Option<String>,
    /// Propose each new version as a pull request instead: commit it on branch
    /// `rota/images/<channel>` (rewritten from --rev on each run), push that branch to
    /// --remote, and open its pull request on the forge (--github-repo, --gitlab-project or
    /// --gitea-repo), or update the one open for it. Without a forge, only the branch.
    #[arg(long, conflicts_with_all = ["write", "branch"])]
    pub open_pr: bool,
    /// Print the AWS IAM policy discovery needs for this fleet and exit (no cloud is asked):
    /// `ec2:DescribeImages`, and `ssm:GetParameter` on exactly the parameters the fleet names.
    /// The account's own parameters are under ACCOUNT (default: the word ACCOUNT, to replace).
    #[arg(long, value_name = "ACCOUNT", num_args = 0..=1, default_missing_value = "ACCOUNT")]
    pub print_policy: Option<String>,
    #[command(flatten)]
    pub propose: super::forge::ProposeArgs,
    #[command(flatten)]
    pub cloud: CloudArgs,
}

pub fn run(args: ImagesArgs) -> ExitCode {
    match args.command {
        ImagesCommand::Discover(a) => discover(a),
    }
}

fn discover(args: DiscoverArgs) -> ExitCode {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rota: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(discover_at(&args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rota: {e}");
            ExitCode::from(2)
        }
    }
}

async fn discover_at(args: &DiscoverArgs) -> Result<ExitCode, String> {
    let (files, _, commit) =
        crate::source::read::read_git(&args.repo, &args.rev, args.subdir.as_deref())
            .map_err(|d| d.to_string())?;
    let fleet = rota_core::fleet::load_files(&files).map_err(|d| d.to_string())?;
    if let Some(account) = &args.print_policy {
        let policy = rota_core::images::policy::aws_discovery_policy(&fleet, Some(account));
        println!(
            "{}",
            serde_json::to_string_pretty(&policy).map_err(|e| e.to_string())?
        );
        return Ok(ExitCode::SUCCESS);
    }
    // The simulated cloud of `rota sim serve` when the kubeconfig names one (or
    // --cloud-endpoint), else the real providers with the platform's credentials.
    let kubeconfig = kube::config::Kubeconfig::read().ok().map(|k| (k, None));
    let (clouds, _) = super::cloud::build(&args.cloud, kubeconfig.as_ref())?;
    let now = chrono::Utc::now();
    let reports = discovery::discover(
        &fleet,
        clouds.as_ref(),
        args.channel.as_deref(),
        now,
        args.security.as_deref(),
    )
    .await?;
    if reports.is_empty() {
        println!("no channel has a source: add spec.images.<channel>.source (docs/fleet-repo.md)");
        return Ok(ExitCode::SUCCESS);
    }
    for r in &reports {
        println!("{}", discovery::describe(r, now));
    }
    if reports.iter().any(|r| r.result.is_err()) {
        return Err("nothing written: a lookup failed".into());
    }
    let proposed = reports
        .iter()
        .any(|r| matches!(r.result, Ok(Outcome::Propose(_))));
    let waiting = reports.iter().any(|r| {
        matches!(
            r.result,
            Ok(Outcome::Bake { .. } | Outcome::Mismatch { .. })
        )
    });
    if !proposed {
        return Ok(if waiting {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        });
    }
    if args.open_pr {
        let (forge, base) = args.propose.resolve(&args.repo)?;
        let to = crate::discovery::OpenPr {
            parent: &commit,
            subdir: args.subdir.as_deref(),
            at: crate::promotion::propose::Where {
                repo: &args.repo,
                remote: crate::promotion::propose::Remote::Named(&args.propose.remote),
                base: &base,
                forge: forge.as_ref(),
            },
        };
        for line in discovery::open_prs(&files, &fleet, &reports, &to).await? {
            println!("{line}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !args.write {
        println!("nothing written: --write commits the new versions, --open-pr proposes them");
        return Ok(ExitCode::SUCCESS);
    }
    let to = WriteTo {
        repo: &args.repo,
        parent: &commit,
        subdir: args.subdir.as_deref(),
        target: match &args.branch {
            Some(b) => crate::discovery::Target::NewBranch(b.clone()),
            None => crate::discovery::Target::CurrentBranch,
        },
    };
    if let Some(w) = discovery::write(&files, &fleet, &reports, &to)? {
        println!("[{} {}] {}", w.branch, &w.id.to_string()[..7], w.title);
        match &args.branch {
            Some(b) => println!("push it and open a pull request: git push origin {b}"),
            None => println!("push it: the first wave takes the new version (git push)"),
        }
    }
    Ok(ExitCode::SUCCESS)
}
