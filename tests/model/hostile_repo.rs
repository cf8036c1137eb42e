//! The hostile-repo corpus: fleet repos written as an attacker with pull-request rights (or
//! a careless merge) would write them. Every case is generated in code from the valid base
//! fixture and asserts either acceptance or a clear, bounded error naming file, line and field;
//! none may panic, and no diagnostic may echo a huge value (a 1 MB `timeZone` used to be
//! echoed whole after 13 s of "did you mean"; a YAML key tens of kilobytes long made memory
//! grow with the square of the file). Git-level cases (trees, notes) are in
//! `tests/git/hostile_git.rs`.

use rota::fleet::diagnostics::{MAX_MESSAGE, MAX_PATH};
use rota::fleet::{Diagnostics, Fleet, SourceFile, load_files, yaml};

const BASE: &str = include_str!("../fixtures/fleet/valid/base.yaml");
const FILE: &str = "fleet.yaml";

/// `BASE` with `from` (which must occur) replaced by `to`.
fn with(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "the base fixture holds {from:?}");
    BASE.replacen(from, to, 1)
}

fn load(text: &[u8]) -> Result<Fleet, Diagnostics> {
    load_files(&[SourceFile {
        path: FILE.into(),
        bytes: text.to_vec(),
    }])
}

/// What holds of any outcome: no panic, every diagnostic bounded and placed in the file.
fn outcome(name: &str, text: &[u8]) -> Result<Fleet, Diagnostics> {
    let r = std::panic::catch_unwind(|| load(text))
        .unwrap_or_else(|_| panic!("{name}: the loader panicked"));
    if let Err(d) = &r {
        assert!(!d.is_empty(), "{name}: an error without diagnostics");
        for x in d.iter() {
            assert!(
                x.message.len() <= MAX_MESSAGE,
                "{name}: message of {} bytes",
                x.message.len()
            );
            assert!(
                x.path.len() <= MAX_PATH,
                "{name}: path of {} bytes",
                x.path.len()
            );
            assert!(
                x.hint.as_ref().is_none_or(|h| h.len() <= MAX_MESSAGE),
                "{name}: hint"
            );
            assert!(x.file == FILE || x.file.is_empty(), "{name}: {x:?}");
        }
        // The whole report stays small whatever the input's size.
        assert!(
            d.render_human().len() <= 64 * 1024,
            "{name}: report of {} bytes",
            d.render_human().len()
        );
    }
    r
}

/// Refused, with a diagnostic at a line of the file, on a field whose path contains `path`
/// and whose message (or hint) contains `says`.
fn refused(name: &str, text: impl AsRef<[u8]>, path: &str, says: &str) {
    let d = match outcome(name, text.as_ref()) {
        Ok(_) => panic!("{name}: accepted"),
        Err(d) => d,
    };
    let hit = d.iter().find(|x| {
        x.path.contains(path)
            && (x.message.contains(says) || x.hint.as_ref().is_some_and(|h| h.contains(says)))
    });
    let Some(hit) = hit else {
        panic!("{name}: no diagnostic on {path:?} saying {says:?}:\n{d}");
    };
    assert_eq!(hit.file, FILE, "{name}: {hit:?}");
    assert!(hit.line > 0, "{name}: no line: {hit:?}");
}

/// Accepted, and resolves for every cluster.
fn accepted(name: &str, text: impl AsRef<[u8]>) {
    match outcome(name, text.as_ref()) {
        Ok(fleet) => {
            for c in fleet.cluster_names() {
                assert!(fleet.resolve_cluster(c).is_ok(), "{name}: {c}");
            }
        }
        Err(d) => panic!("{name}: refused:\n{d}"),
    }
}

const BIG: usize = 1024 * 1024 - 64 * 1024;

// ------------------------------------------------------------------ YAML structure

