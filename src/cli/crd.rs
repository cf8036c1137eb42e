//! `rota crd`: print the NodePoolRotation CustomResourceDefinition as YAML
//! (`rota crd | kubectl apply -f -`).

use std::process::ExitCode;

use clap::Args as ClapArgs;

#[derive(ClapArgs, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> ExitCode {
    print!("{}", crate::kube::crd::definition_yaml());
    ExitCode::SUCCESS
}
