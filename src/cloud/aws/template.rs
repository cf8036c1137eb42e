//! Which launch template version an Auto Scaling group boots from, and how to point it at
//! another: the pure part of `set_image` and `describe`.
//!
//! A group names its template either directly (`LaunchTemplate`) or inside a mixed-instances
//! policy (`MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification`), with a
//! version that is a number, `$Latest`, `$Default` or absent (= `$Default`). rota changes the
//! image by creating a new version from the current one with only `ImageId` changed, then
//! pinning the group to that version number: an explicit number changes this group only,
//! even when other groups share the template, and makes what the group boots unambiguous.

use aws_sdk_autoscaling::types::{
    AutoScalingGroup, LaunchTemplate, LaunchTemplateSpecification, MixedInstancesPolicy,
};

use crate::cloud::Lifecycle;

/// The template a group boots from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateRef {
    /// `LaunchTemplateId` when the group names one, else `None`.
    pub id: Option<String>,
    /// `LaunchTemplateName` when the group names the template by name.
    pub name: Option<String>,
    /// As the group holds it: a number, `$Latest` or `$Default`.
    pub version: String,
    /// The template sits in the group's mixed-instances policy.
    pub in_mixed_instances_policy: bool,
}

/// Why a group's template cannot be read or changed by rota.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported(pub String);

/// The template and version the group launches instances from.
pub fn group_template(g: &AutoScalingGroup) -> Result<TemplateRef, Unsupported> {
    if let Some(spec) = g.launch_template() {
        return from_spec(spec, false);
    }
    if let Some(mip) = g.mixed_instances_policy() {
        let lt = mip.launch_template().ok_or_else(|| {
            Unsupported("its mixed-instances policy names no launch template".into())
        })?;
        // Overrides that bring their own template or image would boot something rota does
        // not change: refuse rather than rotate onto a half-updated group.
        for o in lt.overrides() {
            if o.launch_template_specification().is_some() {
                return Err(Unsupported(format!(
                    "its mixed-instances policy overrides the launch template for instance type {}; \
                     rota changes one template per group",
                    o.instance_type().unwrap_or("(by requirements)")
                )));
            }
            if o.image_id().is_some() {
                return Err(Unsupported(format!(
                    "its mixed-instances policy overrides the image for instance type {}; \
                     rota changes the image in the launch template",
                    o.instance_type().unwrap_or("(by requirements)")
                )));
            }
        }
        let spec = lt.launch_template_specification().ok_or_else(|| {
            Unsupported("its mixed-instances policy names no launch template".into())
        })?;
        return from_spec(spec, true);
    }
    if let Some(lc) = g.launch_configuration_name() {
        return Err(Unsupported(format!(
            "it uses the launch configuration {lc}; rota needs a launch template (launch \
             configurations cannot be versioned, and AWS has retired them for new accounts)"
        )));
    }
    Err(Unsupported("it names no launch template".into()))
}

fn from_spec(
    spec: &LaunchTemplateSpecification,
    in_mixed_instances_policy: bool,
) -> Result<TemplateRef, Unsupported> {
    let id = spec.launch_template_id().map(str::to_string);
    let name = spec.launch_template_name().map(str::to_string);
    if id.is_none() && name.is_none() {
        return Err(Unsupported(
            "its launch template specification has neither an ID nor a name".into(),
        ));
    }
    Ok(TemplateRef {
        id,
        name,
        version: spec.version().unwrap_or("$Default").to_string(),
        in_mixed_instances_policy,
    })
}

/// The mixed-instances policy with its launch template pinned to `template_id` version
/// `version`, everything else (overrides, instances distribution) as it was: Auto Scaling
/// replaces the policy it is given, so the whole policy goes back.
pub fn repoint_mixed_instances_policy(
    mip: &MixedInstancesPolicy,
    template_id: &str,
    version: i64,
) -> MixedInstancesPolicy {
    let spec = LaunchTemplateSpecification::builder()
        .launch_template_id(template_id)
        .version(version.to_string())
        .build();
    let old = mip.launch_template();
    let lt = LaunchTemplate::builder()
        .launch_template_specification(spec)
        .set_overrides(
            old.map(|l| l.overrides().to_vec())
                .filter(|o| !o.is_empty()),
        )
        .build();
    MixedInstancesPolicy::builder()
        .launch_template(lt)
        .set_instances_distribution(mip.instances_distribution().cloned())
        .build()
}

/// The plain launch template specification pinned to `version`.
pub fn pinned_spec(template_id: &str, version: i64) -> LaunchTemplateSpecification {
    LaunchTemplateSpecification::builder()
        .launch_template_id(template_id)
        .version(version.to_string())
        .build()
}