#[test]
fn billion_laughs_is_refused_at_the_first_alias() {
    let mut t = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        t.push_str(&format!(
            "{}: &{} [*{}, *{}, *{}, *{}]\n",
            (b'a' + i) as char,
            (b'a' + i) as char,
            (b'a' + i - 1) as char,
            (b'a' + i - 1) as char,
            (b'a' + i - 1) as char,
            (b'a' + i - 1) as char
        ));
    }
    refused("billion laughs", t, "", "aliases");
}

#[test]
fn anchors_without_aliases_are_harmless_and_accepted() {
    accepted(
        "anchor",
        with("metadata: {name: acme}", "metadata: &m {name: acme}"),
    );
}

#[test]
fn tags_are_refused() {
    refused(
        "core tag",
        with("batchSoak: 5m", "batchSoak: !!str 5m"),
        "",
        "tags",
    );
    refused(
        "local tag",
        with("rollout:\n    batch", "rollout: !evil\n    batch"),
        "",
        "tags",
    );
    refused(
        "binary",
        with("soak: 1h", "soak: !!binary aGk="),
        "",
        "tags",
    );
}

#[test]
fn deep_nesting_is_refused_in_flow_and_block_style() {
    // The parser's own recursion limit or ours, whichever comes first.
    refused("flow", "[".repeat(100_000), "", "recursion limit exceeded");
    refused(
        "flow within the parser's limit",
        "[".repeat(40),
        "",
        "nesting deeper",
    );
    let mut block = String::new();
    for i in 0..200 {
        block.push_str(&" ".repeat(i));
        block.push_str("k:\n");
    }
    refused("block", block, "", "nesting deeper");
}

#[test]
fn duplicate_keys_are_refused_with_both_lines() {
    refused(
        "duplicate",
        with(
            "    batchSoak: 5m\n",
            "    batchSoak: 5m\n    batchSoak: 1m\n",
        ),
        "",
        "duplicate key `batchSoak`",
    );
    refused(
        "duplicate with first line",
        with(
            "    batchSoak: 5m\n",
            "    batchSoak: 5m\n    batchSoak: 1m\n",
        ),
        "",
        "first defined at line 26",
    );
}

/// A key tens of kilobytes long above many nodes: quadratic memory before (90 KB: 1 GiB).
#[test]
fn a_long_key_costs_memory_linear_in_the_file() {
    let key = "k".repeat(45_000);
    let items = vec!["1"; 22_000].join(",");
    // An explicit key (`? key`): implicit keys stop at 1024 characters, explicit ones do not.
    let text = format!("? {key}\n:\n  x: [{items}]\n");
    let docs = yaml::parse(FILE, &text).unwrap();
    let bytes = docs[0].positions.stored_bytes();
    assert!(
        bytes <= 64 * text.len(),
        "positions hold {bytes} bytes for a {} byte file",
        text.len()
    );
    assert_eq!(docs[0].positions.value(&format!("/{key}/x/21999")).line, 3);
    // And as a repo: a clear error, the key not echoed whole.
    let in_spec = with(
        "  rollout:\n",
        &format!("  ? {key}\n  : [{items}]\n  rollout:\n"),
    );
    refused("long key", in_spec, "spec.kkkk", "unknown field");
}

#[test]
fn many_documents_are_read_and_empty_ones_skipped() {
    let mut t = "---\n# nothing\n".repeat(20_000);
    t.push_str(BASE);
    accepted("many empty documents", t);
    let gates: String = (0..2000)
        .map(|i| format!("---\napiVersion: rota.dev/v1alpha1\nkind: HealthGate\nmetadata: {{name: g{i}}}\nspec: {{pods: {{maxPending: 1}}}}\n"))
        .collect();
    accepted("two thousand gates", format!("{BASE}{gates}"));
    let fleets = format!("---\n{}", BASE.split("---").next().unwrap()).repeat(300);
    refused(
        "three hundred fleets",
        format!("{BASE}{fleets}"),
        "metadata.name",
        "a second Fleet document",
    );
}

