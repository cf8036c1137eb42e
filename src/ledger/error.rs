//! How reading or appending to a ledger fails ([`LedgerError`]), naming the ledger's ref.
//! Every file of the ledger returns it; it lives below them.

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("ledger {ledger_ref}: {message}")]
    Git { ledger_ref: String, message: String },
    #[error("ledger {ledger_ref} at {commit}: {source}")]
    Unreadable {
        ledger_ref: String,
        commit: String,
        source: rota_core::ledger::LineError,
    },
    #[error("ledger {ledger_ref}: signing the append: {message}")]
    Sign { ledger_ref: String, message: String },
}

impl LedgerError {
    pub(crate) fn git(ledger_ref: &str) -> impl Fn(git2::Error) -> LedgerError + '_ {
        move |e| LedgerError::Git {
            ledger_ref: ledger_ref.to_string(),
            message: e.message().to_string(),
        }
    }
}
