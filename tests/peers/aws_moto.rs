//! rota's AWS provider against moto: what the generic conformance suite cannot say (mixed
//! instances policies, launch template versions, unsupported groups, transport failures),
//! and a whole rotation driven by the real controller, with the simulated Kubernetes side
//! registering moto's instances as nodes (`rota::sim::registrar`).
//!
//! Real time throughout (moto answers over HTTP); the simulated cluster and the controller
//! run `SPEED` times faster than real time so that a rotation takes seconds.

use crate::support::moto;
use crate::support::sim_fleet;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_autoscaling::types::{
    InstancesDistribution, LaunchTemplate, LaunchTemplateOverrides, LaunchTemplateSpecification,
    MixedInstancesPolicy,
};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use rota::cloud::aws::AwsNodeGroups;
use rota::cloud::retry::RetryPolicy;
use rota::cloud::{CloudErrorKind, GroupRef, Lifecycle, NodeGroups};
use rota::controller::{Config, Controller};
use rota::fleet::duration::GoDuration;
use rota::fleet::resolved::{BatchSize, Cloud, EffectivePolicy};
use rota::kube::crd::{self, NodePoolRotation, NodePoolRotationSpec};
use rota::rotate::Phase;
use rota::sim::faults::FaultProfile;
use rota::sim::registrar::ExternalCluster;
use rota::sim::scenario::{ClusterScenario, PoolScenario, Scenario, WorkloadProfile};
use tokio::time::Instant;

const SPEED: f64 = 30.0;

fn group(name: &str) -> GroupRef {
    GroupRef::Aws {
        region: moto::REGION.into(),
        auto_scaling_group: name.into(),
    }
}

#[tokio::test]
async fn a_mixed_instances_group_is_read_and_repointed_keeping_its_policy() {
    let m = moto::Moto::start();
    let (ec2, asg, p) = (m.ec2().await, m.asg().await, m.node_groups().await);
    let (old, new) = (
        moto::register_ami(&ec2, "old").await,
        moto::register_ami(&ec2, "new").await,
    );
    let lt_id = ec2
        .create_launch_template()
        .launch_template_name("mixed-lt")
        .launch_template_data(
            aws_sdk_ec2::types::RequestLaunchTemplateData::builder()
                .image_id(&old)
                .instance_type(aws_sdk_ec2::types::InstanceType::M6iLarge)
                .build(),
        )
        .send()
        .await
        .unwrap()
        .launch_template()
        .unwrap()
        .launch_template_id()
        .unwrap()
        .to_string();
    let policy = MixedInstancesPolicy::builder()
        .launch_template(
            LaunchTemplate::builder()
                .launch_template_specification(
                    LaunchTemplateSpecification::builder()
                        .launch_template_id(&lt_id)
                        .version("$Default")
                        .build(),
                )
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
                .on_demand_base_capacity(1)
                .on_demand_percentage_above_base_capacity(100)
                .build(),
        )
        .build();
    asg.create_auto_scaling_group()
        .auto_scaling_group_name("mixed")
        .mixed_instances_policy(policy)
        .min_size(0)
        .max_size(3)
        .desired_capacity(2)
        .availability_zones("us-east-1a")
        .send()
        .await
        .unwrap();
    let g = group("mixed");
    let s = p.describe(&g).await.unwrap();
    assert_eq!(s.template_image, old);
    assert_eq!(s.instances.len(), 2);
    assert!(s.instances.iter().all(|i| i.image == old));

    p.set_image(&g, &new).await.unwrap();
    p.set_image(&g, &new).await.unwrap();
    assert_eq!(p.describe(&g).await.unwrap().template_image, new);
    let raw = asg
        .describe_auto_scaling_groups()
        .auto_scaling_group_names("mixed")
        .send()
        .await
        .unwrap();
    let mip = raw.auto_scaling_groups()[0]
        .mixed_instances_policy()
        .expect("still a mixed-instances group");
    let lt = mip.launch_template().unwrap();
    assert_eq!(
        lt.launch_template_specification().unwrap().version(),
        Some("2")
    );
    let types: Vec<_> = lt
        .overrides()
        .iter()
        .filter_map(|o| o.instance_type())
        .collect();
    assert_eq!(types, ["m6i.large", "m7i.large"], "overrides kept");
    assert_eq!(
        mip.instances_distribution()
            .and_then(|d| d.on_demand_base_capacity()),
        Some(1),
        "distribution kept"
    );
    // One new version, not one per call.
    let versions = ec2
        .describe_launch_template_versions()
        .launch_template_id(&lt_id)
        .send()
        .await
        .unwrap();
    assert_eq!(versions.launch_template_versions().len(), 2);
}

