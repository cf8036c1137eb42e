//! The rules of a channel's `source` that a JSON Schema cannot say: who may publish the
//! images `rota images discover` proposes. A name filter is a claim on a namespace that
//! anyone can publish into (every account can register a public AMI named
//! `acme-general-2026-11-3`), so it is only ever asked within owners a stranger cannot be:
//! account IDs, `self` (the account asking) and `amazon` (images AWS itself publishes; no
//! other account can register under that alias). `aws-marketplace` is refused: every
//! Marketplace seller publishes under it, so a name filter there is as open as no owner at
//! all. `aws-backup-vault` holds restored backups, not published builds.
//!
//! An SSM parameter needs no owner: a parameter name is either in the account's own
//! namespace (only the account writes it) or under `/aws/service/`, the public namespace only
//! AWS writes (the EKS, Bottlerocket and Amazon Linux parameters), both allowed by name.
//!
//! `rota validate` reports these at file:line, and discovery checks them again before it asks
//! EC2 anything (defence in depth: a query with no owner is never sent).

use super::model::AwsImageSource;

/// The owner aliases EC2 accepts that a stranger cannot publish under.
pub const SAFE_OWNER_ALIASES: [&str; 2] = ["self", "amazon"];

/// One owner of `source.aws.owners`: a 12-digit account ID, `self` or `amazon`.
pub fn check_aws_owner(owner: &str) -> Result<(), String> {
    if owner.len() == 12 && owner.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(());
    }
    if SAFE_OWNER_ALIASES.contains(&owner) {
        return Ok(());
    }
    let shown = crate::sanitize::line(owner);
    Err(match owner {
        "aws-marketplace" => "owner `aws-marketplace` is refused: every Marketplace seller \
             publishes under it, so anyone could publish an image this name filter matches; \
             name the publisher's account ID, or use an ssmParameter"
            .to_string(),
        "aws-backup-vault" => {
            "owner `aws-backup-vault` is refused: it holds restored backups, not published builds"
                .to_string()
        }
        _ => format!(
            "owner {shown:?} is not a 12-digit AWS account ID, `self` or `amazon` \
             (the owners no stranger can publish as)"
        ),
    })
}

/// Whether `parameter` is an SSM parameter name (`{arch}` allowed): SSM's own characters,
/// letters, digits, `_`, `.`, `-` and `/`.
pub fn check_ssm_parameter(parameter: &str) -> Result<(), String> {
    let bare = parameter.replace("{arch}", "");
    if bare
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'/'))
    {
        return Ok(());
    }
    Err(format!(
        "{:?} is not an SSM parameter name: letters, digits, `_`, `.`, `-` and `/` only \
         (`{{arch}}` is replaced by the architecture)",
        crate::sanitize::line(parameter)
    ))
}

/// Every problem of an AWS source, each with the JSON pointer below `source/aws` it is at.
pub fn aws_source_problems(src: &AwsImageSource) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(p) = &src.ssm_parameter
        && let Err(why) = check_ssm_parameter(p)
    {
        out.push(("/ssmParameter".to_string(), why));
    }
    if src.name_filter.is_some() {
        if src.owners.is_empty() {
            out.push((
                "/owners".to_string(),
                "a nameFilter needs owners: with none, EC2 answers every public AMI whose name \
                 matches, and a stranger's newer image would be proposed; list the publishing \
                 account IDs (or `self`, `amazon`)"
                    .to_string(),
            ));
        }
        for (i, owner) in src.owners.iter().enumerate() {
            if let Err(why) = check_aws_owner(owner) {
                out.push((format!("/owners/{i}"), why));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_filter(owners: &[&str]) -> AwsImageSource {
        AwsImageSource {
            ssm_parameter: None,
            name_filter: Some("acme-general-*".into()),
            owners: owners.iter().map(|o| o.to_string()).collect(),
        }
    }

    #[test]
    fn a_name_filter_is_asked_only_within_owners_no_stranger_can_be() {
        assert!(aws_source_problems(&name_filter(&["123456789012"])).is_empty());
        assert!(aws_source_problems(&name_filter(&["self", "amazon"])).is_empty());
        let none = aws_source_problems(&name_filter(&[]));
        assert_eq!(none.len(), 1);
        assert_eq!(none[0].0, "/owners");
        assert!(none[0].1.contains("a nameFilter needs owners"), "{none:?}");
        for bad in [
            "aws-marketplace",
            "aws-backup-vault",
            "12345678901",
            "acme",
            "",
        ] {
            let p = aws_source_problems(&name_filter(&["123456789012", bad]));
            assert_eq!(p.len(), 1, "{bad}: {p:?}");
            assert_eq!(p[0].0, "/owners/1", "{bad}");
        }
        assert!(
            check_aws_owner("\x1b]52;c;x\x07")
                .unwrap_err()
                .contains("\\u{1b}]52"),
            "a hostile owner is shown escaped"
        );
    }

    #[test]
    fn ssm_parameters_need_no_owner_and_are_names() {
        let ssm = |p: &str| AwsImageSource {
            ssm_parameter: Some(p.into()),
            ..Default::default()
        };
        let public = "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/{arch}/standard/recommended/image_id";
        assert!(aws_source_problems(&ssm(public)).is_empty());
        assert!(aws_source_problems(&ssm("/acme/images/general/{arch}")).is_empty());
        assert_eq!(aws_source_problems(&ssm("/acme/x y")).len(), 1);
    }
}