/// An Auto Scaling lifecycle state as rota sees it; `None` for instances that are no longer
/// the group's (terminated, detached) or not in it yet (warm pool).
///
/// Standby counts as in service: the machine runs and its node stays registered, so it
/// still has to be rotated. A state added to the API later is taken as `Pending`: it
/// counts against capacity, and rota waits for it rather than drain its node.
pub fn lifecycle(state: &str) -> Option<Lifecycle> {
    match state {
        "Terminated" | "Detached" => None,
        s if s.starts_with("Warmed:") => None,
        "InService" | "Standby" | "EnteringStandby" => Some(Lifecycle::InService),
        s if s.starts_with("Terminating") || s == "Detaching" => Some(Lifecycle::Terminating),
        _ => Some(Lifecycle::Pending),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_autoscaling::types::{InstancesDistribution, LaunchTemplateOverrides};

    fn spec(version: Option<&str>) -> LaunchTemplateSpecification {
        LaunchTemplateSpecification::builder()
            .launch_template_id("lt-0abc")
            .set_version(version.map(str::to_string))
            .build()
    }

    #[test]
    fn a_plain_template_without_version_means_default() {
        let g = AutoScalingGroup::builder()
            .launch_template(spec(None))
            .build();
        let t = group_template(&g).unwrap();
        assert_eq!(t.id.as_deref(), Some("lt-0abc"));
        assert_eq!(t.version, "$Default");
        assert!(!t.in_mixed_instances_policy);
    }

    #[test]
    fn a_mixed_instances_policy_template_is_found_and_repointed_keeping_the_rest() {
        let mip = MixedInstancesPolicy::builder()
            .launch_template(
                LaunchTemplate::builder()
                    .launch_template_specification(spec(Some("$Latest")))
                    .overrides(
                        LaunchTemplateOverrides::builder()
                            .instance_type("m6i.large")
                            .build(),
                    )
                    .overrides(
                        LaunchTemplateOverrides::builder()
                            .instance_type("m7i.large")
                            .build(),
                    )
                    .build(),
            )
            .instances_distribution(
                InstancesDistribution::builder()
                    .on_demand_base_capacity(2)
                    .spot_allocation_strategy("price-capacity-optimized")
                    .build(),
            )
            .build();
        let g = AutoScalingGroup::builder()
            .mixed_instances_policy(mip.clone())
            .build();
        let t = group_template(&g).unwrap();
        assert_eq!(t.version, "$Latest");
        assert!(t.in_mixed_instances_policy);
        let new = repoint_mixed_instances_policy(&mip, "lt-0abc", 7);
        let lt = new.launch_template().unwrap();
        assert_eq!(
            lt.launch_template_specification().unwrap().version(),
            Some("7")
        );
        assert_eq!(lt.overrides().len(), 2);
        assert_eq!(new.instances_distribution(), mip.instances_distribution());
    }

    #[test]
    fn overrides_with_their_own_template_or_image_are_refused() {
        let mip = |o: LaunchTemplateOverrides| {
            MixedInstancesPolicy::builder()
                .launch_template(
                    LaunchTemplate::builder()
                        .launch_template_specification(spec(None))
                        .overrides(o)
                        .build(),
                )
                .build()
        };
        for o in [
            LaunchTemplateOverrides::builder()
                .instance_type("m7g.large")
                .launch_template_specification(spec(Some("3")))
                .build(),
            LaunchTemplateOverrides::builder()
                .instance_type("m7g.large")
                .image_id("ami-0arm")
                .build(),
        ] {
            let g = AutoScalingGroup::builder()
                .mixed_instances_policy(mip(o))
                .build();
            let e = group_template(&g).unwrap_err();
            assert!(e.0.contains("m7g.large"), "{e:?}");
        }
    }

    #[test]
    fn launch_configurations_are_refused_with_the_reason() {
        let g = AutoScalingGroup::builder()
            .launch_configuration_name("old-lc")
            .build();
        assert!(group_template(&g).unwrap_err().0.contains("old-lc"));
    }

    #[test]
    fn lifecycle_states_map_to_what_rota_needs() {
        use Lifecycle::*;
        for (s, want) in [
            ("Pending", Some(Pending)),
            ("Pending:Wait", Some(Pending)),
            ("Pending:Proceed", Some(Pending)),
            ("Quarantined", Some(Pending)),
            ("InService", Some(InService)),
            ("Standby", Some(InService)),
            ("Terminating", Some(Terminating)),
            ("Terminating:Wait", Some(Terminating)),
            ("Terminating:Proceed", Some(Terminating)),
            ("Detaching", Some(Terminating)),
            ("Terminated", None),
            ("Detached", None),
            ("Warmed:Running", None),
            ("SomethingNew", Some(Pending)),
        ] {
            assert_eq!(lifecycle(s), want, "{s}");
        }
    }
}
