//! How the demo runs ([`DemoOptions`]): its pace ([`Pace`]), where it keeps its folder,
//! whether it serves the fleet over HTTP and how long a step may take. The story holds
//! them; they live below it.

use std::path::PathBuf;
use std::time::Duration;

/// How fleet time relates to wall time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// Paused tokio time that jumps ahead whenever the fleet is idle (the default): the
    /// runtime must be a current-thread runtime with time paused (see `cli::demo`).
    Jump,
    /// Real time, this many times faster.
    Speed(f64),
}

#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub pace: Pace,
    /// Keep the repo (and the kubeconfig) in this folder; otherwise a temporary one.
    pub keep: Option<PathBuf>,
    /// Serve the simulated clusters and cloud over loopback HTTP (a kubeconfig in the folder).
    pub http: bool,
    /// After the story, keep serving until Ctrl-C.
    pub serve: bool,
    /// Redraw a table in place (a terminal) instead of printing one line per change.
    pub tty: bool,
    /// Give up when one step takes longer than this in wall time.
    pub step_limit: Duration,
    /// With [`Pace::Jump`]: the speed factor of the simulation and the controllers' clock.
    pub jump_speed: f64,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            pace: Pace::Jump,
            keep: None,
            http: false,
            serve: false,
            tty: false,
            step_limit: Duration::from_secs(300),
            jump_speed: 600.0,
        }
    }
}