#[test]
fn control_characters_nul_bytes_and_bad_utf8_are_refused() {
    refused(
        "escaped control",
        with("metadata: {name: c1}", "metadata: {name: \"c\\x011\"}"),
        "metadata.name",
        "DNS-1123",
    );
    let mut raw = with("metadata: {name: c1}", "metadata: {name: c\u{7}1}").into_bytes();
    raw.extend_from_slice(b"\n");
    refused("raw bell", raw, "", "");
    refused(
        "nul",
        with("metadata: {name: c1}", "metadata: {name: c\u{0}1}"),
        "",
        "",
    );
    let mut bad = BASE.as_bytes().to_vec();
    bad.extend_from_slice(b"# \xff\xfe\n");
    refused("bad utf-8", bad, "", "not valid UTF-8");
}

#[test]
fn windows_line_endings_and_a_byte_order_mark_are_fine() {
    accepted("crlf", BASE.replace('\n', "\r\n"));
    accepted("bom", format!("\u{feff}{BASE}"));
}

#[test]
fn a_document_that_is_one_huge_scalar_is_refused() {
    refused(
        "scalar document",
        "a".repeat(BIG),
        "",
        "a document must be a mapping",
    );
}

// ------------------------------------------------------------------ huge strings in fields

#[test]
fn a_megabyte_time_zone_is_refused_quickly_and_not_echoed() {
    let tz = "Europe/Berlin".repeat(BIG / 13);
    refused(
        "huge timeZone",
        with("timeZone: Europe/Berlin", &format!("timeZone: {tz}")),
        "timeZone",
        "",
    );
}

#[test]
fn huge_strings_in_every_string_field_are_refused() {
    let huge = "a".repeat(200_000);
    let cases: Vec<(&str, &str, String, &str)> = vec![
        (
            "fleet name",
            "metadata: {name: acme}",
            format!("metadata: {{name: {huge}}}"),
            "metadata.name",
        ),
        (
            "cluster label",
            "labels: {ring: main}",
            format!("labels: {{ring: {huge}}}"),
            "metadata.labels.ring",
        ),
        (
            "label key",
            "labels: {ring: main}",
            format!("labels: {{? {huge} : main}}"),
            "metadata.labels",
        ),
        (
            "channel",
            "    general:\n      versions",
            format!("    ? {huge}\n    :\n      versions"),
            "spec.images",
        ),
        (
            "version key",
            "        \"1.0.0\":\n",
            format!("        ? \"{huge}\"\n        :\n"),
            "spec.images.general.versions",
        ),
        (
            "aws image",
            "aws: ami-0a1b2c3d4e5f60718",
            format!("aws: ami-{huge}"),
            "aws",
        ),
        (
            "gcp image",
            "gcp: projects/acme/global/images/general-1-0-0",
            format!("gcp: projects/{huge}"),
            "gcp",
        ),
        (
            "wave name",
            "- name: canary",
            format!("- name: {huge}"),
            "spec.waves[0].name",
        ),
        (
            "wave cluster",
            "clusters: [c1]",
            format!("clusters: [{huge}]"),
            "spec.waves[0].clusters[0]",
        ),
        (
            "pin",
            "images: {general: \"1.0.1\"}",
            format!("images: {{general: \"{huge}\"}}"),
            "spec.waves[0].images.general",
        ),
        (
            "duration",
            "soak: 1h",
            format!("soak: {}h", "9".repeat(200_000)),
            "spec.waves[0].soak",
        ),
        (
            "batch",
            "batch: \"20%\"",
            format!("batch: \"{huge}\""),
            "spec.rollout.batch",
        ),
        (
            "gate ref",
            "gates: [pods-ok]",
            format!("gates: [{huge}]"),
            "spec.gates[0]",
        ),
        (
            "region",
            "region: us-east-1",
            format!("region: {huge}"),
            "region",
        ),
        (
            "project",
            "project: p,",
            format!("project: {huge},"),
            "project",
        ),
        (
            "node selector",
            "nodeSelector: {pool: general}",
            format!("nodeSelector: {{pool: {huge}}}"),
            "nodeSelector.pool",
        ),
        (
            "group",
            "autoScalingGroup: asg-general",
            format!("autoScalingGroup: {huge}"),
            "autoScalingGroup",
        ),
        (
            "pool channel",
            "      channel: general\n      nodeSelector: {pool: general}\n      group: {autoScalingGroup",
            format!(
                "      channel: {huge}\n      nodeSelector: {{pool: general}}\n      group: {{autoScalingGroup"
            ),
            "channel",
        ),
        (
            "window start",
            "start: \"09:00\"",
            format!("start: \"{huge}\""),
            "start",
        ),
        (
            "gate percent",
            "maxNotReady: \"5%\"",
            format!("maxNotReady: \"{huge}\""),
            "maxNotReady",
        ),
    ];
    for (name, from, to, path) in cases {
        refused(name, with(from, &to), path, "");
    }
}

