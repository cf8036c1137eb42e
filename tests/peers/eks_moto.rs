//! rota's EKS managed node groups (`rota::cloud::aws::eks`) and `rota clusters import`
//! against moto, as far as moto serves EKS.
//!
//! moto 5.2 serves `CreateCluster`, `CreateNodegroup`, `ListNodegroups`,
//! `DescribeNodegroup`, `UpdateNodegroupConfig` (`updateConfig` kept and read back) and
//! `DeleteNodegroup`, and EC2's launch templates; it answers 404 to
//! `UpdateNodegroupVersion`, `ListUpdates` and `DescribeUpdate`. So these tests hold rota
//! to moto up to the version update: the launch template version rota makes (moto_server.py
//! checks the contract: from the node group's own version by number, the image only), the
//! node group's `updateConfig`, a retried start that makes no second version; and the
//! import end to end. The update's own life (`InProgress` to `Successful`/`Failed`, the
//! token read back) is tested on the pure mapping (`cloud::aws::eks`'s unit tests) and on
//! the simulated fleet (`OwnerPools` of the simulated EKS), not here.

use crate::support::{git, moto};

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use aws_sdk_eks::types::{LaunchTemplateSpecification, NodegroupScalingConfig};
use rota::cloud::CloudErrorKind;
use rota::cloud::aws::eks::AwsEksPools;
use rota::cloud::managed::{MaxUnavailable, OwnerPools, UpdateRequest};
use rota::cloud::retry::RetryPolicy;
use rota::fleet::owner::ManagedGroup;

const ROLE: &str = "arn:aws:iam::123456789012:role/eks-nodes";

async fn eks(m: &moto::Moto) -> aws_sdk_eks::Client {
    aws_sdk_eks::Client::new(&m.sdk_config().await)
}

async fn owner(m: &moto::Moto) -> AwsEksPools {
    AwsEksPools::from_env(
        Some(m.url.clone()),
        RetryPolicy::no_retries(Duration::from_secs(30)),
    )
    .await
}

