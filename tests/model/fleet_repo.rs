//! The example fleet repo, the schemas' agreement with the typed model, the resolution of
//! desired state, and hostile input (alias bombs, deep nesting, oversize files, non-UTF-8,
//! symlinks leaving the repo).

use std::path::{Path, PathBuf};

use rota::fleet::model::{self, Manifest};
use rota::fleet::resolved::{BatchSize, Cloud, GateCheck, GroupRef, Mode, OnDrainTimeout};
use rota::fleet::{self, SourceFile, load_dir, load_files, schema, source, yaml};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn example() -> PathBuf {
    root().join("examples/fleet-repo")
}

#[test]
fn the_example_fleet_repo_is_valid_and_realistic() {
    let f = load_dir(example()).unwrap_or_else(|d| panic!("example is invalid:\n{d}"));
    let all = f.resolve_all().unwrap();
    assert!(all.len() >= 5);
    let clouds: std::collections::BTreeSet<Cloud> = all.iter().map(|c| c.cloud).collect();
    assert_eq!(clouds.len(), 3, "aws, gcp and azure");
    assert_eq!(f.waves().len(), 3);
    assert_eq!(f.spec.images.len(), 2, "two channels");
    for w in 0..3 {
        assert!(!f.clusters_in_wave(w).is_empty(), "wave {w} has clusters");
    }
    let kinds: Vec<&str> = f
        .gates
        .values()
        .map(|g| {
            let r = rota::fleet::resolve::resolve_gate(g).unwrap();
            match r.check {
                GateCheck::Prometheus { .. } => "prometheus",
                GateCheck::Pods { .. } => "pods",
                GateCheck::Events { .. } => "events",
            }
        })
        .collect();
    for k in ["prometheus", "pods", "events"] {
        assert!(kinds.contains(&k), "a {k} gate");
    }
    assert!(f.promotion_guard());
}

#[test]
fn resolution_merges_policies_pins_images_gates_and_modes() {
    let f = load_dir(example()).unwrap();
    let c = f.resolve_cluster("prod-use1").unwrap();
    assert_eq!(
        (c.wave.as_str(), c.wave_index, c.cloud),
        ("early", 1, Cloud::Aws)
    );
    let batch = c.pools.iter().find(|p| p.name == "batch").unwrap();
    // Pinned by wave `early`: general@2026.11.2, the aws image of that version.
    assert_eq!(batch.version, "2026.11.2");
    assert_eq!(batch.image, "ami-0f9e8d7c6b5a40312");
    assert_eq!(
        batch.group,
        GroupRef::Aws {
            region: "us-east-1".into(),
            auto_scaling_group: "eks-batch-20261020-5f1e2a90".into()
        }
    );
    // Pool overrides win, the cluster's maxParallelPools and the fleet's soaks are inherited.
    assert_eq!(batch.policy.batch, BatchSize::Percent(25));
    assert_eq!(batch.policy.max_parallel_pools, 2);
    assert_eq!(batch.policy.batch_soak.to_string(), "5m");
    assert_eq!(batch.policy.drain.on_timeout, OnDrainTimeout::Force);
    assert_eq!(batch.policy.drain.timeout.to_string(), "10m");
    assert!(
        batch.policy.windows.is_empty(),
        "the pool replaced the cluster's windows"
    );
    let general = c.pools.iter().find(|p| p.name == "general").unwrap();
    assert_eq!(general.policy.windows.len(), 1);
    assert_eq!(general.policy.windows[0].time_zone, "America/New_York");
    // Fleet gates, then the cluster's; the gpu pool adds its own.
    let names: Vec<&str> = general.gates.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["pods-healthy", "node-events", "error-rate"]);
    let gpu = c.pools.iter().find(|p| p.name == "gpu").unwrap();
    assert_eq!(gpu.gates.last().unwrap().name, "gpu-errors");
    assert_eq!(
        (gpu.version.as_str(), gpu.image.as_str()),
        ("2026.10.3", "ami-07c5e1d2b3a4f5968")
    );

    // Modes: readOnly cluster with one pool back to reconcile; a readOnly pool.
    let s = f.resolve_cluster("staging-neu").unwrap();
    assert_eq!(s.mode, Mode::ReadOnly);
    assert_eq!(s.pools[0].mode, Mode::Reconcile);
    assert_eq!(
        s.pools[0].group,
        GroupRef::Azure {
            subscription_id: "1b2c3d4e-0000-4000-8000-000000000003".into(),
            resource_group: "staging-neu".into(),
            scale_set: "aks-general-16180339-vmss".into()
        }
    );
    let w = f.resolve_cluster("prod-usw2").unwrap();
    let legacy = w.pools.iter().find(|p| p.name == "legacy").unwrap();
    assert_eq!(legacy.mode, Mode::ReadOnly);
    // GCP regional group.
    let e = f.resolve_cluster("prod-euw1").unwrap();
    assert!(
        matches!(&e.pools[0].group, GroupRef::Gcp { region: Some(r), zone: None, .. } if r == "europe-west1")
    );
    assert_eq!(
        e.pools[0].image,
        "projects/acme-images/global/images/general-2026-11-1"
    );

    let err = f.resolve_cluster("prod-use").unwrap_err();
    assert!(
        err.to_string().contains("did you mean `prod-use1`?"),
        "{err}"
    );
}

