//! Property tests over the loader with hostile input: arbitrary bytes, YAML-shaped noise, and
//! random mutations of a valid fleet. The loader must never panic; whatever it accepts must
//! resolve for every cluster and render to YAML that reads back identically.
//!
//! The YAML reader's own target builds documents from long keys, deep and wide nesting and
//! many scalars, and checks that what it keeps (the position tree) stays linear in the input
//! (a key tens of kilobytes long above many nodes used to cost memory with the square of the
//! file), and that every diagnostic stays bounded.
//!
//! Case counts default to a few hundred per property so the suite stays fast; set
//! `PROPTEST_CASES=100000` for a long run.

use proptest::prelude::*;
use rota::fleet::{Fleet, SourceFile, load_files, yaml};

const BASE: &str = include_str!("../fixtures/fleet/valid/base.yaml");

fn load(bytes: Vec<u8>) -> Result<Fleet, rota::fleet::Diagnostics> {
    load_files(&[SourceFile {
        path: "fuzz.yaml".into(),
        bytes,
    }])
}

/// What must hold of any outcome.
fn check(bytes: Vec<u8>) -> Result<(), TestCaseError> {
    match load(bytes) {
        Ok(fleet) => {
            for c in fleet.cluster_names() {
                let d = fleet.resolve_cluster(c);
                prop_assert!(d.is_ok(), "a loaded fleet must resolve {c}: {d:?}");
                let v = serde_json::to_value(d.unwrap()).unwrap();
                let back = yaml::parse("render.yaml", &yaml::to_yaml(&v)).unwrap();
                prop_assert_eq!(&back[0].value, &v);
            }
        }
        Err(d) => {
            prop_assert!(!d.is_empty());
            for x in d.iter() {
                prop_assert!(!x.message.is_empty());
                // Either about the file, or about the repo as a whole ("no Fleet document").
                prop_assert!(
                    x.file == "fuzz.yaml" || (x.file.is_empty() && x.line == 0),
                    "{x:?}"
                );
            }
        }
    }
    Ok(())
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(300),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Pieces that exercise YAML's structure: indicators, anchors, tags, quotes, document markers.
fn yaml_noise() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "\n",
        "  ",
        "- ",
        ": ",
        "a",
        "spec",
        "kind: Fleet",
        "apiVersion: rota.dev/v1alpha1",
        "{",
        "}",
        "[",
        "]",
        ",",
        "&x ",
        "*x",
        "!!str ",
        "!t ",
        "\"",
        "'",
        "#",
        "---\n",
        "...\n",
        "|\n",
        ">-\n",
        "? ",
        "1.5",
        "~",
        "true",
        "0x1F",
        "\t",
        "\u{feff}",
        "é",
        "\\u0000",
        "%YAML 1.2\n",
    ]);
    prop::collection::vec(atoms, 0..200).prop_map(|v| v.concat())
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Duplicate(usize, usize),
}

fn mutate(base: &[u8], ms: &[Mutation]) -> Vec<u8> {
    let mut b = base.to_vec();
    for m in ms {
        if b.is_empty() {
            break;
        }
        match *m {
            Mutation::Flip(i, x) => {
                let i = i % b.len();
                b[i] ^= x;
            }
            Mutation::Insert(i, x) => {
                let i = i % (b.len() + 1);
                b.insert(i, x);
            }
            Mutation::Delete(i) => {
                let i = i % b.len();
                b.remove(i);
            }
            Mutation::Duplicate(i, n) => {
                let i = i % b.len();
                let end = (i + n % 64).min(b.len());
                let chunk = b[i..end].to_vec();
                b.splice(i..i, chunk);
            }
        }
    }
    b
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let text_bytes = prop::sample::select(b" \n:-[]{}#&*!'\",0123456789abcz%.".to_vec());
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, x)| Mutation::Flip(i, x)),
        (any::<usize>(), text_bytes).prop_map(|(i, x)| Mutation::Insert(i, x)),
        any::<usize>().prop_map(Mutation::Delete),
        (any::<usize>(), any::<usize>()).prop_map(|(i, n)| Mutation::Duplicate(i, n)),
    ]
}

/// A YAML document made of `depth` nested block mappings under keys of `key_len` bytes, each
/// level holding `width` flow sequences of `items` scalars: the shapes that multiply.
fn shaped_document() -> impl Strategy<Value = String> {
    (
        1usize..20_000,
        1usize..12,
        1usize..6,
        0usize..1_500,
        any::<bool>(),
    )
        .prop_map(|(key_len, depth, width, items, quoted)| {
            let mut out = String::new();
            for d in 0..depth {
                let pad = "  ".repeat(d);
                let key: String =
                    std::iter::repeat_n((b'a' + (d % 26) as u8) as char, key_len).collect();
                for w in 0..width {
                    let seq = vec![if quoted { "\"v\"" } else { "1" }; items].join(",");
                    out.push_str(&format!("{pad}s{w}: [{seq}]\n"));
                }
                out.push_str(&format!("{pad}{key}:\n"));
            }
            out.push_str(&format!("{}leaf: x\n", "  ".repeat(depth)));
            out
        })
}

proptest! {
    // Each case is up to a megabyte of YAML: a quarter of the usual count.
    #![proptest_config(ProptestConfig { cases: config().cases.div_ceil(4), ..config() })]

    /// The YAML reader on hostile shapes: it answers, and the positions it keeps are linear in
    /// the input whatever the shape.
    #[test]
    fn the_yaml_reader_stays_linear_in_memory(text in shaped_document()) {
        match yaml::parse("fuzz.yaml", &text) {
            Ok(docs) => {
                for d in &docs {
                    let kept = d.positions.stored_bytes();
                    prop_assert!(kept <= 64 * text.len() + 4096, "{} bytes kept for {} of input", kept, text.len());
                }
            }
            Err(d) => prop_assert!(d.message.len() <= rota::fleet::diagnostics::MAX_MESSAGE),
        }
        check(text.into_bytes())?;
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        check(bytes)?;
    }

    #[test]
    fn yaml_shaped_noise_never_panics(text in yaml_noise()) {
        check(text.into_bytes())?;
    }

    #[test]
    fn mutated_fleets_never_panic(ms in prop::collection::vec(mutation(), 1..8)) {
        check(mutate(BASE.as_bytes(), &ms))?;
    }
}

#[test]
fn the_unmutated_base_loads() {
    assert!(load(BASE.as_bytes().to_vec()).is_ok());
}
