//! moto, the AWS emulator, as a test peer: a `moto_server` on a free loopback port for the
//! life of a test, and an [`AwsNodeGroups`] and raw SDK clients pointed at it.
//!
//! `scripts/test` installs moto into the test peers' venv (`ROTA_PEERS_VENV`, by default
//! `<target dir>/peers-venv`). Without it these tests fail and say so: they never skip.
//!
//! moto runs through `tests/support/moto_server.py`, which gives it the launch-template
//! behaviours EC2 documents and moto leaves out (`SourceVersion`, `ResolveAlias`) and records
//! every `CreateLaunchTemplateVersion`. When a [`Moto`] is dropped, every version rota made
//! (its description starts `rota: `) is held to the contract of `set_image`: based on a
//! version named by number, naming the image only, so that it holds exactly the source
//! version's data with the new AMI.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

use rota::cloud::aws::AwsNodeGroups;
use rota::cloud::retry::RetryPolicy;

pub const REGION: &str = "us-east-1";

pub use super::venv::peers_venv;

/// Fake credentials and region for the SDK's standard chain, set once per test process; no
/// instance metadata lookups. Tests only: rota itself never sets credentials.
pub fn fake_credentials() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (k, v) in [
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
            ("AWS_SESSION_TOKEN", "testing"),
            ("AWS_REGION", REGION),
            ("AWS_EC2_METADATA_DISABLED", "true"),
            ("AWS_CONFIG_FILE", "/dev/null"),
            ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null"),
        ] {
            // SAFETY: set once, before any client reads the environment; nothing in these
            // test binaries reads the environment from C code concurrently.
            unsafe { std::env::set_var(k, v) };
        }
    });
}

/// A running `moto_server`, stopped when dropped.
pub struct Moto {
    child: Child,
    pub url: String,
    log: PathBuf,
    record: PathBuf,
    _dir: tempfile::TempDir,
}

impl Moto {
    /// Start moto on a free loopback port and wait until it answers. Panics, pointing at
    /// `scripts/test`, when the venv is missing.
    pub fn start() -> Moto {
        fake_credentials();
        let venv = peers_venv();
        let bin = venv.join("bin/moto_server");
        let python = venv.join("bin/python");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/moto_server.py");
        assert!(
            bin.exists(),
            "moto_server not found at {}: the AWS tests need moto. Run scripts/test (it creates \
             the test peers' venv and installs moto), or point ROTA_PEERS_VENV at a venv with \
             `pip install 'moto[server]'`",
            bin.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("moto.log");
        let record = dir.path().join("launch-template-versions.jsonl");
        // A port the kernel just handed out; another process could take it before moto
        // binds, so a start that fails is tried again on a new port.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let out = std::fs::File::create(&log).unwrap();
            let mut child = Command::new(&python)
                .args([script, "-H", "127.0.0.1", "-p", &port.to_string()])
                .env("MOTO_ENABLE_AMI_VALIDATION", "true")
                .env("ROTA_MOTO_RECORD", &record)
                .stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out)
                .spawn()
                .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
            let deadline = Instant::now() + Duration::from_secs(60);
            // Ours answers only once its own log says it bound the port: a port another
            // test's moto took in between would also accept the connection, and that moto
            // goes away with its test (connection refused in the middle of this one).
            let bound = format!("Running on http://127.0.0.1:{port}");
            loop {
                if TcpStream::connect(("127.0.0.1", port)).is_ok()
                    && child.try_wait().unwrap().is_none()
                    && std::fs::read_to_string(&log).is_ok_and(|l| l.contains(&bound))
                {
                    return Moto {
                        child,
                        url: format!("http://127.0.0.1:{port}"),
                        log,
                        record,
                        _dir: dir,
                    };
                }
                if child.try_wait().unwrap().is_some() || Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!(
            "moto_server did not start; its log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// rota's provider against this moto, with the standard credential chain (the fake
    /// credentials above) and a retry policy that fails fast.
    pub async fn node_groups(&self) -> AwsNodeGroups {
        AwsNodeGroups::from_env(
            Some(self.url.clone()),
            RetryPolicy::no_retries(Duration::from_secs(30)),
        )
        .await
    }

    /// The SDK configuration of this moto (its endpoint, the fake credentials), for clients
    /// the helpers below do not make.
    pub async fn sdk_config(&self) -> aws_config::SdkConfig {
        self.sdk().await
    }

    async fn sdk(&self) -> aws_config::SdkConfig {
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(REGION))
            .endpoint_url(&self.url)
            .http_client(
                aws_smithy_http_client::Builder::new()
                    .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
                        aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
                    ))
                    .build_https(),
            )
            .load()
            .await
    }

    /// A raw EC2 client for setting up what the test needs.
    pub async fn ec2(&self) -> aws_sdk_ec2::Client {
        aws_sdk_ec2::Client::new(&self.sdk().await)
    }

    /// A raw Auto Scaling client for setting up and checking.
    pub async fn asg(&self) -> aws_sdk_autoscaling::Client {
        aws_sdk_autoscaling::Client::new(&self.sdk().await)
    }