#[test]
fn fleet_ignore_is_the_kill_switch() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&example(), dir.path());
    let fleet_file = dir.path().join("fleet.yaml");
    let text = std::fs::read_to_string(&fleet_file).unwrap();
    std::fs::write(
        &fleet_file,
        text.replace("  mode: reconcile\n", "  mode: ignore\n"),
    )
    .unwrap();
    let f = load_dir(dir.path()).unwrap();
    for c in f.resolve_all().unwrap() {
        assert_eq!(c.mode, Mode::Ignore, "{}", c.name);
        for p in &c.pools {
            assert_eq!(p.mode, Mode::Ignore, "{}/{}", c.name, p.name);
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// Every YAML document we ship or test with.
fn all_documents() -> Vec<(String, yaml::Document)> {
    let mut files = Vec::new();
    for dir in ["examples/fleet-repo", "tests/fixtures/fleet"] {
        let (f, _) = source::read_dir(&root().join(dir)).unwrap();
        files.extend(f);
    }
    let mut docs = Vec::new();
    for f in files {
        let Ok(text) = String::from_utf8(f.bytes) else {
            continue;
        };
        if let Ok(d) = yaml::parse(&f.path, &text) {
            docs.extend(d.into_iter().map(|d| (f.path.clone(), d)));
        }
    }
    assert!(docs.len() > 200, "{} documents", docs.len());
    docs
}

/// Whether the typed model accepts a document. The one rule the schema deliberately leaves
/// to the model is the upper bound of durations (a regex cannot say "at most a year"), so a
/// refusal for that reason counts as agreement.
fn typed_ok(kind: &str, v: &serde_json::Value) -> bool {
    let r = match kind {
        "Fleet" => serde_json::from_value::<Manifest<model::FleetSpec>>(v.clone()).map(|_| ()),
        "Cluster" => serde_json::from_value::<Manifest<model::ClusterSpec>>(v.clone()).map(|_| ()),
        _ => serde_json::from_value::<Manifest<model::HealthGateSpec>>(v.clone()).map(|_| ()),
    };
    match r {
        Ok(()) => true,
        Err(e) => e.to_string().contains("longer than a year"),
    }
}

fn strictly_typed_ok(kind: &str, v: &serde_json::Value) -> bool {
    match kind {
        "Fleet" => serde_json::from_value::<Manifest<model::FleetSpec>>(v.clone()).is_ok(),
        "Cluster" => serde_json::from_value::<Manifest<model::ClusterSpec>>(v.clone()).is_ok(),
        _ => serde_json::from_value::<Manifest<model::HealthGateSpec>>(v.clone()).is_ok(),
    }
}

fn insert_everywhere(v: &serde_json::Value, here: String, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            out.push(here.clone());
            for (k, x) in m {
                insert_everywhere(x, format!("{here}/{}", yaml::escape_token(k)), out);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                insert_everywhere(x, format!("{here}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// The schema and the serde model must agree: on every shipped and fixture document, and on
/// every document with an extra field injected into every mapping (where a map of names
/// takes any key, both accept; where a struct is closed, both refuse).
#[test]
fn schema_and_typed_model_agree() {
    let mut checked = 0;
    for (file, doc) in all_documents() {
        let Some(kind) = doc.value.get("kind").and_then(|k| k.as_str()) else {
            continue;
        };
        if !model::KINDS.contains(&kind)
            || doc.value.get("apiVersion").and_then(|a| a.as_str()) != Some(model::API_VERSION)
        {
            continue;
        }
        let schema_ok = schema::validate(&file, kind, &doc.value, &doc.positions).is_empty();
        if schema_ok {
            assert!(
                typed_ok(kind, &doc.value),
                "{file}: schema accepts what the model refuses"
            );
            checked += 1;
            if !strictly_typed_ok(kind, &doc.value) {
                continue;
            }
            let mut pointers = Vec::new();
            insert_everywhere(&doc.value, String::new(), &mut pointers);
            for p in pointers {
                let mut v = doc.value.clone();
                v.pointer_mut(&p)
                    .unwrap()
                    .as_object_mut()
                    .unwrap()
                    .insert("zzz-extra".into(), serde_json::Value::String("x".into()));
                let d = yaml::Document {
                    index: 0,
                    value: v.clone(),
                    positions: doc.positions.clone(),
                };
                let s = schema::validate(&file, kind, &d.value, &d.positions).is_empty();
                let t = typed_ok(kind, &v);
                assert_eq!(s, t, "{file}: extra field at {p:?}: schema {s}, model {t}");
                checked += 1;
            }
        }
    }
    assert!(checked > 1000, "{checked} agreement checks");
}

#[test]
fn shared_schema_definitions_are_identical() {
    let parse = |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap();
    let (f, c, g) = (
        parse(schema::FLEET_SCHEMA),
        parse(schema::CLUSTER_SCHEMA),
        parse(schema::HEALTHGATE_SCHEMA),
    );
    for other in [&c, &g] {
        for (name, def) in other["$defs"].as_object().unwrap() {
            if let Some(mine) = f["$defs"].get(name) {
                assert_eq!(mine, def, "$defs/{name} differs between schemas");
            }
        }
    }
    // The schema files on disk are the embedded ones.
    assert_eq!(
        std::fs::read_to_string(root().join("schemas/fleet.schema.json")).unwrap(),
        schema::FLEET_SCHEMA
    );
}

// ------------------------------------------------------------------------- hostile input

fn one(path: &str, bytes: Vec<u8>) -> fleet::Diagnostics {
    load_files(&[SourceFile {
        path: path.into(),
        bytes,
    }])
    .unwrap_err()
}

#[test]
fn an_alias_bomb_is_refused_at_the_first_alias() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let refs = vec![format!("*a{}", i - 1); 9].join(", ");
        text.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    let start = std::time::Instant::now();
    let d = one("bomb.yaml", text.into_bytes());
    assert_eq!(
        (d.0[0].line, d.0[0].message.contains("aliases")),
        (2, true),
        "{d}"
    );
    // Not a timing assertion on the loader's speed, just a guard against expansion: 9^11
    // nodes would take hours.
    assert!(start.elapsed().as_secs() < 30);
}

#[test]
fn deep_nesting_is_refused() {
    for text in [
        "[".repeat(10_000),
        "a:\n".to_string()
            + &(1..200)
                .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
                .collect::<String>(),
    ] {
        let d = one("deep.yaml", text.into_bytes());
        // Flow nesting trips the parser's own recursion limit first; block nesting ours.
        let m = &d.0[0].message;
        assert!(
            m.contains("nesting deeper than 32") || m.contains("recursion limit"),
            "{d}"
        );
    }
}

#[test]
fn non_utf8_is_refused_with_its_position() {
    let mut bytes = b"apiVersion: rota.dev/v1alpha1\nkind: Fl".to_vec();
    bytes.push(0xff);
    let d = one("bin.yaml", bytes);
    assert_eq!((d.0[0].line, d.0[0].column), (2, 9));
    assert!(d.0[0].message.contains("UTF-8"));
}

#[test]
fn oversize_files_are_not_read() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&example(), dir.path());
    let big = format!("# {}\n", "x".repeat(source::MAX_FILE_BYTES as usize));
    std::fs::write(dir.path().join("big.yaml"), big).unwrap();
    let d = load_dir(dir.path()).unwrap_err();
    assert_eq!(d.len(), 1, "{d}");
    assert_eq!(d.0[0].file, "big.yaml");
    assert!(d.0[0].message.contains("larger than the limit"), "{d}");
}

#[test]
fn symlinks_leaving_the_repo_are_refused_and_inside_ones_followed() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.yaml"), "a: 1\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&example(), dir.path());
    std::os::unix::fs::symlink(
        outside.path().join("secret.yaml"),
        dir.path().join("leak.yaml"),
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("elsewhere")).unwrap();
    let d = load_dir(dir.path()).unwrap_err();
    let files: Vec<&str> = d.iter().map(|x| x.file.as_str()).collect();
    assert_eq!(files, ["elsewhere", "leak.yaml"], "{d}");
    assert!(d.0[0].message.contains("outside the fleet repo"));

    // A link to a file inside the repo is followed (here the only way the gate is read).
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&example(), dir.path());
    std::fs::create_dir(dir.path().join("extra")).unwrap();
    std::fs::rename(
        dir.path().join("gates/node-events.yaml"),
        dir.path().join("extra/node-events.txt"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        "../extra/node-events.txt",
        dir.path().join("gates/node-events.yaml"),
    )
    .unwrap();
    let f = load_dir(dir.path()).unwrap_or_else(|d| panic!("{d}"));
    assert!(f.gates.contains_key("node-events"));

    // A dangling link is reported, not silently skipped.
    std::fs::remove_file(dir.path().join("extra/node-events.txt")).unwrap();
    let d = load_dir(dir.path()).unwrap_err();
    assert!(d.iter().any(|x| x.file == "gates/node-events.yaml"), "{d}");
}

#[test]
fn hidden_folders_and_other_files_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&example(), dir.path());
    std::fs::create_dir(dir.path().join(".github")).unwrap();
    std::fs::write(dir.path().join(".github/ci.yaml"), "on: push\n").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not yaml: [\n").unwrap();
    assert!(load_dir(dir.path()).is_ok());
}