#[tokio::test]
async fn a_version_left_by_a_crash_is_reused_rather_than_duplicated() {
    let m = moto::Moto::start();
    let (ec2, asg, p) = (m.ec2().await, m.asg().await, m.node_groups().await);
    let (old, new) = (
        moto::register_ami(&ec2, "old").await,
        moto::register_ami(&ec2, "new").await,
    );
    let lt_id = moto::create_group(&ec2, &asg, "crashy", (0, 1, 2), &old).await;
    // Pin the group to version 1, then create version 2 with the new AMI as a set_image
    // that crashed before UpdateAutoScalingGroup would have.
    asg.update_auto_scaling_group()
        .auto_scaling_group_name("crashy")
        .launch_template(
            LaunchTemplateSpecification::builder()
                .launch_template_id(&lt_id)
                .version("1")
                .build(),
        )
        .send()
        .await
        .unwrap();
    ec2.create_launch_template_version()
        .launch_template_id(&lt_id)
        .source_version("1")
        .launch_template_data(
            aws_sdk_ec2::types::RequestLaunchTemplateData::builder()
                .image_id(&new)
                .instance_type(aws_sdk_ec2::types::InstanceType::T3Medium)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let g = group("crashy");
    assert_eq!(p.describe(&g).await.unwrap().template_image, old);
    p.set_image(&g, &new).await.unwrap();
    assert_eq!(p.describe(&g).await.unwrap().template_image, new);
    let versions = ec2
        .describe_launch_template_versions()
        .launch_template_id(&lt_id)
        .send()
        .await
        .unwrap();
    assert_eq!(
        versions.launch_template_versions().len(),
        2,
        "no third version"
    );
}

#[tokio::test]
async fn groups_rota_cannot_manage_and_unreachable_endpoints_say_why() {
    let m = moto::Moto::start();
    let (ec2, asg, p) = (m.ec2().await, m.asg().await, m.node_groups().await);
    let ami = moto::register_ami(&ec2, "old").await;
    asg.create_launch_configuration()
        .launch_configuration_name("legacy-lc")
        .image_id(&ami)
        .instance_type("t3.medium")
        .send()
        .await
        .unwrap();
    asg.create_auto_scaling_group()
        .auto_scaling_group_name("legacy")
        .launch_configuration_name("legacy-lc")
        .min_size(0)
        .max_size(1)
        .desired_capacity(0)
        .availability_zones("us-east-1a")
        .send()
        .await
        .unwrap();
    let e = p.set_image(&group("legacy"), &ami).await.unwrap_err();
    assert_eq!(e.kind, CloudErrorKind::Invalid);
    let text = e.to_string();
    assert!(
        text.contains("legacy-lc") && text.contains("aws:us-east-1/asg/legacy"),
        "{text}"
    );

    let gcp = GroupRef::Gcp {
        project: "p".into(),
        instance_group_manager: "m".into(),
        zone: Some("z".into()),
        region: None,
    };
    assert_eq!(
        p.describe(&gcp).await.unwrap_err().kind,
        CloudErrorKind::Invalid
    );

    // Nothing listens on port 1: a network failure, retryable, naming the call and group.
    let dead = AwsNodeGroups::from_env(
        Some("http://127.0.0.1:1".into()),
        RetryPolicy::no_retries(Duration::from_secs(10)),
    )
    .await;
    let e = dead.describe(&group("general")).await.unwrap_err();
    assert_eq!(e.kind, CloudErrorKind::Transient, "{e}");
    assert!(
        e.to_string()
            .starts_with("DescribeAutoScalingGroups on aws:us-east-1/asg/general"),
        "{e}"
    );
}

/// EC2 bases a new launch template version on `SourceVersion` and replaces only the fields
/// given; moto alone ignores `SourceVersion`, so this runs on moto as `moto_server.py` gives
/// it EC2's behaviour, and every version rota makes is held to the contract when `m` drops.
#[tokio::test]
async fn the_new_version_copies_the_groups_own_version_except_the_ami() {
    use aws_sdk_ec2::types::{InstanceType, RequestLaunchTemplateData};
    let m = moto::Moto::start();
    let (ec2, asg, p) = (m.ec2().await, m.asg().await, m.node_groups().await);
    let (old, new) = (
        moto::register_ami(&ec2, "old").await,
        moto::register_ami(&ec2, "new").await,
    );
    // Version 1, what the group runs: more than an image.
    let user_data = "IyEvYmluL2Jhc2gKZWNobyBqb2luIHRoZSBjbHVzdGVyCg==";
    let lt_id = ec2
        .create_launch_template()
        .launch_template_name("copied-lt")
        .launch_template_data(
            RequestLaunchTemplateData::builder()
                .image_id(&old)
                .instance_type(InstanceType::M6iLarge)
                .user_data(user_data)
                .key_name("nodes")
                .build(),
        )
        .send()
        .await
        .unwrap()
        .launch_template()
        .unwrap()
        .launch_template_id()
        .unwrap()
        .to_string();
    asg.create_auto_scaling_group()
        .auto_scaling_group_name("copied")
        .launch_template(
            LaunchTemplateSpecification::builder()
                .launch_template_id(&lt_id)
                .version("1")
                .build(),
        )
        .min_size(0)
        .max_size(2)
        .desired_capacity(1)
        .availability_zones("us-east-1a")
        .send()
        .await
        .unwrap();
    // Someone else's version 2 is $Latest: it must not be what rota copies.
    ec2.create_launch_template_version()
        .launch_template_id(&lt_id)
        .launch_template_data(
            RequestLaunchTemplateData::builder()
                .image_id(&old)
                .instance_type(InstanceType::T3Micro)
                .build(),
        )
        .version_description("someone else's experiment")
        .send()
        .await
        .unwrap();
    let g = group("copied");
    p.set_image(&g, &new).await.unwrap();
    assert_eq!(p.describe(&g).await.unwrap().template_image, new);
    let made = m
        .created_versions()
        .into_iter()
        .filter(|v| {
            v["description"]
                .as_str()
                .unwrap_or("")
                .starts_with("rota: ")
        })
        .collect::<Vec<_>>();
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(
        made[0]["sourceVersion"], "1",
        "the group's version, not $Latest"
    );
    assert_eq!(made[0]["givenFields"], serde_json::json!(["ImageId"]));
    // What EC2 holds for the new version: version 1's data with the new AMI.
    let v3 = ec2
        .describe_launch_template_versions()
        .launch_template_id(&lt_id)
        .versions("3")
        .send()
        .await
        .unwrap();
    let data = v3.launch_template_versions()[0]
        .launch_template_data()
        .unwrap();
    assert_eq!(data.image_id(), Some(new.as_str()));
    assert_eq!(data.instance_type(), Some(&InstanceType::M6iLarge));
    assert_eq!(data.key_name(), Some("nodes"));
    assert_eq!(data.user_data(), Some(user_data));
    assert!(m.launch_template_violations().is_empty());
}

/// `describe` asks EC2 to resolve a `resolve:ssm:` image ID (`ResolveAlias`); moto alone
/// ignores the flag, `moto_server.py` answers as EC2 does.
#[tokio::test]
async fn an_image_id_that_is_an_ssm_alias_reads_as_the_ami_it_names() {
    let m = moto::Moto::start();
    let (ec2, asg, p) = (m.ec2().await, m.asg().await, m.node_groups().await);
    let (old, new) = (
        moto::register_ami(&ec2, "old").await,
        moto::register_ami(&ec2, "new").await,
    );
    moto::put_ssm_parameter(&m.url, "/rota/test/node-ami", &old).await;
    let lt_id = ec2
        .create_launch_template()
        .launch_template_name("aliased-lt")
        .launch_template_data(
            aws_sdk_ec2::types::RequestLaunchTemplateData::builder()
                .image_id("resolve:ssm:/rota/test/node-ami")
                .instance_type(aws_sdk_ec2::types::InstanceType::T3Medium)
                .build(),
        )
        .send()
        .await
        .unwrap()
        .launch_template()
        .unwrap()
        .launch_template_id()
        .unwrap()
        .to_string();
    asg.create_auto_scaling_group()
        .auto_scaling_group_name("aliased")
        .launch_template(
            LaunchTemplateSpecification::builder()
                .launch_template_id(&lt_id)
                .version("1")
                .build(),
        )
        .min_size(0)
        .max_size(1)
        .desired_capacity(0)
        .availability_zones("us-east-1a")
        .send()
        .await
        .unwrap();
    let g = group("aliased");
    assert_eq!(p.describe(&g).await.unwrap().template_image, old);
    // Already on that AMI: no new version.
    p.set_image(&g, &old).await.unwrap();
    assert!(m.created_versions().is_empty());
    // A new AMI replaces the alias in a copy of version 1.
    p.set_image(&g, &new).await.unwrap();
    assert_eq!(p.describe(&g).await.unwrap().template_image, new);
    assert_eq!(m.created_versions()[0]["sourceVersion"], "1");
}

#[tokio::test]
async fn a_version_rota_did_not_base_on_the_group_would_be_caught() {
    // The contract check itself: a version made without SourceVersion, or naming more than
    // the image, is reported (here made by hand with rota's description).
    let m = moto::Moto::start();
    let (ec2, asg) = (m.ec2().await, m.asg().await);
    let (old, new) = (
        moto::register_ami(&ec2, "old").await,
        moto::register_ami(&ec2, "new").await,
    );
    let lt_id = moto::create_group(&ec2, &asg, "careless", (0, 0, 1), &old).await;
    for source in [None, Some("1")] {
        ec2.create_launch_template_version()
            .launch_template_id(&lt_id)
            .set_source_version(source.map(String::from))
            .launch_template_data(
                aws_sdk_ec2::types::RequestLaunchTemplateData::builder()
                    .image_id(&new)
                    .instance_type(aws_sdk_ec2::types::InstanceType::T3Micro)
                    .build(),
            )
            .version_description(format!("rota: {new} for careless"))
            .send()
            .await
            .unwrap();
    }
    let wrong = m.launch_template_violations();
    assert!(
        wrong.iter().any(|w| w.contains("not a version number"))
            && wrong.iter().any(|w| w.contains("not the image only")),
        "{wrong:#?}"
    );
    // Dropping `m` would fail this test on them: forget the record, the check is shown.
    std::fs::write(m.record_path(), "").unwrap();
}

// --- a whole rotation ----------------------------------------------------------------------

const WORKLOADS: &str = r#"
nodes: {perPool: 3, registerAfter: 15s, readyAfter: 20s}
deployments:
  - {name: web, namespace: shop, replicas: 4, pdb: {maxUnavailable: 1}, readyAfter: 10s}
daemonSets:
  - {name: node-exporter, namespace: monitoring, readyAfter: 5s}
"#;

fn npr(image: &str) -> NodePoolRotation {
    let mut policy = EffectivePolicy {
        batch: BatchSize::Count(1),
        ..EffectivePolicy::default()
    };
    policy.node_ready_timeout = GoDuration::from_secs(600);
    policy.drain.timeout = GoDuration::from_secs(900);
    sim_fleet::npr(NodePoolRotationSpec {
        cluster: "moto-1".into(),
        ..sim_fleet::spec("general", group("general"), "rota.dev/pool", image, policy)
    })
}

#[tokio::test]
async fn a_pool_on_moto_rotates_to_the_new_ami_driven_by_the_controller() {
    let m = moto::Moto::start();
    let (ec2, asg) = (m.ec2().await, m.asg().await);
    let (old, new) = (
        moto::register_ami(&ec2, "node-2026.11.1").await,
        moto::register_ami(&ec2, "node-2026.11.2").await,
    );
    moto::create_group(&ec2, &asg, "general", (0, 3, 3), &old).await;
    let provider: Arc<dyn NodeGroups> = Arc::new(m.node_groups().await);

    let scenario = Scenario {
        clusters: vec![ClusterScenario {
            name: "moto-1".into(),
            cloud: Cloud::Aws,
            pools: vec![PoolScenario {
                name: "general".into(),
                group: group("general"),
                image: old.clone(),
                node_selector: BTreeMap::from([("rota.dev/pool".into(), "general".into())]),
                nodes: 3,
            }],
        }],
        workloads: WorkloadProfile::from_yaml(WORKLOADS, "workloads").unwrap(),
        faults: FaultProfile::default(),
        seed: 1,
    };
    let cluster = ExternalCluster::start(&scenario.clusters[0], &scenario, provider.clone(), SPEED)
        .await
        .unwrap();
    let client = rota::kube::sim::client(cluster.store.clone());
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd::definition())
        .await
        .unwrap();
    let nodes = Api::<Node>::all(client.clone());
    let pool_nodes = ListParams::default().labels("rota.dev/pool=general");
    assert_eq!(
        nodes.list(&pool_nodes).await.unwrap().items.len(),
        3,
        "a node per instance"
    );
    // Workloads settle (placed, Ready, PDB status written).
    tokio::time::sleep(Duration::from_secs(5)).await;

    Api::<NodePoolRotation>::all(client.clone())
        .create(&PostParams::default(), &npr(&new))
        .await
        .unwrap();
    let mut cfg = Config::new("0.1.0", "moto-test");
    cfg.events = false;
    cfg.speed = SPEED;
    let mut c = Controller::new(client.clone(), provider.clone(), cfg);
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut log = String::new();
    let phase = loop {
        let out = c.step().await;
        if !out.is_empty() {
            log.push_str(&format!("{out:?}\n"));
        }
        // Never more than the pool plus one batch, at any point.
        let s = provider.describe(&group("general")).await.unwrap();
        assert!(
            s.desired <= 4 && s.instances.len() <= 4,
            "surge above one batch: {s:?}\n{log}"
        );
        let st = Api::<NodePoolRotation>::all(client.clone())
            .get("general")
            .await
            .unwrap()
            .status;
        if let Some(p) = st.as_ref().map(|s| s.phase)
            && matches!(p, Phase::Succeeded | Phase::Paused | Phase::Failed)
        {
            break (p, st.unwrap().message);
        }
        assert!(
            Instant::now() < deadline,
            "no end in 5 minutes\n{log}\n{}",
            m.log()
        );
        c.wait(Instant::now() + Duration::from_secs(2), true).await;
    };
    assert_eq!(phase.0, Phase::Succeeded, "{}\n{log}", phase.1);

    // The cloud: three instances, all on the new AMI, the maximum restored.
    let s = provider.describe(&group("general")).await.unwrap();
    assert_eq!((s.desired, s.min, s.max), (3, 0, 3), "{log}");
    assert_eq!(s.template_image, new);
    assert_eq!(s.instances.len(), 3, "{:?}", s.instances);
    assert!(
        s.instances
            .iter()
            .all(|i| i.image == new && i.lifecycle == Lifecycle::InService)
    );
    // No instance leaked: every running EC2 instance is one of the group's.
    let running: BTreeSet<String> = ec2
        .describe_instances()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("instance-state-name")
                .values("running")
                .values("pending")
                .build(),
        )
        .send()
        .await
        .unwrap()
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(|i| i.instance_id().map(str::to_string))
        .collect();
    let members: BTreeSet<String> = s.instances.iter().map(|i| i.id.clone()).collect();
    assert_eq!(running, members, "leaked instance(s)");

    // The cluster: every node of the pool is one of those instances, on the new image,
    // schedulable.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let items = nodes.list(&pool_nodes).await.unwrap().items;
    let pids: BTreeSet<String> = items
        .iter()
        .filter_map(|n| n.spec.as_ref()?.provider_id.clone())
        .collect();
    let want: BTreeSet<String> = s.instances.iter().map(|i| i.provider_id.clone()).collect();
    assert_eq!(pids, want);
    for n in &items {
        let info = n
            .status
            .as_ref()
            .and_then(|s| s.node_info.as_ref())
            .unwrap();
        assert_eq!(info.os_image, new);
        assert_ne!(n.spec.as_ref().and_then(|s| s.unschedulable), Some(true));
    }
}

