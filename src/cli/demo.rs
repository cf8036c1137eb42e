//! `rota demo [--speed X] [--keep DIR] [--serve]`: the GitOps story on a simulated fleet (see
//! [`crate::demo`] and docs/demo.md).
//!
//! Built with the `sim` Cargo feature only (on by default; the image leaves it out).
#![cfg(feature = "sim")]

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::demo::{DemoOptions, Pace};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// `max` (default): fleet time jumps ahead whenever the fleet only waits on timers (soaks,
    /// boots), so hours of policy play in seconds. A number X: real time, X times faster.
    #[arg(long, default_value = "max")]
    pub speed: String,
    /// Keep the fleet repo (and a kubeconfig for kubectl) in this folder, which must be empty
    /// or absent; the simulated clusters are then served over loopback HTTP.
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// After the story, keep serving the simulated fleet until Ctrl-C (implies serving over
    /// loopback; with a temporary folder unless --keep).
    #[arg(long)]
    pub serve: bool,
    /// Give up when one step of the story takes longer than this many seconds of wall time.
    #[arg(long, default_value_t = 300)]
    pub step_limit: u64,
    /// With `--speed max`: the simulation's speed factor (fleet seconds per tick of the
    /// agents' and controllers' loops); tuning only.
    #[arg(long, default_value_t = 600.0, hide = true)]
    pub jump_speed: f64,
}

/// The pace a `--speed` value asks for.
pub fn pace(speed: &str) -> Result<Pace, String> {
    if speed == "max" {
        return Ok(Pace::Jump);
    }
    match speed.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(Pace::Speed(x)),
        _ => Err(format!(
            "--speed must be `max` or a positive number, got {speed:?}"
        )),
    }
}

pub fn run(args: DemoArgs) -> ExitCode {
    let pace = match pace(&args.speed) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rota: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = DemoOptions {
        pace,
        http: args.keep.is_some() || args.serve,
        keep: args.keep,
        serve: args.serve,
        tty: std::io::stdout().is_terminal(),
        step_limit: std::time::Duration::from_secs(args.step_limit),
        jump_speed: args.jump_speed,
    };
    // Paused time needs a current-thread runtime; the real-time pace uses every core.
    let rt = match pace {
        Pace::Jump => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build(),
        Pace::Speed(_) => tokio::runtime::Runtime::new(),
    };
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rota: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let mut out = std::io::stdout();
    match rt.block_on(crate::demo::run(opts, &mut out)) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rota demo: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speed_is_max_or_a_positive_number() {
        assert_eq!(pace("max").unwrap(), Pace::Jump);
        assert_eq!(pace("60").unwrap(), Pace::Speed(60.0));
        assert!(pace("0").is_err());
        assert!(
            pace("fast")
                .unwrap_err()
                .contains("`max` or a positive number")
        );
    }
}
