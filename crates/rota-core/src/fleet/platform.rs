//! The two facts about where a pool runs that every other fleet file builds on: its cloud
//! ([`Cloud`]) and its CPU architecture ([`Arch`]). They sit below the model, the owners and
//! the resolved values (each imports them from here; `resolved` re-exports them under their
//! old paths), so that none of those files has to import another to name a cloud.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A pool's CPU architecture, spelt as AWS and the EKS SSM parameters spell it.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub enum Arch {
    #[default]
    #[serde(rename = "x86_64")]
    X86_64,
    #[serde(rename = "arm64")]
    Arm64,
}

impl Arch {
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Arm64 => "arm64",
        }
    }

    pub fn is_default(&self) -> bool {
        *self == Arch::X86_64
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The three clouds rota drives.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Cloud {
    Aws,
    Gcp,
    Azure,
}

impl std::fmt::Display for Cloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Cloud::Aws => "aws",
            Cloud::Gcp => "gcp",
            Cloud::Azure => "azure",
        })
    }
}
