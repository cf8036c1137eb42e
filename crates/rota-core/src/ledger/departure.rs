//! rota's own leaves: the drains and terminations the controller carried out, as the ledger
//! attributes them.
//!
//! The agent looks at its nodes every `--resync`; a batch can cordon, drain and terminate a
//! node between two looks (the demo runs ten fleet minutes a look), and a node seen only
//! "there" then "gone" would read as `lost`. The controller therefore tells the recorder
//! what it did, as it does it: "cordoned n3 for a drain, by rota, at t, in the rotation to
//! general@2026.11.3" and "terminated i-7 at t". [`super::diff_with`] matches these with the
//! open lives (by node name for a drain, by instance for a terminate) so that a life's
//! leave is rota's whenever rota caused it, and `lost` only when nothing of rota's explains
//! it.

use chrono::{DateTime, Utc};

use super::life::Life;

/// What rota did to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leave {
    /// Cordoned it to drain it (`Cordon`).
    Drain,
    /// Terminated its instance (`Terminate`).
    Terminate,
}

/// One of rota's leaves, as the controller recorded it right after the action succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Departure {
    pub leave: Leave,
    /// The node (a drain's; a terminate's when it names one).
    pub node: Option<String>,
    /// The instance (a terminate's).
    pub instance: Option<String>,
    pub at: DateTime<Utc>,
    /// Who cordoned (the `rota.dev/cordoned-by` value the cordon wrote).
    pub by: String,
    /// The rotation it was done for (`pool:channel@version`, `pool:rollback to ...`).
    pub rotation: Option<String>,
}

impl Departure {
    /// Whether this departure is about `life`: a drain by the node's name (a cordon names no
    /// instance) made while the life was open, a terminate by its instance.
    fn is_of(&self, life: &Life) -> bool {
        let after_join = self.at >= life.joined || life.joined_before.is_some();
        match self.leave {
            Leave::Drain => after_join && self.node.as_deref() == Some(&life.node),
            Leave::Terminate => self.instance.as_deref() == Some(&life.instance),
        }
    }
}

/// The first drain of `life` among `departures`.
pub fn drain_of<'d>(life: &Life, departures: &'d [Departure]) -> Option<&'d Departure> {
    departures
        .iter()
        .find(|d| d.leave == Leave::Drain && d.is_of(life))
}

/// The terminate of `life`'s instance among `departures`.
pub fn terminate_of<'d>(life: &Life, departures: &'d [Departure]) -> Option<&'d Departure> {
    departures
        .iter()
        .find(|d| d.leave == Leave::Terminate && d.is_of(life))
}
