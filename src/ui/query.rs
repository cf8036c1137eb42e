//! The fleet page's URL query: the same filters as `rota status --fleet` (`?wave=`,
//! `?cluster=`, `?state=`, `?exception=`, `?version=`, `?label=k=v`, repeatable) and the page of clusters
//! (`?page=N`), so that a view can be shared as a link. Pure: a query string in, a
//! [`Query`] or an error that names the parameter out; and back to a query string for the
//! page's own links.

use super::text::{Filter, parse_label, parse_state};
use crate::page_link::encode;

/// Clusters listed on one page of the fleet page (in wave order): at 5 pools a cluster, 250
/// pool rows, about 150 KB of HTML, well inside the first response's 300 KB budget beside
/// the summary and the exceptions.
pub const PAGE_CLUSTERS: usize = 50;

/// What a request asks the fleet page for.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub filter: Filter,
    /// 1-based page of clusters.
    pub page: usize,
    /// `?all=1`: every selected cluster on one page, as small fleets are shown.
    pub all: bool,
}

/// A query parameter the page cannot use.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("query parameter {name}: {message}")]
pub struct QueryError {
    pub name: String,
    pub message: String,
}

fn err(name: &str, message: impl Into<String>) -> QueryError {
    QueryError {
        name: name.to_string(),
        message: message.into(),
    }
}

/// `%XX` and `+` decoded (as browsers encode form fields); a bad escape or bytes that are not
/// UTF-8 are the caller's mistake.
fn decode(name: &str, s: &str) -> Result<String, QueryError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| err(name, "a % not followed by two hex digits"))?;
                out.push(hex);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| err(name, "not UTF-8"))
}

/// Longest query the page reads: a link with every filter is far shorter.
const MAX_QUERY: usize = 4096;

impl Query {
    /// Reads `?...` (without the `?`). Empty values mean "not given" (an empty form field);
    /// an unknown parameter is ignored, as pages do; a bad value is an error.
    pub fn parse(query: Option<&str>) -> Result<Query, QueryError> {
        let mut q = Query {
            page: 1,
            ..Query::default()
        };
        let Some(query) = query else { return Ok(q) };
        if query.len() > MAX_QUERY {
            return Err(err("?", format!("longer than {MAX_QUERY} bytes")));
        }
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, raw) = pair.split_once('=').unwrap_or((pair, ""));
            let name = decode("?", name)?;
            let value = decode(&name, raw)?;
            let value = value.trim();
            if value.is_empty() {
                continue;
            }
            match name.as_str() {
                "wave" => q.filter.wave = Some(value.to_string()),
                "cluster" => q.filter.cluster = Some(value.to_string()),
                "state" => q.filter.state = Some(parse_state(value).map_err(|e| err("state", e))?),
                "exception" => {
                    q.filter.exception = Some(
                        super::summary::ExceptionKind::parse(value)
                            .map_err(|e| err("exception", e))?,
                    )
                }
                "version" => q.filter.version = Some(value.to_string()),
                "label" => q
                    .filter
                    .labels
                    .push(parse_label(value).map_err(|e| err("label", e))?),
                "page" => {
                    q.page = value
                        .parse::<usize>()
                        .ok()
                        .filter(|&n| n >= 1)
                        .ok_or_else(|| err("page", format!("{value:?} is not a page number")))?
                }
                "all" => q.all = matches!(value, "1" | "true" | "yes"),
                _ => {}
            }
        }
        Ok(q)
    }

    /// The query string of this view (no `?`; empty for the whole fleet's first page), with
    /// the page number `page` (1 is left out).
    pub fn to_string_at(&self, page: usize) -> String {
        let mut parts = Vec::new();
        let f = &self.filter;
        if let Some(w) = &f.wave {
            parts.push(format!("wave={}", encode(w)));
        }
        if let Some(c) = &f.cluster {
            parts.push(format!("cluster={}", encode(c)));
        }
        if let Some(s) = f.state {
            parts.push(format!("state={}", s.key()));
        }
        if let Some(k) = f.exception {
            parts.push(format!("exception={}", k.key()));
        }
        if let Some(v) = &f.version {
            parts.push(format!("version={}", encode(v)));
        }
        for (k, v) in &f.labels {
            parts.push(format!("label={}", encode(&format!("{k}={v}"))));
        }
        if self.all {
            parts.push("all=1".into());
        }
        if page > 1 {
            parts.push(format!("page={page}"));
        }
        parts.join("&")
    }

    /// A link to this view at `page`.
    pub fn href(&self, page: usize) -> String {
        let q = self.to_string_at(page);
        if q.is_empty() {
            "/".into()
        } else {
            format!("/?{q}")
        }
    }
}

