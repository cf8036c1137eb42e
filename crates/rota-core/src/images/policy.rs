//! The AWS IAM policy `rota images discover` needs for one fleet (`--print-policy`):
//! `ec2:DescribeImages` (which IAM cannot scope to resources) and `ssm:GetParameter` on
//! exactly the parameters the fleet's `ssmParameter` sources name, never `*`. A role that may
//! read every parameter of its account reads the account's secrets too, and the fleet repo
//! that names the parameters is changed by pull requests.
//!
//! A parameter under `/aws/service/` is AWS's public namespace: its ARN has no account
//! (`arn:aws:ssm:*::parameter/aws/service/...`). Any other is the account's own
//! (`arn:aws:ssm:*:ACCOUNT:parameter/...`). `{arch}` becomes `*`; the region is `*` because
//! discovery reads each parameter in every region the fleet uses.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::fleet::Fleet;

/// The policy document for `fleet`; `account` fills the ARNs of the account's own
/// parameters (`ACCOUNT` when not given, for the reader to replace).
pub fn aws_discovery_policy(fleet: &Fleet, account: Option<&str>) -> Value {
    let account = account.unwrap_or("ACCOUNT");
    let mut parameters = BTreeSet::new();
    let mut any_aws = false;
    for channel in fleet.spec.images.values() {
        let Some(aws) = channel.source.as_ref().and_then(|s| s.aws.as_ref()) else {
            continue;
        };
        any_aws = true;
        if let Some(p) = &aws.ssm_parameter {
            let name = p.replace("{arch}", "*");
            let owner = if name.starts_with("/aws/service/") {
                ""
            } else {
                account
            };
            parameters.insert(format!("arn:aws:ssm:*:{owner}:parameter{name}"));
        }
    }
    let mut statements = Vec::new();
    if any_aws {
        statements.push(json!({
            "Sid": "DiscoverImages",
            "Effect": "Allow",
            "Action": "ec2:DescribeImages",
            "Resource": "*",
        }));
    }
    if !parameters.is_empty() {
        statements.push(json!({
            "Sid": "ReadTheFleetsImageParameters",
            "Effect": "Allow",
            "Action": "ssm:GetParameter",
            "Resource": parameters.into_iter().collect::<Vec<_>>(),
        }));
    }
    json!({"Version": "2012-10-17", "Statement": statements})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::{SourceFile, load_files};

    const FLEET: &str =
        include_str!("../../../../tests/fixtures/fleet/valid/images-per-region.yaml");

    #[test]
    fn get_parameter_is_scoped_to_the_parameters_the_fleet_names() {
        let mut f = load_files(&[SourceFile::new("fleet.yaml", FLEET)]).unwrap();
        let mut own = f.spec.images["general"].clone();
        own.source
            .as_mut()
            .unwrap()
            .aws
            .as_mut()
            .unwrap()
            .ssm_parameter = Some("/acme/images/{arch}/latest".into());
        f.spec.images.insert("own".into(), own);
        let p = aws_discovery_policy(&f, Some("123456789012"));
        let get = &p["Statement"][1];
        assert_eq!(get["Action"], "ssm:GetParameter");
        assert_eq!(
            get["Resource"],
            json!([
                "arn:aws:ssm:*:123456789012:parameter/acme/images/*/latest",
                "arn:aws:ssm:*::parameter/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/*/standard/recommended/image_id",
            ])
        );
        assert_eq!(p["Statement"][0]["Action"], "ec2:DescribeImages");
    }
}
