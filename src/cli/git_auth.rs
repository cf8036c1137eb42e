//! How a command that mirrors the fleet repo by URL authenticates to it: an SSH key checked
//! against a known_hosts file, an HTTPS token, or nothing. One set of flags for `rota agent`,
//! `rota ui` and `rota propose` (which also pushes its proposal branches with them).

use std::path::PathBuf;

use clap::Args;

use super::secret::secret_from;
use crate::source::Auth;

#[derive(Args, Debug, Clone, Default)]
pub struct GitAuthArgs {
    /// SSH private key (ssh URLs); needs --known-hosts.
    #[arg(long, env = "ROTA_SSH_KEY", requires = "known_hosts")]
    pub ssh_key: Option<PathBuf>,
    /// known_hosts file the SSH server's key must be listed in.
    #[arg(long, env = "ROTA_KNOWN_HOSTS")]
    pub known_hosts: Option<PathBuf>,
    /// File holding the passphrase of --ssh-key, else the environment variable
    /// ROTA_SSH_KEY_PASSPHRASE (neither: the key has none). Never logged.
    #[arg(long, env = "ROTA_SSH_KEY_PASSPHRASE_FILE", requires = "ssh_key")]
    pub ssh_key_passphrase_file: Option<PathBuf>,
    /// File holding an HTTPS token (https URLs), else the environment variable ROTA_TOKEN.
    /// Never logged.
    #[arg(long, env = "ROTA_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// User name sent with the token (`x-access-token` for GitHub, `oauth2` for GitLab).
    #[arg(long, env = "ROTA_TOKEN_USER", default_value = "x-access-token")]
    pub token_user: String,
}

impl GitAuthArgs {
    /// The credentials these flags (and `env`) name: an SSH key with its passphrase, an HTTPS
    /// token (--token-file or ROTA_TOKEN), or none.
    pub fn auth(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Auth, String> {
        if let Some(key) = &self.ssh_key {
            return Ok(Auth::SshKey {
                user: None,
                private_key: key.clone(),
                public_key: None,
                passphrase: secret_from(
                    self.ssh_key_passphrase_file.as_deref(),
                    "ROTA_SSH_KEY_PASSPHRASE",
                    env,
                )?,
                known_hosts: self.known_hosts.clone().unwrap_or_default(),
            });
        }
        Ok(
            match secret_from(self.token_file.as_deref(), "ROTA_TOKEN", env)? {
                Some(token) => Auth::HttpsToken {
                    username: self.token_user.clone(),
                    token,
                },
                None => Auth::None,
            },
        )
    }
}