#[test]
fn errors_in_several_files_are_all_reported() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&example(), dir.path());
    let edit = |rel: &str, from: &str, to: &str| {
        let p = dir.path().join(rel);
        let t = std::fs::read_to_string(&p).unwrap();
        assert!(t.contains(from), "{rel}");
        std::fs::write(&p, t.replacen(from, to, 1)).unwrap();
    };
    edit(
        "clusters/aws/prod-use1.yaml",
        "maxParallelPools: 2",
        "maxParallelPool: 2",
    );
    edit(
        "clusters/gcp/dev-usc1.yaml",
        "zone: us-central1-a",
        "zone: us-central1-a, scaleSet: x",
    );
    edit(
        "gates/node-events.yaml",
        "window: 10m",
        "window: 10 minutes",
    );
    // Even with the Fleet document rejected, the clusters' own mistakes are reported.
    edit("fleet.yaml", "  promotion:", "  promotoin:");
    let d = load_dir(dir.path()).unwrap_err();
    let files: Vec<String> = d.iter().map(|x| format!("{}:{}", x.file, x.line)).collect();
    assert_eq!(
        files,
        [
            "clusters/aws/prod-use1.yaml:12",
            "clusters/gcp/dev-usc1.yaml:17",
            "fleet.yaml:67",
            "gates/node-events.yaml:12"
        ],
        "{d}"
    );
}