/// A link to the page with only this filter: how the summary's counts link to their pools.
pub fn href_of(filter: Filter) -> String {
    Query {
        filter,
        page: 1,
        all: false,
    }
    .href(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::model::Phase;

    #[test]
    fn every_filter_reads_from_the_url_and_writes_back_the_same() {
        let q = Query::parse(Some(
            "wave=main&cluster=c%2D01&state=rolling-back&version=general%402026.11.2&label=region%3Deu-west-1&label=tier=gold&page=3",
        ))
        .unwrap();
        assert_eq!(q.filter.wave.as_deref(), Some("main"));
        assert_eq!(q.filter.cluster.as_deref(), Some("c-01"));
        assert_eq!(q.filter.state, Some(Phase::RollingBack));
        assert_eq!(q.filter.version.as_deref(), Some("general@2026.11.2"));
        assert_eq!(
            q.filter.labels,
            vec![
                ("region".to_string(), "eu-west-1".to_string()),
                ("tier".to_string(), "gold".to_string())
            ]
        );
        assert_eq!(q.page, 3);
        let again = Query::parse(Some(&q.to_string_at(q.page))).unwrap();
        assert_eq!(again.to_string_at(3), q.to_string_at(3));
        assert!(!q.href(1).contains("page="));
    }

    #[test]
    fn empty_form_fields_and_unknown_parameters_narrow_nothing() {
        let q = Query::parse(Some("wave=&cluster=&state=&utm_source=x&page=")).unwrap();
        assert!(!q.filter.narrowed());
        assert_eq!(q.page, 1);
        assert_eq!(q.href(1), "/");
        // A form sends spaces as +.
        let q = Query::parse(Some("state=no+report")).unwrap();
        assert_eq!(q.filter.state, Some(Phase::Unknown));
    }

    #[test]
    fn a_bad_value_names_its_parameter() {
        let e = Query::parse(Some("state=bogus")).unwrap_err();
        assert_eq!(e.name, "state");
        assert!(e.message.contains("the states:"), "{e}");
        assert_eq!(Query::parse(Some("label=nokey")).unwrap_err().name, "label");
        assert_eq!(Query::parse(Some("page=0")).unwrap_err().name, "page");
        assert_eq!(Query::parse(Some("page=x")).unwrap_err().name, "page");
        assert_eq!(Query::parse(Some("wave=%zz")).unwrap_err().name, "wave");
        assert_eq!(Query::parse(Some("wave=%ff")).unwrap_err().name, "wave");
        assert!(Query::parse(Some(&"a".repeat(MAX_QUERY + 1))).is_err());
    }

    /// The wave's link a rollup status carries (`page_link::wave`) is read back by the
    /// page as that wave's filter, whatever the wave's name holds.
    #[test]
    fn a_wave_link_made_below_the_page_reads_as_its_filter() {
        let link = crate::page_link::wave("https://rota.example.com/", "eu & us/2");
        let query = link.split_once('?').map(|(_, q)| q);
        let q = Query::parse(query).unwrap();
        assert_eq!(q.filter.wave.as_deref(), Some("eu & us/2"));
        assert_eq!(q.to_string_at(1), query.unwrap());
    }
}