#[test]
fn huge_strings_in_a_prometheus_gate_and_a_notification_are_refused() {
    let huge = "x".repeat(300_000);
    let gate = |address: &str, query: &str| {
        format!(
            "{BASE}---\napiVersion: rota.dev/v1alpha1\nkind: HealthGate\nmetadata: {{name: prom}}\nspec:\n  prometheus:\n    address: {address}\n    query: {query}\n    max: 1\n"
        )
    };
    refused(
        "query",
        gate("http://prometheus.monitoring:9090", &huge),
        "spec.prometheus.query",
        "",
    );
    refused(
        "address",
        gate(&format!("http://{huge}"), "up"),
        "spec.prometheus.address",
        "",
    );
    let hook = |field: &str| {
        with(
            "  gates: [pods-ok]\n",
            &format!("  gates: [pods-ok]\n  notifications:\n    - name: ops\n      {field}\n"),
        )
    };
    refused(
        "url",
        hook(&format!("url: https://{huge}")),
        "spec.notifications[0].url",
        "",
    );
    refused(
        "urlEnv",
        hook(&format!("urlEnv: {}", "A".repeat(200_000))),
        "spec.notifications[0].urlEnv",
        "",
    );
}

#[test]
fn unknown_fields_with_huge_names_get_no_costly_hint() {
    let name = format!("batchSoak{}", "e".repeat(500_000));
    refused(
        "huge unknown field",
        with(
            "    batchSoak: 5m\n",
            &format!("    batchSoak: 5m\n    ? {name}\n    : 1m\n"),
        ),
        "spec.rollout",
        "unknown field",
    );
    // Written as an implicit key, YAML itself stops at 1024 characters.
    refused(
        "huge implicit key",
        with(
            "    batchSoak: 5m\n",
            &format!("    batchSoak: 5m\n    {name}: 1m\n"),
        ),
        "",
        "invalid YAML",
    );
    // A near miss still gets its hint.
    refused(
        "typo",
        with(
            "    batchSoak: 5m\n",
            "    batchSoak: 5m\n    poolSoke: 1m\n",
        ),
        "spec.rollout.poolSoke",
        "did you mean `poolSoak`?",
    );
}

// ------------------------------------------------------------------ names

#[test]
fn unicode_confusables_in_names_are_refused() {
    // Cyrillic "с" (U+0441) looks like Latin "c".
    refused(
        "cluster name",
        with("metadata: {name: c1}", "metadata: {name: \u{441}1}"),
        "metadata.name",
        "DNS-1123",
    );
    refused(
        "wave cluster ref",
        with("clusters: [c1]", "clusters: [\u{441}1]"),
        "spec.waves[0].clusters[0]",
        "",
    );
    // Fullwidth digit.
    refused(
        "pool name",
        with(
            "    - name: general\n      channel: general\n      nodeSelector: {pool: general}\n      group: {autoScalingGroup",
            "    - name: general\u{ff11}\n      channel: general\n      nodeSelector: {pool: general}\n      group: {autoScalingGroup",
        ),
        "spec.pools[0].name",
        "",
    );
    // Zero-width space inside a gate name.
    refused(
        "gate name",
        with(
            "metadata: {name: pods-ok}",
            "metadata: {name: \"pods\u{200b}-ok\"}",
        ),
        "metadata.name",
        "",
    );
}