// ------------------------------------------------------------------------- notifications

#[test]
fn notification_webhooks_inherit_from_the_fleet_unless_a_cluster_sets_its_own() {
    let path = root().join("tests/fixtures/fleet/valid/notifications.yaml");
    let fleet = load_files(&[SourceFile {
        path: "notifications.yaml".into(),
        bytes: std::fs::read(path).unwrap(),
    }])
    .unwrap();
    let c1 = fleet.notifications_for("c1").unwrap();
    assert_eq!(c1.len(), 1);
    assert_eq!(c1[0].name, "platform-slack");
    assert_eq!(c1[0].url_env.as_deref(), Some("ROTA_SLACK_WEBHOOK_URL"));
    assert_eq!(c1[0].min_interval.unwrap().as_duration().as_secs(), 120);
    let c2 = fleet.notifications_for("c2").unwrap();
    assert_eq!(c2.len(), 1);
    assert_eq!(c2[0].name, "team-gcp");
    assert_eq!(c2[0].url_secret.as_deref(), Some("team-gcp-webhook"));
    assert_eq!(fleet.notifications_for("nope"), None);
    // Files without the extension stay valid and notify nowhere.
    let base = load_files(&[SourceFile {
        path: "base.yaml".into(),
        bytes: std::fs::read(root().join("tests/fixtures/fleet/valid/base.yaml")).unwrap(),
    }])
    .unwrap();
    assert_eq!(base.notifications_for("c1"), Some(vec![]));
}