/// AMIs are regional and per architecture: the check before the first surge finds an AMI in
/// the group's own region only, of the pool's architecture, and says where it looked.
#[tokio::test]
async fn an_ami_is_usable_in_its_own_region_and_arch_only() {
    use rota::cloud::{Arch, ImageCheck};
    let m = moto::Moto::start();
    let (ec2, p) = (m.ec2().await, m.node_groups().await);
    let ami = moto::register_ami(&ec2, "general-2026.11.3").await;
    let here = GroupRef::Aws {
        region: moto::REGION.into(),
        auto_scaling_group: "general".into(),
    };
    let there = GroupRef::Aws {
        region: "us-west-2".into(),
        auto_scaling_group: "general".into(),
    };
    assert_eq!(
        p.check_image(&here, &ami, Arch::X86_64).await.unwrap(),
        ImageCheck::Usable
    );
    let ImageCheck::Unusable { reason, message } =
        p.check_image(&there, &ami, Arch::X86_64).await.unwrap()
    else {
        panic!("{ami} was registered in {} only", moto::REGION)
    };
    assert_eq!(reason, "ImageNotFound");
    assert!(
        message.contains(&ami) && message.contains("us-west-2"),
        "{message}"
    );
    // moto's RegisterImage drops the architecture (EC2 keeps it); its catalog of public
    // AMIs carries one, as EC2's does: an arm64 AMI from it is usable by an arm64 pool only.
    let arm = ec2
        .describe_images()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("architecture")
                .values("arm64")
                .build(),
        )
        .send()
        .await
        .unwrap();
    let arm = arm.images()[0].image_id().unwrap().to_string();
    assert_eq!(
        p.check_image(&here, &arm, Arch::Arm64).await.unwrap(),
        ImageCheck::Usable
    );
    let ImageCheck::Unusable { reason, message } =
        p.check_image(&here, &arm, Arch::X86_64).await.unwrap()
    else {
        panic!("an arm64 AMI for an x86_64 pool")
    };
    assert_eq!(reason, "ImageWrongArch", "{message}");
    assert!(
        message.contains("arm64") && message.contains("x86_64"),
        "{message}"
    );
    // Deregistered: gone for the next rotation.
    ec2.deregister_image().image_id(&ami).send().await.unwrap();
    assert!(matches!(
        p.check_image(&here, &ami, Arch::X86_64).await.unwrap(),
        ImageCheck::Unusable { reason, .. } if reason == "ImageNotFound"
    ));
}