// ------------------------------------------------------------------ numbers, durations, percentages

#[test]
fn numbers_out_of_range_are_refused() {
    refused(
        "batch too big for u64",
        with("batch: \"20%\"", "batch: 99999999999999999999999999"),
        "spec.rollout.batch",
        "",
    );
    refused(
        "batch zero",
        with("batch: \"20%\"", "batch: 0"),
        "spec.rollout.batch",
        "",
    );
    refused(
        "batch negative",
        with("batch: \"20%\"", "batch: -1"),
        "spec.rollout.batch",
        "",
    );
    refused(
        "batch fraction",
        with("batch: \"20%\"", "batch: 1.5"),
        "spec.rollout.batch",
        "",
    );
    refused(
        "batch exponent",
        with("batch: \"20%\"", "batch: 1e400"),
        "spec.rollout.batch",
        "",
    );
    refused(
        "parallel pools over u32",
        with(
            "    batchSoak: 5m\n",
            "    batchSoak: 5m\n    maxParallelPools: 4294967296\n",
        ),
        "spec.rollout.maxParallelPools",
        "",
    );
    refused(
        "percent over 100",
        with(
            "    batchSoak: 5m\n",
            "    batchSoak: 5m\n    percent: 101\n",
        ),
        "spec.rollout.percent",
        "",
    );
}

#[test]
fn durations_that_overflow_are_refused() {
    refused(
        "hours",
        with("batchSoak: 5m", "batchSoak: 999999999999h"),
        "spec.rollout.batchSoak",
        "",
    );
    refused(
        "digits",
        with("batchSoak: 5m", &format!("batchSoak: {}ms", "9".repeat(30))),
        "spec.rollout.batchSoak",
        "",
    );
    refused(
        "sum",
        with(
            "batchSoak: 5m",
            &format!("batchSoak: {}", "8000h".repeat(6)),
        ),
        "spec.rollout.batchSoak",
        "",
    );
    refused(
        "days",
        with("batchSoak: 5m", "batchSoak: 1d"),
        "spec.rollout.batchSoak",
        "",
    );
    refused(
        "negative",
        with("batchSoak: 5m", "batchSoak: -5m"),
        "spec.rollout.batchSoak",
        "",
    );
}

#[test]
fn percentages_over_100_or_malformed_are_refused_and_100_accepted() {
    refused(
        "101%",
        with("batch: \"20%\"", "batch: \"101%\""),
        "spec.rollout.batch",
        "",
    );
    refused(
        "0%",
        with("batch: \"20%\"", "batch: \"0%\""),
        "spec.rollout.batch",
        "",
    );
    refused(
        "float percent",
        with("batch: \"20%\"", "batch: \"12.5%\""),
        "spec.rollout.batch",
        "",
    );
    refused(
        "gate 101%",
        with("maxNotReady: \"5%\"", "maxNotReady: \"101%\""),
        "maxNotReady",
        "",
    );
    accepted("100%", with("batch: \"20%\"", "batch: \"100%\""));
}

// ------------------------------------------------------------------ windows and time zones

#[test]
fn windows_are_checked() {
    refused(
        "24:00",
        with("start: \"09:00\"", "start: \"24:00\""),
        "start",
        "",
    );
    // YAML 1.2 has no sexagesimal numbers: unquoted, 09:00 is still the string "09:00".
    accepted("unquoted time", with("start: \"09:00\"", "start: 09:00"));
    refused(
        "bad day",
        with("days: [Mon, Tue]", "days: [Mon, Funday]"),
        "days",
        "",
    );
    refused(
        "never opens",
        with("end: \"17:00\"", "end: \"09:00\""),
        "end",
        "would never open",
    );
    refused(
        "path as zone",
        with(
            "timeZone: Europe/Berlin",
            "timeZone: ../../../../etc/passwd",
        ),
        "timeZone",
        "unknown time zone",
    );
    refused(
        "zone typo",
        with("timeZone: Europe/Berlin", "timeZone: Europe/Berlinn"),
        "timeZone",
        "did you mean `Europe/Berlin`?",
    );
    accepted("UTC", with("timeZone: Europe/Berlin", "timeZone: UTC"));
}