    /// Every `CreateLaunchTemplateVersion` so far, as `moto_server.py` recorded it:
    /// `sourceVersion`, `givenFields`, `givenImageId`, `description`, `sourceData`, `data`,
    /// `versionNumber`.
    pub fn created_versions(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a recorded version"))
            .collect()
    }

    /// The file `moto_server.py` records versions in.
    pub fn record_path(&self) -> &std::path::Path {
        &self.record
    }

    /// What is wrong with the versions rota made, each named (empty: all keep the contract).
    pub fn launch_template_violations(&self) -> Vec<String> {
        let mut wrong = Vec::new();
        for v in self.created_versions() {
            let desc = v["description"].as_str().unwrap_or_default();
            if !desc.starts_with("rota: ") {
                continue; // made by the test itself
            }
            let at = format!("version {} ({desc})", v["versionNumber"]);
            let source = v["sourceVersion"].as_str().unwrap_or_default();
            if source.is_empty() || !source.chars().all(|c| c.is_ascii_digit()) {
                wrong.push(format!(
                    "{at}: SourceVersion {:?} is not a version number (the group's own version must be copied)",
                    v["sourceVersion"]
                ));
                continue;
            }
            if v["givenFields"] != serde_json::json!(["ImageId"]) {
                wrong.push(format!(
                    "{at}: LaunchTemplateData names {}, not the image only",
                    v["givenFields"]
                ));
            }
            let (Some(src), Some(data)) = (v["sourceData"].as_object(), v["data"].as_object())
            else {
                wrong.push(format!("{at}: no source or result data recorded"));
                continue;
            };
            for (k, val) in src {
                if k != "ImageId" && data.get(k) != Some(val) {
                    wrong.push(format!("{at}: {k} of version {source} not copied"));
                }
            }
            if data.get("ImageId") != Some(&v["givenImageId"]) || data.len() > src.len() + 1 {
                wrong.push(format!(
                    "{at}: holds more than the source's data and the new image"
                ));
            }
        }
        wrong
    }

    /// What moto printed, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let wrong = self.launch_template_violations();
            assert!(
                wrong.is_empty(),
                "CreateLaunchTemplateVersion broke set_image's contract:\n{}",
                wrong.join("\n")
            );
        }
    }
}

/// Put an SSM String parameter into moto (rota's dependencies have no SSM client: one JSON
/// request, as the SSM API takes it).
pub async fn put_ssm_parameter(url: &str, name: &str, value: &str) {
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    let client: Client<_, Full<bytes::Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let body = serde_json::json!({"Name": name, "Value": value, "Type": "String"}).to_string();
    let req = hyper::Request::post(url)
        .header("content-type", "application/x-amz-json-1.1")
        .header("x-amz-target", "AmazonSSM.PutParameter")
        .header(
            "authorization",
            format!("AWS4-HMAC-SHA256 Credential=testing/20260101/{REGION}/ssm/aws4_request, SignedHeaders=host, Signature=0"),
        )
        .body(Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let resp = client.request(req).await.expect("PutParameter to moto");
    let status = resp.status();
    let text = resp.into_body().collect().await.unwrap().to_bytes();
    assert!(
        status.is_success(),
        "PutParameter {name}: {status} {text:?}"
    );
}

/// Register an AMI named `name` in moto (as a snapshot-backed image) and return its ID.
pub async fn register_ami(ec2: &aws_sdk_ec2::Client, name: &str) -> String {
    ec2.register_image()
        .name(name)
        .root_device_name("/dev/xvda")
        .architecture(aws_sdk_ec2::types::ArchitectureValues::X8664)
        .send()
        .await
        .unwrap_or_else(|e| panic!("RegisterImage {name}: {e:?}"))
        .image_id()
        .expect("an image ID")
        .to_string()
}

/// A launch template booting `ami`, and an Auto Scaling group of `desired` instances on it
/// (min `min`, max `max`) over two zones. Returns the template ID.
pub async fn create_group(
    ec2: &aws_sdk_ec2::Client,
    asg: &aws_sdk_autoscaling::Client,
    name: &str,
    (min, desired, max): (u32, u32, u32),
    ami: &str,
) -> String {
    let lt = ec2
        .create_launch_template()
        .launch_template_name(format!("{name}-lt"))
        .launch_template_data(
            aws_sdk_ec2::types::RequestLaunchTemplateData::builder()
                .image_id(ami)
                .instance_type(aws_sdk_ec2::types::InstanceType::T3Medium)
                .build(),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateLaunchTemplate: {e:?}"));
    let lt_id = lt
        .launch_template()
        .and_then(|t| t.launch_template_id())
        .unwrap()
        .to_string();
    asg.create_auto_scaling_group()
        .auto_scaling_group_name(name)
        .launch_template(
            aws_sdk_autoscaling::types::LaunchTemplateSpecification::builder()
                .launch_template_id(&lt_id)
                .version("$Latest")
                .build(),
        )
        .min_size(min as i32)
        .max_size(max as i32)
        .desired_capacity(desired as i32)
        .availability_zones(format!("{REGION}a"))
        .availability_zones(format!("{REGION}b"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateAutoScalingGroup {name}: {e:?}"));
    lt_id
}
