//! Kubernetes resource quantities, as far as the simulated scheduler needs them: CPU in
//! millicores and memory in bytes.
//!
//! `"250m"` is 250 millicores, `"2"` is 2000, `"0.5"` is 500. Memory takes the binary
//! (`Ki`, `Mi`, `Gi`, `Ti`) and decimal (`k`, `M`, `G`, `T`) suffixes, or plain bytes.

/// CPU in millicores; `None` if not a quantity.
pub fn parse_cpu_millis(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(m) = s.strip_suffix('m') {
        return m.parse().ok();
    }
    let v: f64 = s.parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| (v * 1000.0).round() as u64)
}

/// Memory in bytes; `None` if not a quantity.
pub fn parse_memory(s: &str) -> Option<u64> {
    let s = s.trim();
    const UNITS: [(&str, u64); 8] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
    ];
    for (suffix, factor) in UNITS {
        if let Some(n) = s.strip_suffix(suffix) {
            let v: f64 = n.parse().ok()?;
            return (v.is_finite() && v >= 0.0).then(|| (v * factor as f64).round() as u64);
        }
    }
    let v: f64 = s.parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| v.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_and_memory() {
        assert_eq!(parse_cpu_millis("250m"), Some(250));
        assert_eq!(parse_cpu_millis("2"), Some(2000));
        assert_eq!(parse_cpu_millis("0.5"), Some(500));
        assert_eq!(parse_cpu_millis("lots"), None);
        assert_eq!(parse_memory("128Mi"), Some(128 << 20));
        assert_eq!(parse_memory("1G"), Some(1_000_000_000));
        assert_eq!(parse_memory("1024"), Some(1024));
        assert_eq!(parse_memory("-1Gi"), None);
    }
}