/// `rota images discover`'s lookups on EC2 and SSM: an SSM parameter's AMI (its name and
/// creation date), the newest AMI of a name filter in the region asked, and the refusals: a
/// parameter that holds something else, one that does not exist, a region without the AMI.
#[tokio::test]
async fn discovery_reads_ssm_parameters_and_name_filters_per_region() {
    use rota::cloud::{Arch, CloudErrorKind, ImageQuery, NodeGroups};
    let m = moto::Moto::start();
    let (ec2, p) = (m.ec2().await, m.node_groups().await);
    let old = moto::register_ami(&ec2, "acme-general-2026-11-2").await;
    // EC2 dates images to the second: the newer one is registered a second later.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let new = moto::register_ami(&ec2, "acme-general-2026-11-3").await;
    moto::register_ami(&ec2, "acme-gpu-2026-11-9").await;
    let by_name = |region: &str| ImageQuery::AwsName {
        region: region.into(),
        name_filter: "acme-general-*".into(),
        owners: vec!["123456789012".into()],
        arch: Arch::X86_64,
    };
    let found = p.find_image(&by_name(moto::REGION)).await.unwrap();
    assert_eq!(
        (found.id.as_str(), found.name.as_str()),
        (new.as_str(), "acme-general-2026-11-3"),
        "the newest of the filter (not {old}, not the gpu image)"
    );
    // Image squatting: without owners EC2 would answer anyone's public AMI of that name;
    // the query is refused before it is sent, whatever the fleet said.
    for owners in [vec![], vec!["aws-marketplace".to_string()]] {
        let e = p
            .find_image(&ImageQuery::AwsName {
                region: moto::REGION.into(),
                name_filter: "acme-general-*".into(),
                owners,
                arch: Arch::X86_64,
            })
            .await
            .unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Invalid, "{e}");
        assert!(e.message.contains("not asked"), "{e}");
    }
    let e = p.find_image(&by_name("us-west-2")).await.unwrap_err();
    assert_eq!(e.kind, CloudErrorKind::NotFound, "{e}");
    assert!(e.message.contains("us-west-2"), "{e}");

    let ssm = aws_sdk_ssm::Client::from_conf(
        aws_sdk_ssm::config::Builder::from(&m.sdk_config().await).build(),
    );
    for (name, value) in [
        ("/acme/general/x86_64", new.as_str()),
        // A parameter named by mistake that holds a secret: never echoed.
        (
            "/acme/bad",
            "postgres://admin:hunter2@db.internal:5432/fleet",
        ),
    ] {
        ssm.put_parameter()
            .name(name)
            .value(value)
            .r#type(aws_sdk_ssm::types::ParameterType::String)
            .send()
            .await
            .unwrap();
    }
    let param = |name: &str| ImageQuery::AwsSsm {
        region: moto::REGION.into(),
        parameter: name.into(),
        arch: Arch::X86_64,
    };
    let found = p.find_image(&param("/acme/general/x86_64")).await.unwrap();
    assert_eq!(
        (found.id.as_str(), found.name.as_str()),
        (new.as_str(), "acme-general-2026-11-3")
    );
    let e = p.find_image(&param("/acme/bad")).await.unwrap_err();
    assert_eq!(e.kind, CloudErrorKind::Invalid, "{e}");
    assert!(
        e.message
            .contains("the value is not an AMI ID (47 characters, looks like a URL)"),
        "{e}"
    );
    assert!(
        !e.to_string().contains("hunter2"),
        "the value is never quoted: {e}"
    );
    let e = p.find_image(&param("/acme/none")).await.unwrap_err();
    assert_eq!(e.kind, CloudErrorKind::NotFound, "{e}");
    assert!(
        e.message.contains("/acme/none does not exist in us-east-1"),
        "{e}"
    );
}
