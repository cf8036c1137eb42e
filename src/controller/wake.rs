//! What wakes the controller between passes besides its timers ([`Wake`]): the
//! NodePoolRotations' watch sends it, the wait loop receives it. It lives below both.

/// A wake-up sent to the controller's wait loop.
pub(super) enum Wake {
    /// A NodePoolRotation was added, or its spec (generation) changed.
    Npr(String),
}