async fn cluster(eks: &aws_sdk_eks::Client, name: &str) {
    eks.create_cluster()
        .name(name)
        .role_arn(ROLE)
        .resources_vpc_config(
            aws_sdk_eks::types::VpcConfigRequest::builder()
                .subnet_ids("subnet-0a1b2c3d")
                .build(),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateCluster {name}: {e:?}"));
}

/// A node group of `size` nodes; on launch template `lt` (name, version) if given.
async fn nodegroup(
    eks: &aws_sdk_eks::Client,
    cluster: &str,
    name: &str,
    size: i32,
    lt: Option<(&str, &str)>,
) {
    eks.create_nodegroup()
        .cluster_name(cluster)
        .nodegroup_name(name)
        .node_role(ROLE)
        .subnets("subnet-0a1b2c3d")
        .scaling_config(
            NodegroupScalingConfig::builder()
                .min_size(1)
                .max_size(size + 2)
                .desired_size(size)
                .build(),
        )
        .set_launch_template(lt.map(|(n, v)| {
            LaunchTemplateSpecification::builder()
                .name(n)
                .version(v)
                .build()
        }))
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateNodegroup {name}: {e:?}"));
}

async fn template(ec2: &aws_sdk_ec2::Client, name: &str, ami: &str) {
    ec2.create_launch_template()
        .launch_template_name(name)
        .launch_template_data(
            aws_sdk_ec2::types::RequestLaunchTemplateData::builder()
                .image_id(ami)
                .instance_type(aws_sdk_ec2::types::InstanceType::M6iLarge)
                .build(),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateLaunchTemplate {name}: {e:?}"));
}

/// Every version of launch template `name`: (number, AMI, description).
async fn versions(ec2: &aws_sdk_ec2::Client, name: &str) -> Vec<(i64, String, String)> {
    let out = ec2
        .describe_launch_template_versions()
        .launch_template_name(name)
        .send()
        .await
        .unwrap();
    let mut v: Vec<_> = out
        .launch_template_versions()
        .iter()
        .map(|v| {
            (
                v.version_number().unwrap_or_default(),
                v.launch_template_data()
                    .and_then(|d| d.image_id())
                    .unwrap_or_default()
                    .to_string(),
                v.version_description().unwrap_or_default().to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

fn general() -> ManagedGroup {
    ManagedGroup::EksNodegroup {
        region: moto::REGION.into(),
        eks_cluster: "prod".into(),
        nodegroup: "general".into(),
    }
}

#[tokio::test]
async fn a_node_group_is_read_and_its_update_prepared_as_far_as_moto_serves() {
    let m = moto::Moto::start();
    let (ec2, eks) = (m.ec2().await, eks(&m).await);
    let (old, new) = (
        moto::register_ami(&ec2, "old").await,
        moto::register_ami(&ec2, "new").await,
    );
    template(&ec2, "general-lt", &old).await;
    cluster(&eks, "prod").await;
    nodegroup(&eks, "prod", "general", 3, Some(("general-lt", "1"))).await;
    let p = owner(&m).await;

    let before = p.nodegroup_state(&general()).await.unwrap();
    assert_eq!(
        before.image, old,
        "the AMI of the node group's launch template version"
    );
    assert_eq!(before.desired, 3);
    assert_eq!(before.update, None);

    let req = UpdateRequest {
        image: new.clone(),
        max_unavailable: MaxUnavailable::Count(2),
        token: "rota-general-new-1700000000".into(),
        drain_timeout_minutes: None,
        node_soak_minutes: None,
        drain_first: false,
        force: false,
    };
    // moto answers UpdateNodegroupVersion with 404: everything before it is moto's to check.
    let err = p.start_update(&general(), &req).await.unwrap_err();
    assert_eq!(err.call, "UpdateNodegroupVersion", "{err}");
    let made = versions(&ec2, "general-lt").await;
    assert_eq!(
        made,
        vec![
            (1, old.clone(), String::new()),
            (2, new.clone(), "rota: rota-general-new-1700000000".into()),
        ],
        "one new version of the node group's own template, the new AMI, the token"
    );
    let after = p.nodegroup_state(&general()).await.unwrap();
    assert_eq!(after.max_unavailable, Some(MaxUnavailable::Count(2)));
    assert_eq!(
        after.image, old,
        "the node group stays on its version until EKS updates it"
    );

    // A retry with the same token (a crash or a lost answer) makes no second version.
    let again = p.start_update(&general(), &req).await.unwrap_err();
    assert_eq!(again.call, "UpdateNodegroupVersion", "{again}");
    assert_eq!(versions(&ec2, "general-lt").await, made);

    // A percentage goes as maxUnavailablePercentage.
    let pct = UpdateRequest {
        max_unavailable: MaxUnavailable::Percent(25),
        ..req.clone()
    };
    let _ = p.start_update(&general(), &pct).await.unwrap_err();
    let after = p.nodegroup_state(&general()).await.unwrap();
    assert_eq!(after.max_unavailable, Some(MaxUnavailable::Percent(25)));
}

#[tokio::test]
async fn a_node_group_without_a_launch_template_or_missing_is_refused_by_name() {
    let m = moto::Moto::start();
    let eks = eks(&m).await;
    cluster(&eks, "prod").await;
    nodegroup(&eks, "prod", "general", 2, None).await;
    let p = owner(&m).await;
    let err = p.nodegroup_state(&general()).await.unwrap_err();
    assert_eq!(err.kind, CloudErrorKind::Invalid, "{err}");
    assert!(err.message.contains("no launch template"), "{err}");
    let gone = ManagedGroup::EksNodegroup {
        region: moto::REGION.into(),
        eks_cluster: "prod".into(),
        nodegroup: "gone".into(),
    };
    let err = p.nodegroup_state(&gone).await.unwrap_err();
    assert_eq!(err.call, "DescribeNodegroup");
    assert!(err.message.contains("ResourceNotFoundException"), "{err}");
}

fn import(m: &moto::Moto, repo: &Path) -> (i32, String) {
    import_with(m, repo, &[])
}

/// The import of `import_with`'s cluster with `extra` flags.
fn import_with(m: &moto::Moto, repo: &Path, extra: &[&str]) -> (i32, String) {
    let out = Command::new(git::rota())
        .args([
            "clusters",
            "import",
            "import-use1",
            "--cloud",
            "aws",
            "--region",
            moto::REGION,
            "--eks-cluster",
            "prod",
            "--label",
            "ring=early",
            "--read-only",
            "--repo",
        ])
        .arg(repo)
        .args(["--aws-endpoint-url", &m.url])
        .args(extra)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

async fn tag(asg: &aws_sdk_autoscaling::Client, group: &str, key: &str, value: &str) {
    asg.create_or_update_tags()
        .tags(
            aws_sdk_autoscaling::types::Tag::builder()
                .resource_id(group)
                .resource_type("auto-scaling-group")
                .key(key)
                .value(value)
                .propagate_at_launch(true)
                .build(),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateOrUpdateTags {group}: {e:?}"));
}

#[tokio::test]
async fn import_writes_a_valid_cluster_file_and_a_second_run_changes_nothing() {
    let m = moto::Moto::start();
    let (ec2, asg, eks) = (m.ec2().await, m.asg().await, eks(&m).await);
    let ami = builtin_ami(&ec2, "x86_64").await;
    template(&ec2, "general-lt", &ami).await;
    cluster(&eks, "prod").await;
    nodegroup(&eks, "prod", "general", 3, Some(("general-lt", "1"))).await;
    nodegroup(&eks, "prod", "batch", 2, None).await;
    // Self-managed, with cluster-autoscaler's label tag: a pool of its own.
    moto::create_group(&ec2, &asg, "prod-gpu-asg", (0, 1, 3), &ami).await;
    tag(&asg, "prod-gpu-asg", "kubernetes.io/cluster/prod", "owned").await;
    tag(
        &asg,
        "prod-gpu-asg",
        "k8s.io/cluster-autoscaler/node-template/label/pool",
        "gpu",
    )
    .await;
    // Self-managed without label tags: written commented out.
    moto::create_group(&ec2, &asg, "prod-legacy-asg", (0, 1, 3), &ami).await;
    tag(
        &asg,
        "prod-legacy-asg",
        "kubernetes.io/cluster/prod",
        "owned",
    )
    .await;
    // EKS's own group of a node group, and another cluster's group: not pools of this one.
    moto::create_group(&ec2, &asg, "eks-general-0a1b", (0, 1, 3), &ami).await;
    tag(
        &asg,
        "eks-general-0a1b",
        "kubernetes.io/cluster/prod",
        "owned",
    )
    .await;
    tag(&asg, "eks-general-0a1b", "eks:nodegroup-name", "general").await;
    moto::create_group(&ec2, &asg, "staging-asg", (0, 1, 3), &ami).await;
    tag(
        &asg,
        "staging-asg",
        "kubernetes.io/cluster/staging",
        "owned",
    )
    .await;

    let repo = tempfile::tempdir().unwrap();
    crate::support::example_repo::copy_to(repo.path());
    let (code, out) = import(&m, repo.path());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("written (4 pools)"), "{out}");
    let file = repo.path().join("clusters/import-use1.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    for want in [
        "  labels: {ring: early}\n",
        "    aws: {region: us-east-1, eksCluster: prod}\n  mode: readOnly",
        "    # EKS managed node group general of cluster prod in us-east-1 (with a launch template)\n    - name: general\n",
        "      nodeSelector: {eks.amazonaws.com/nodegroup: general}\n      group: {eksNodegroup: general}\n",
        "(without a launch template: EKS picks its AMI, rota cannot pin one)\n    - name: batch\n",
        "    - name: prod-gpu-asg\n      channel: general\n      nodeSelector: {pool: gpu}\n      group: {autoScalingGroup: prod-gpu-asg}\n",
        "    # - name: prod-legacy-asg\n",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    for absent in ["eks-general-0a1b", "staging-asg"] {
        assert!(!text.contains(absent), "{absent} imported:\n{text}");
    }

    let validate = Command::new(git::rota())
        .args(["validate", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    assert!(
        validate.status.success(),
        "rota validate on the imported file:\n{}{}\n{text}",
        String::from_utf8_lossy(&validate.stdout),
        String::from_utf8_lossy(&validate.stderr)
    );

    // Again: the same bytes, nothing written.
    let (code, out) = import(&m, repo.path());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("unchanged (4 pools)"), "{out}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);

    // A hand edit is kept: the owners list the same pools.
    let edited = text.replace(
        "      nodeSelector: {pool: gpu}",
        "      rollout: {batch: 1}\n      nodeSelector: {pool: gpu}",
    );
    std::fs::write(&file, &edited).unwrap();
    let (code, out) = import(&m, repo.path());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("kept as edited"), "{out}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), edited);

    // A node group gone and one added: named, the file kept, exit 1.
    eks.delete_nodegroup()
        .cluster_name("prod")
        .nodegroup_name("batch")
        .send()
        .await
        .unwrap();
    nodegroup(&eks, "prod", "spot", 1, Some(("general-lt", "1"))).await;
    let (code, out) = import(&m, repo.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("would add pool spot {eksNodegroup: spot}"),
        "{out}"
    );
    assert!(
        out.contains("pool batch {eksNodegroup: batch}: no owner lists it any more"),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), edited);

    check_and_force(&m, repo.path(), &file, &edited);
}

/// `--check` and `--force` on the file `edited` holds, which the owners' pools no longer
/// match (a node group `spot` added, `batch` gone).
fn check_and_force(m: &moto::Moto, repo: &Path, file: &Path, edited: &str) {
    // --check says the same and writes nothing either.
    let (code, out) = import_with(m, repo, &["--check"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("would add pool spot"), "{out}");
    assert_eq!(std::fs::read_to_string(file).unwrap(), edited);

    // --force rewrites it as the owners list the pools now (the hand edit is gone), and a
    // check after that finds nothing to do.
    let (code, out) = import_with(m, repo, &["--force"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("overwritten (--force; 4 pools)"), "{out}");
    let forced = std::fs::read_to_string(file).unwrap();
    assert!(forced.contains("- name: spot\n"), "{forced}");
    assert!(!forced.contains("- name: batch\n"), "{forced}");
    assert!(!forced.contains("rollout: {batch: 1}"), "{forced}");
    let (code, out) = import_with(m, repo, &["--check"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("unchanged (4 pools)"), "{out}");

    // --check of a cluster not written yet: exit 1, nothing written.
    let other = tempfile::tempdir().unwrap();
    let (code, out) = import_with(m, other.path(), &["--check"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("would be written (4 pools)"), "{out}");
    assert!(!other.path().join("clusters").exists());
}

#[tokio::test]
async fn import_with_no_eks_lists_the_tagged_groups_only_and_prints_without_a_repo() {
    let m = moto::Moto::start();
    let (ec2, asg) = (m.ec2().await, m.asg().await);
    let ami = moto::register_ami(&ec2, "general").await;
    moto::create_group(&ec2, &asg, "kops-nodes", (0, 1, 3), &ami).await;
    tag(
        &asg,
        "kops-nodes",
        "kubernetes.io/cluster/kops-use1",
        "owned",
    )
    .await;
    tag(
        &asg,
        "kops-nodes",
        "k8s.io/cluster-autoscaler/node-template/label/kops.k8s.io/instancegroup",
        "nodes",
    )
    .await;
    // An eksctl unmanaged node group: eksctl's tag, which eksctl labels the nodes with.
    moto::create_group(&ec2, &asg, "eksctl-kops-use1-ng-1", (0, 1, 3), &ami).await;
    tag(
        &asg,
        "eksctl-kops-use1-ng-1",
        "kubernetes.io/cluster/kops-use1",
        "owned",
    )
    .await;
    tag(
        &asg,
        "eksctl-kops-use1-ng-1",
        "alpha.eksctl.io/nodegroup-name",
        "ng-1",
    )
    .await;
    let out = Command::new(git::rota())
        .args([
            "clusters",
            "import",
            "kops-use1",
            "--cloud",
            "aws",
            "--region",
            moto::REGION,
            "--no-eks",
            "--aws-endpoint-url",
            &m.url,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("    aws: {region: us-east-1}\n"), "{text}");
    assert!(
        text.contains("      nodeSelector: {kops.k8s.io/instancegroup: nodes}\n      group: {autoScalingGroup: kops-nodes}\n"),
        "{text}"
    );
    assert!(
        text.contains("      nodeSelector: {alpha.eksctl.io/nodegroup-name: ng-1}\n      group: {autoScalingGroup: eksctl-kops-use1-ng-1}\n"),
        "{text}"
    );
    assert!(!text.contains("eksNodegroup"), "{text}");
}

/// The node group's launch template ID in moto.
async fn template_id(ec2: &aws_sdk_ec2::Client, name: &str) -> String {
    ec2.describe_launch_templates()
        .launch_template_names(name)
        .send()
        .await
        .unwrap()
        .launch_templates()[0]
        .launch_template_id()
        .unwrap()
        .to_string()
}

/// What moto does not serve, on the EKS double (held to botocore's EKS model when dropped):
/// an update started, followed to its end and recognised by its token; a second start with
/// the same token answered with the same update; another refused while it runs; a failed
/// update with EKS's errors; a finished update described once.
#[tokio::test]
async fn an_update_is_followed_to_its_end_and_known_by_its_token_on_the_eks_double() {
    let m = moto::Moto::start();
    let double = crate::support::eks_double::EksDouble::start().await;
    let ec2 = m.ec2().await;
    let (old, new) = (
        moto::register_ami(&ec2, "old").await,
        moto::register_ami(&ec2, "new").await,
    );
    template(&ec2, "general-lt", &old).await;
    let lt = template_id(&ec2, "general-lt").await;
    double.add_nodegroup("prod", "general", &lt, "1", 3);
    let p = owner(&m).await.with_eks_endpoint(&double.url);

    let before = p.describe(&general()).await.unwrap();
    assert_eq!((before.image.as_str(), before.desired), (old.as_str(), 3));
    assert_eq!(before.update, None);
    assert_eq!(before.max_unavailable, Some(MaxUnavailable::Count(1)));

    let req = UpdateRequest {
        image: new.clone(),
        max_unavailable: MaxUnavailable::Percent(34),
        token: "rota-general-new-1700000000".into(),
        drain_timeout_minutes: None,
        node_soak_minutes: None,
        drain_first: false,
        force: false,
    };
    let id = p.start_update(&general(), &req).await.unwrap();
    let running = p.describe(&general()).await.unwrap();
    let u = running.update.clone().expect("the update");
    assert_eq!(u.id, id);
    assert_eq!(
        u.token.as_deref(),
        Some(req.token.as_str()),
        "the token read back"
    );
    assert_eq!(u.image, new);
    assert!(running.updating());
    assert_eq!(running.max_unavailable, Some(MaxUnavailable::Percent(34)));
    assert_eq!(
        running.image, old,
        "EKS moves the node group when its update ends"
    );

    // The same start again (a lost answer, a restart): the same update, no second version.
    assert_eq!(p.start_update(&general(), &req).await.unwrap(), id);
    assert_eq!(versions(&ec2, "general-lt").await.len(), 2);
    // Another start while it runs: EKS refuses (ResourceInUseException), as the trait says.
    let other = UpdateRequest {
        token: "rota-general-old-1700000001".into(),
        image: old.clone(),
        ..req.clone()
    };
    let err = p.start_update(&general(), &other).await.unwrap_err();
    assert_eq!(err.kind, CloudErrorKind::Invalid, "{err}");
    assert!(err.message.contains("ResourceInUseException"), "{err}");
    // `drain.onTimeout: pause` (the request's `force` false): EKS is not asked to force.
    let sent = double.version_requests();
    assert_eq!(sent[0]["force"], false, "{sent:?}");

    double.finish(true);
    let done = p.describe(&general()).await.unwrap();
    let u = done.update.clone().unwrap();
    assert_eq!(u.status, rota::cloud::managed::UpdateStatus::Successful);
    assert_eq!(u.token.as_deref(), Some(req.token.as_str()));
    assert_eq!(done.image, new, "the node group on the update's version");
    assert_eq!(double.version_of("prod", "general"), "2");

    // Back to the old AMI with `drain.onTimeout: force`: EKS is asked to force the update
    // past a node it cannot drain. Then EKS fails it: the errors as EKS gives them, and the
    // token.
    let other = UpdateRequest {
        force: true,
        ..other
    };
    p.start_update(&general(), &other).await.unwrap();
    let sent = double.version_requests();
    assert_eq!(sent.last().unwrap()["force"], true, "{sent:?}");
    double.finish(false);
    let failed = p.describe(&general()).await.unwrap();
    let u = failed.update.clone().unwrap();
    assert_eq!(u.status, rota::cloud::managed::UpdateStatus::Failed);
    assert_eq!(u.token.as_deref(), Some(other.token.as_str()));
    assert_eq!(u.image, old);
    assert_eq!(
        u.errors,
        vec!["NodeCreationFailure: Instances failed to join the kubernetes cluster"]
    );
    assert_eq!(
        failed.image, new,
        "a failed update leaves the node group where it was"
    );

    // Finished updates are described once per owner: a describe now lists them and asks
    // for none again.
    let asked = double.calls("GET", "/updates/");
    p.describe(&general()).await.unwrap();
    assert_eq!(double.calls("GET", "/updates/"), asked);
}

/// One of moto's own AMIs of `arch` (`x86_64`, `arm64`). moto's RegisterImage drops the
/// `Architecture` it is given (DescribeImages answers none), so an image of a known
/// architecture must be one moto ships.
async fn builtin_ami(ec2: &aws_sdk_ec2::Client, arch: &str) -> String {
    ec2.describe_images()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("architecture")
                .values(arch)
                .build(),
        )
        .send()
        .await
        .unwrap()
        .images()
        .iter()
        .find_map(|i| i.image_id().map(str::to_string))
        .unwrap_or_else(|| panic!("moto ships no {arch} AMI"))
}

/// An arm64 pool written without `arch` would be given the x86_64 AMI of a version, which
/// its machines cannot boot: the import reads the architecture from the pool's image (its
/// launch template's AMI, or EKS's AMI type).
#[tokio::test]
async fn import_writes_arm64_for_pools_on_arm64_images() {
    let m = moto::Moto::start();
    let (ec2, asg, eks) = (m.ec2().await, m.asg().await, eks(&m).await);
    let x86 = builtin_ami(&ec2, "x86_64").await;
    let arm = builtin_ami(&ec2, "arm64").await;
    template(&ec2, "general-lt", &x86).await;
    template(&ec2, "graviton-lt", &arm).await;
    cluster(&eks, "arm-use1").await;
    nodegroup(&eks, "arm-use1", "general", 2, Some(("general-lt", "1"))).await;
    nodegroup(&eks, "arm-use1", "graviton", 2, Some(("graviton-lt", "1"))).await;
    eks.create_nodegroup()
        .cluster_name("arm-use1")
        .nodegroup_name("system")
        .node_role(ROLE)
        .subnets("subnet-0a1b2c3d")
        .ami_type(aws_sdk_eks::types::AmiTypes::Al2023Arm64Standard)
        .send()
        .await
        .unwrap();
    moto::create_group(&ec2, &asg, "arm-use1-batch", (0, 1, 3), &arm).await;
    tag(
        &asg,
        "arm-use1-batch",
        "kubernetes.io/cluster/arm-use1",
        "owned",
    )
    .await;
    tag(
        &asg,
        "arm-use1-batch",
        "k8s.io/cluster-autoscaler/node-template/label/pool",
        "batch",
    )
    .await;
    let out = Command::new(git::rota())
        .args([
            "clusters",
            "import",
            "arm-use1",
            "--cloud",
            "aws",
            "--region",
            moto::REGION,
            "--aws-endpoint-url",
            &m.url,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "    - name: arm-use1-batch\n      channel: general\n      arch: arm64\n",
        "    - name: graviton\n      channel: general\n      arch: arm64\n",
        "    - name: system\n      channel: general\n      arch: arm64\n",
        "    - name: general\n      channel: general\n      nodeSelector:",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

/// `managedUpdate: blueGreen` on EKS, as far as moto serves it: the twin made in the old node
/// group's shape (`CreateNodegroup`: role, subnets, instance types, capacity and AMI type,
/// labels, taints, tags plus the twin tag, a launch template version that differs in the AMI
/// only), made once however often asked, refused over a node group that is not rota's twin;
/// its members read through its Auto Scaling group (moto names one and does not make it: the
/// test makes it under that name), a drained node removed with decrement, the old node group
/// scaled to zero (its minimum lowered with it) and deleted, twice.
#[tokio::test]
async fn a_blue_green_twin_is_made_in_the_old_node_groups_shape_and_the_old_one_removed() {
    use rota::cloud::managed::{PoolStatus, TwinRequest};

    let m = moto::Moto::start();
    let (ec2, eks, asg) = (m.ec2().await, eks(&m).await, m.asg().await);
    let (old, new) = (
        moto::register_ami(&ec2, "old").await,
        moto::register_ami(&ec2, "new").await,
    );
    cluster(&eks, "prod").await;
    template(&ec2, "lt-general", &old).await;
    shaped_nodegroup(&eks).await;
    let o = owner(&m).await;
    assert!(o.blue_green());
    let twin_name = rota::cloud::managed::twin_name("general", "2026.11.2");
    let twin = rota::cloud::managed::renamed(&general(), &twin_name);
    let req = TwinRequest {
        from: general(),
        twin: twin.clone(),
        image: new.clone(),
        desired: 0,
        max: 3,
    };
    o.create_twin(&req).await.unwrap();
    o.create_twin(&req).await.unwrap();

    let ng = assert_twin_shape(&m, &eks, &ec2, &twin_name, &new).await;

    // A node group of another name that is not rota's twin is never taken for one.
    nodegroup(&eks, "prod", "imposter", 1, Some(("lt-general", "1"))).await;
    let e = o
        .create_twin(&TwinRequest {
            twin: rota::cloud::managed::renamed(&general(), "imposter"),
            ..req.clone()
        })
        .await
        .unwrap_err();
    assert_eq!(e.kind, CloudErrorKind::Invalid);
    assert!(e.message.contains("rota.dev/twin-of"), "{e}");

    // Members: the twin's AMI, size and tag; its instances from its Auto Scaling group.
    o.set_size(&twin, 2, 3).await.unwrap();
    let asg_name = ng.resources().unwrap().auto_scaling_groups()[0]
        .name()
        .unwrap()
        .to_string();
    moto::create_group(&ec2, &asg, &asg_name, (0, 2, 3), &new).await;
    let mb = o.members(&twin).await.unwrap().unwrap();
    assert_eq!(
        (
            mb.status,
            mb.image.as_str(),
            mb.desired,
            mb.max,
            mb.twin_of.as_deref()
        ),
        (PoolStatus::Active, new.as_str(), 2, 3, Some("general"))
    );
    assert_eq!(mb.instances.len(), 2, "{:?}", mb.instances);
    let gone = mb.instances[0].id.clone();
    o.remove_node(&twin, &gone).await.unwrap();
    o.remove_node(&twin, &gone).await.unwrap();
    let g = asg
        .describe_auto_scaling_groups()
        .auto_scaling_group_names(&asg_name)
        .send()
        .await
        .unwrap();
    assert_eq!(
        g.auto_scaling_groups()[0].desired_capacity(),
        Some(1),
        "decremented once"
    );

    // The old node group to zero (its minimum of 2 lowered with it), then deleted, twice.
    o.set_size(&general(), 0, 5).await.unwrap();
    let s = eks
        .describe_nodegroup()
        .cluster_name("prod")
        .nodegroup_name("general")
        .send()
        .await
        .unwrap()
        .nodegroup
        .unwrap()
        .scaling_config
        .unwrap();
    assert_eq!((s.min_size(), s.desired_size()), (Some(0), Some(0)));
    o.delete_pool(&general()).await.unwrap();
    o.delete_pool(&general()).await.unwrap();
    assert!(o.members(&general()).await.unwrap().is_none());
}

/// A restart that lost the checkpoint finds rota's twins by their `rota.dev/twin-of` tag,
/// whatever their names, on every page of `ListNodegroups` (moto pages by 100, as EKS does:
/// the planner's twin sorts onto the second page behind 100 other node groups); a node group
/// without the tag, or naming another node group, is never taken for one.
#[tokio::test]
async fn twins_are_found_by_their_tag_on_every_page_and_strangers_are_not() {
    use rota::cloud::managed::TwinRequest;

    let m = moto::Moto::start();
    let (ec2, eks) = (m.ec2().await, eks(&m).await);
    let new = moto::register_ami(&ec2, "new").await;
    cluster(&eks, "prod").await;
    template(&ec2, "lt-general", &moto::register_ami(&ec2, "old").await).await;
    shaped_nodegroup(&eks).await;
    for i in 0..100 {
        nodegroup(&eks, "prod", &format!("filler-{i:03}"), 1, None).await;
    }
    let o = owner(&m).await;
    let twin_name = rota::cloud::managed::twin_name("general", "2026.11.2");
    o.create_twin(&TwinRequest {
        from: general(),
        twin: rota::cloud::managed::renamed(&general(), &twin_name),
        image: new.clone(),
        desired: 0,
        max: 3,
    })
    .await
    .unwrap();
    // A twin under a name the planner would not give (an older rota's): found by its tag.
    let tagged = |name: &str, of: &str| {
        eks.create_nodegroup()
            .cluster_name("prod")
            .nodegroup_name(name)
            .node_role(ROLE)
            .subnets("subnet-0a1b2c3d")
            .tags("rota.dev/twin-of", of)
            .send()
    };
    tagged("aaa-any-name", "general").await.unwrap();
    tagged("system-next", "system").await.unwrap();
    nodegroup(&eks, "prod", "imposter", 1, None).await;

    let found = o.twins_of(&general()).await.unwrap();
    let mut names: Vec<&str> = found.iter().map(|t| t.pool.name()).collect();
    names.sort();
    assert_eq!(names, ["aaa-any-name", twin_name.as_str()]);
    let planned = found.iter().find(|t| t.pool.name() == twin_name).unwrap();
    assert_eq!(
        (planned.twin_of.as_deref(), planned.image.as_str()),
        (Some("general"), new.as_str()),
        "the twin's members, its AMI from its launch template version"
    );
    // A twin's own twins (a second move's) are asked of the twin: none yet.
    let twin = rota::cloud::managed::renamed(&general(), &twin_name);
    assert!(o.twins_of(&twin).await.unwrap().is_empty());
    // A cluster EKS does not know is an error, not "no twins".
    let gone = ManagedGroup::EksNodegroup {
        region: moto::REGION.into(),
        eks_cluster: "nosuch".into(),
        nodegroup: "general".into(),
    };
    assert!(o.twins_of(&gone).await.is_err());
}

/// A node group of every field the twin copies: two subnets, an instance type, capacity and
/// AMI type, a label, a taint, a tag, a minimum above zero, a launch template.
async fn shaped_nodegroup(eks: &aws_sdk_eks::Client) {
    use aws_sdk_eks::types::{AmiTypes, CapacityTypes, Taint, TaintEffect};
    eks.create_nodegroup()
        .cluster_name("prod")
        .nodegroup_name("general")
        .node_role(ROLE)
        .subnets("subnet-0a1b2c3d")
        .subnets("subnet-0e1f2a3b")
        .instance_types("m6i.large")
        .capacity_type(CapacityTypes::OnDemand)
        .ami_type(AmiTypes::Custom)
        .labels("workload", "general")
        .taints(
            Taint::builder()
                .key("dedicated")
                .value("general")
                .effect(TaintEffect::NoSchedule)
                .build(),
        )
        .tags("team", "payments")
        .scaling_config(
            NodegroupScalingConfig::builder()
                .min_size(2)
                .max_size(5)
                .desired_size(3)
                .build(),
        )
        .launch_template(
            LaunchTemplateSpecification::builder()
                .name("lt-general")
                .version("1")
                .build(),
        )
        .send()
        .await
        .unwrap();
}

/// The twin as EKS describes it, in the old node group's shape on a launch template version
/// of its own (one, however often asked, that differs in the AMI only).
async fn assert_twin_shape(
    m: &moto::Moto,
    eks: &aws_sdk_eks::Client,
    ec2: &aws_sdk_ec2::Client,
    twin_name: &str,
    new: &str,
) -> aws_sdk_eks::types::Nodegroup {
    use aws_sdk_eks::types::{AmiTypes, CapacityTypes};
    let ng = eks
        .describe_nodegroup()
        .cluster_name("prod")
        .nodegroup_name(twin_name)
        .send()
        .await
        .unwrap()
        .nodegroup
        .unwrap();
    assert_eq!(ng.node_role(), Some(ROLE));
    assert_eq!(ng.subnets(), ["subnet-0a1b2c3d", "subnet-0e1f2a3b"]);
    assert_eq!(ng.instance_types(), ["m6i.large"]);
    assert_eq!(ng.capacity_type(), Some(&CapacityTypes::OnDemand));
    assert_eq!(ng.ami_type(), Some(&AmiTypes::Custom));
    assert_eq!(ng.labels().unwrap()["workload"], "general");
    assert_eq!(ng.taints()[0].key(), Some("dedicated"));
    let tags = ng.tags().unwrap();
    assert_eq!(
        (tags["team"].as_str(), tags["rota.dev/twin-of"].as_str()),
        ("payments", "general")
    );
    let s = ng.scaling_config().unwrap();
    assert_eq!(
        (s.min_size(), s.desired_size(), s.max_size()),
        (Some(0), Some(0), Some(3))
    );
    let lt = ng.launch_template().unwrap();
    assert_eq!((lt.name(), lt.version()), (Some("lt-general"), Some("2")));
    let vs = versions(ec2, "lt-general").await;
    assert_eq!(
        vs.len(),
        2,
        "one version for the twin, however often asked: {vs:?}"
    );
    assert_eq!(
        (vs[1].1.as_str(), vs[1].2.as_str()),
        (new, format!("rota: {twin_name}").as_str())
    );
    assert!(
        m.launch_template_violations().is_empty(),
        "{:?}",
        m.launch_template_violations()
    );
    let list = eks
        .list_nodegroups()
        .cluster_name("prod")
        .send()
        .await
        .unwrap();
    assert_eq!(list.nodegroups().len(), 2);

    ng
}