// ------------------------------------------------------------------ paths and URLs

#[test]
fn a_notification_never_names_a_file_the_agent_opens() {
    let hook = |field: &str| {
        with(
            "  gates: [pods-ok]\n",
            &format!("  gates: [pods-ok]\n  notifications:\n    - name: ops\n      {field}\n"),
        )
    };
    refused(
        "urlFile /dev/zero",
        hook("urlFile: /dev/zero"),
        "spec.notifications[0].urlFile",
        "urlFile is no longer supported",
    );
    refused(
        "urlSecret path",
        hook("urlSecret: ../../etc/shadow"),
        "spec.notifications[0].urlSecret",
        "",
    );
    refused(
        "urlSecret absolute",
        hook("urlSecret: /dev/zero"),
        "spec.notifications[0].urlSecret",
        "",
    );
    accepted("urlSecret name", hook("urlSecret: ops-slack.url"));
}

#[test]
fn urls_with_credentials_are_refused_without_echoing_them() {
    let gate = |address: &str| {
        format!(
            "{BASE}---\napiVersion: rota.dev/v1alpha1\nkind: HealthGate\nmetadata: {{name: prom}}\nspec:\n  prometheus:\n    address: {address}\n    query: up\n    min: 1\n"
        )
    };
    let text = gate("http://admin:hunter2@prometheus.monitoring:9090");
    refused(
        "prometheus creds",
        &text,
        "spec.prometheus.address",
        "user name or password",
    );
    let d = load(text.as_bytes()).unwrap_err();
    assert!(!d.render_human().contains("hunter2"), "{d}");
    accepted(
        "prometheus plain",
        gate("http://prometheus.monitoring:9090"),
    );
    let hook = with(
        "  gates: [pods-ok]\n",
        "  gates: [pods-ok]\n  notifications:\n    - name: ops\n      url: https://bot:s3cret@hooks.example.com/x\n",
    );
    refused(
        "webhook creds",
        &hook,
        "spec.notifications[0].url",
        "user name or password",
    );
    assert!(
        !load(hook.as_bytes())
            .unwrap_err()
            .render_human()
            .contains("s3cret")
    );
}

#[test]
fn image_ids_that_are_not_their_clouds_shape_are_refused() {
    refused(
        "aws path",
        with(
            "aws: ami-0a1b2c3d4e5f60718",
            "aws: ../../ami-0a1b2c3d4e5f60718",
        ),
        "aws",
        "",
    );
    refused(
        "gcp url",
        with(
            "gcp: projects/acme/global/images/general-1-0-0",
            "gcp: https://evil.example/x",
        ),
        "gcp",
        "",
    );
}

// ------------------------------------------------------------------ files

#[test]
fn oversized_and_empty_files_are_refused_by_the_directory_reader() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fleet.yaml"), BASE).unwrap();
    std::fs::write(dir.path().join("big.yaml"), "#".repeat(1024 * 1024 + 1)).unwrap();
    let d = rota::fleet::load_dir(dir.path()).unwrap_err();
    let hit = d
        .iter()
        .find(|x| x.file == "big.yaml")
        .unwrap_or_else(|| panic!("{d}"));
    assert!(hit.message.contains("larger than"), "{hit:?}");
    let empty = tempfile::tempdir().unwrap();
    std::fs::write(empty.path().join("fleet.yaml"), "").unwrap();
    let d = rota::fleet::load_dir(empty.path()).unwrap_err();
    assert!(d.render_human().contains("no Fleet document found"), "{d}");
}
