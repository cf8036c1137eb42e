//! The Prometheus gate: one instant query per sample over the Prometheus HTTP API
//! (`GET {address}/api/v1/query?query=…&time=…`), its answer checked against the gate's
//! bounds (`min` and/or `max`, inclusive).
//!
//! Three layers, the first two pure: [`parse`] turns an HTTP answer into an [`Answer`] (or a
//! [`QueryError`] that says what is wrong with it), [`evaluate`] turns an answer into a
//! [`Sample`] under a [`Rule`], and [`PrometheusGate`] does the request. The [`super::Tracker`]
//! decides, as for every gate, when the next sample is due (`interval`) and what the samples
//! add up to (`samples`, `failureLimit`).
//!
//! Nothing but a well-formed answer within the bounds passes: an unreachable server, a
//! timeout, an error status, an answer that is not the Prometheus API's JSON (an HTML login
//! page, wrong types, a body larger than [`MAX_ANSWER_BYTES`]), a range vector or a string
//! all make a failing sample whose detail names the gate, the query and the problem.
//!
//! The rule for a vector with several series: every series must be within the bounds (the
//! worst one is named). "No data" is an empty vector or a NaN value (a ratio of two rates
//! that are both 0 is NaN, e.g. no traffic at all); `onNoData` decides: `fail` (the
//! default) or `pass`. In a vector, a NaN series is no data on its own: with `onNoData:
//! fail` it fails the sample, with `pass` it is left out and the other series decide.
//!
//! Time: the query's `time` is the real wall clock when it is sent, not the controller's
//! clock (which runs faster under `--speed`): Prometheus lives in real time. The per-query
//! timeout is real time as well.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::OnceLock;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::{Request, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use super::gate::{Gate, GateError, GateInputs, Sample};
use rota_core::fleet::resolved::{GateCheck, NoData, ResolvedGate};

/// The most one query may take, from connecting to the last byte of the answer.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest answer read (a gate's query should return a handful of series).
pub const MAX_ANSWER_BYTES: usize = 4 << 20;

/// How much of an unexpected answer is quoted in an error.
const QUOTE_CHARS: usize = 160;

type HttpClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// What a sample's value must satisfy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub on_no_data: NoData,
}

/// One series of an instant vector.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A successful instant query's result.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    Scalar(f64),
    Vector(Vec<Series>),
}

/// Why a query gave no usable answer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum QueryError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("request failed: {0}")]
    Transport(String),
    /// Prometheus answered with `"status": "error"` (a bad query, a timeout on its side...).
    #[error("Prometheus answered HTTP {http_status} with error {error_type}: {error}")]
    Api {
        http_status: u16,
        error_type: String,
        error: String,
    },
    /// A non-success HTTP status without the API's error JSON (a proxy, a login page...).
    #[error("HTTP {status} (not a Prometheus API answer): {body}")]
    Http { status: u16, body: String },
    #[error("not a Prometheus API answer: {0}")]
    Malformed(String),
    #[error("the answer is larger than {0} bytes")]
    TooLarge(usize),
}

/// A query that failed, with the gate, the query and the server it was sent to.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("prometheus gate {gate}: query `{query}` at {address}: {error}")]
pub struct GateQueryError {
    pub gate: String,
    pub query: String,
    pub address: String,
    pub error: QueryError,
}

// ------------------------------------------------------------------------------ parsing

/// The result of an instant query from an HTTP answer (pure).
///
/// Accepts exactly the API's envelope: `{"status": "success", "data": {"resultType":
/// "vector" | "scalar", "result": ...}}` with each value a `[<unix time>, "<float>"]` pair, or
/// `{"status": "error", "errorType": ..., "error": ...}`. Unknown extra fields (`warnings`,
/// `infos`) are allowed; wrong or missing ones are errors.
pub fn parse(status: u16, content_type: Option<&str>, body: &[u8]) -> Result<Answer, QueryError> {
    let ok_status = (200..300).contains(&status);
    let json: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) if ok_status => {
            return Err(QueryError::Malformed(format!(
                "the body is not JSON ({e}; content-type {}): {}",
                content_type.unwrap_or("none"),
                quote(body)
            )));
        }
        Err(_) => {
            return Err(QueryError::Http {
                status,
                body: quote(body),
            });
        }
    };
    let Some(obj) = json.as_object() else {
        return Err(QueryError::Malformed(format!(
            "the body is not a JSON object: {}",
            quote(body)
        )));
    };
    match obj.get("status").and_then(Value::as_str) {
        Some("error") => {
            let text = |k: &str| obj.get(k).and_then(Value::as_str).map(shorten);
            Err(QueryError::Api {
                http_status: status,
                error_type: text("errorType").unwrap_or_else(|| "(no errorType)".into()),
                error: text("error").unwrap_or_else(|| "(no error message)".into()),
            })
        }
        Some("success") if ok_status => parse_data(obj.get("data")),
        Some("success") => Err(QueryError::Http {
            status,
            body: quote(body),
        }),
        Some(other) => Err(QueryError::Malformed(format!(
            "`status` is {:?}, expected \"success\" or \"error\"",
            shorten(other)
        ))),
        None if ok_status => Err(QueryError::Malformed(format!(
            "no `status` string: {}",
            quote(body)
        ))),
        None => Err(QueryError::Http {
            status,
            body: quote(body),
        }),
    }
}

fn parse_data(data: Option<&Value>) -> Result<Answer, QueryError> {
    let bad = |m: String| QueryError::Malformed(m);
    let data = data
        .and_then(Value::as_object)
        .ok_or_else(|| bad("`data` is missing or not an object".into()))?;
    let result = data
        .get("result")
        .ok_or_else(|| bad("`data.result` is missing".into()))?;
    match data.get("resultType").and_then(Value::as_str) {
        Some("vector") => {
            let items = result
                .as_array()
                .ok_or_else(|| bad("`data.result` of a vector is not an array".into()))?;
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let at = format!("data.result[{i}]");
                let o = item
                    .as_object()
                    .ok_or_else(|| bad(format!("`{at}` is not an object")))?;
                let labels = match o.get("metric") {
                    None => BTreeMap::new(),
                    Some(Value::Object(m)) => m
                        .iter()
                        .map(|(k, v)| match v.as_str() {
                            Some(s) => Ok((k.clone(), s.to_string())),
                            None => Err(bad(format!("`{at}.metric.{k}` is not a string"))),
                        })
                        .collect::<Result<_, _>>()?,
                    Some(_) => return Err(bad(format!("`{at}.metric` is not an object"))),
                };
                let value = match (o.get("value"), o.get("histogram")) {
                    (Some(v), _) => pair(v, &format!("{at}.value"))?,
                    (None, Some(_)) => {
                        return Err(bad(format!(
                            "`{at}` is a native histogram sample; a gate needs a number \
                             (use histogram_quantile, histogram_count, ...)"
                        )));
                    }
                    (None, None) => return Err(bad(format!("`{at}.value` is missing"))),
                };
                out.push(Series { labels, value });
            }
            Ok(Answer::Vector(out))
        }
        Some("scalar") => Ok(Answer::Scalar(pair(result, "data.result")?)),
        Some("matrix") => Err(bad(
            "the query returns a range vector (matrix); a gate needs an \
             instant vector or a scalar: wrap the range selector in a function such as rate()"
                .into(),
        )),
        Some("string") => Err(bad(
            "the query returns a string; a gate needs an instant vector or a scalar".into(),
        )),
        Some(other) => Err(bad(format!("unknown resultType {:?}", shorten(other)))),
        None => Err(bad("`data.resultType` is missing or not a string".into())),
    }
}

/// A `[<unix time>, "<float>"]` pair's value. Prometheus writes values as strings (`"0.5"`,
/// `"NaN"`, `"+Inf"`), which keeps NaN and infinities representable in JSON.
fn pair(v: &Value, at: &str) -> Result<f64, QueryError> {
    let bad = |m: String| QueryError::Malformed(m);
    let a = v
        .as_array()
        .filter(|a| a.len() == 2)
        .ok_or_else(|| bad(format!("`{at}` is not a [time, \"value\"] pair")))?;
    if !a[0].is_number() {
        return Err(bad(format!("`{at}[0]` (the time) is not a number")));
    }
    let s = a[1]
        .as_str()
        .ok_or_else(|| bad(format!("`{at}[1]` (the value) is not a string")))?;
    s.parse::<f64>()
        .map_err(|_| bad(format!("`{at}[1]` is {:?}, not a number", shorten(s))))
}

/// A short, one-line, printable quote of an answer's start.
fn quote(body: &[u8]) -> String {
    if body.is_empty() {
        return "(empty body)".into();
    }
    shorten(&String::from_utf8_lossy(body))
}

fn shorten(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(QUOTE_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if s.chars().count() > QUOTE_CHARS {
        out.push('…');
    }
    out
}

// ------------------------------------------------------------------------------ evaluation

impl Rule {
    fn violation(&self, v: f64) -> Option<(String, f64)> {
        if let Some(max) = self.max
            && v > max
        {
            return Some((format!("above max {}", num(max)), v - max));
        }
        if let Some(min) = self.min
            && v < min
        {
            return Some((format!("below min {}", num(min)), min - v));
        }
        None
    }

    fn bounds(&self) -> String {
        match (self.min, self.max) {
            (Some(lo), Some(hi)) => format!("min {}, max {}", num(lo), num(hi)),
            (Some(lo), None) => format!("min {}", num(lo)),
            (None, Some(hi)) => format!("max {}", num(hi)),
            (None, None) => "no bounds".into(),
        }
    }

    fn no_data(&self, what: String) -> Sample {
        match self.on_no_data {
            NoData::Fail => Sample::Fail(format!("{what} (onNoData: fail)")),
            NoData::Pass => Sample::Pass(format!("{what} (onNoData: pass)")),
        }
    }
}

/// The sample an answer makes under a rule (pure). The detail leads with the value, so that a
/// shortened status message still shows it.
pub fn evaluate(rule: &Rule, answer: &Answer) -> Sample {
    let series: Vec<Series> = match answer {
        Answer::Scalar(v) => vec![Series {
            labels: BTreeMap::new(),
            value: *v,
        }],
        Answer::Vector(s) => s.clone(),
    };
    if series.is_empty() {
        return rule.no_data("no data (empty result)".into());
    }
    let n = series.len();
    let (nan, numbers): (Vec<&Series>, Vec<&Series>) =
        series.iter().partition(|s| s.value.is_nan());
    // The worst violation: the farthest outside its bound.
    let mut worst: Option<(&Series, String, f64)> = None;
    let mut violations = 0;
    for &s in &numbers {
        if let Some((why, by)) = rule.violation(s.value) {
            violations += 1;
            if worst.as_ref().is_none_or(|(_, _, b)| by > *b) {
                worst = Some((s, why, by));
            }
        }
    }
    if let Some((s, why, _)) = worst {
        let of = if n > 1 {
            format!(" ({violations} of {n} series out of bounds)")
        } else {
            String::new()
        };
        return Sample::Fail(format!("{}{} {why}{of}", num(s.value), labels(&s.labels)));
    }
    if numbers.is_empty() {
        return rule.no_data(format!("no data (NaN{})", labels(&nan[0].labels)));
    }
    if !nan.is_empty() && rule.on_no_data == NoData::Fail {
        return Sample::Fail(format!(
            "no data (NaN{}, {} of {n} series) (onNoData: fail)",
            labels(&nan[0].labels),
            nan.len()
        ));
    }
    if numbers.len() == 1 {
        let s = numbers[0];
        return Sample::Pass(format!(
            "{}{} within {}",
            num(s.value),
            labels(&s.labels),
            rule.bounds()
        ));
    }
    let hi = numbers.iter().map(|s| s.value).fold(f64::MIN, f64::max);
    let lo = numbers.iter().map(|s| s.value).fold(f64::MAX, f64::min);
    Sample::Pass(format!(
        "{} series from {} to {} within {}",
        numbers.len(),
        num(lo),
        num(hi),
        rule.bounds()
    ))
}

/// A value as people read it: integers as such, 4 decimals, tiny values in exponent form.
fn num(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return format!("{v:.0}");
    }
    if v.abs() < 1e-3 || v.abs() >= 1e9 {
        return format!("{v:.3e}");
    }
    let s = format!("{v:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// ` for {code="500",job="api"}`, or nothing for a series without labels.
fn labels(l: &BTreeMap<String, String>) -> String {
    if l.is_empty() {
        return String::new();
    }
    let mut out = String::from(" for {");
    for (i, (k, v)) in l.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{k}={v:?}");
    }
    out.push('}');
    out
}

// ------------------------------------------------------------------------------ the gate

/// The HTTP client all Prometheus gates share (one connection pool): rustls with the
/// system's roots, plain http allowed (in-cluster Prometheus is usually plain http).
fn client() -> &'static HttpClient {
    static CLIENT: OnceLock<HttpClient> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let provider = rustls::crypto::ring::default_provider();
        let builder = match hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(provider.clone())
        {
            Ok(b) => b,
            Err(e) => {
                // No system roots (a scratch image): http still works, https fails each
                // query with an unknown-issuer error that names the server.
                tracing::warn!(error = %e, "no TLS roots for Prometheus gates; https addresses will fail");
                let config = rustls::ClientConfig::builder_with_provider(provider.into())
                    .with_safe_default_protocol_versions()
                    .expect("ring supports the default TLS versions")
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth();
                hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config)
            }
        };
        // Connecting has its own bound inside the query's timeout: an address that drops
        // SYNs fails in 10 s with "connect timed out", not as a vague query timeout.
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(Duration::from_secs(10)));
        let connector = builder
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Client::builder(TokioExecutor::new()).build(connector)
    })
}

/// The gate for one `prometheus` HealthGate.
pub struct PrometheusGate {
    name: String,
    /// Without a trailing `/`; may carry a path prefix (`http://host/prometheus`).
    address: String,
    query: String,
    rule: Rule,
    timeout: Duration,
}

impl PrometheusGate {
    pub fn new(spec: &ResolvedGate) -> Result<PrometheusGate, GateError> {
        let GateCheck::Prometheus {
            address,
            query,
            min,
            max,
            on_no_data,
        } = &spec.check
        else {
            unreachable!("PrometheusGate::new is only called for prometheus gates")
        };
        let invalid = |why: String| GateError::Invalid {
            gate: spec.name.clone(),
            why,
        };
        check_address(address).map_err(invalid)?;
        if query.trim().is_empty() {
            return Err(invalid("the prometheus query is empty".into()));
        }
        if min.is_none() && max.is_none() {
            return Err(invalid(
                "a prometheus gate needs a bound: `min`, `max` or both".into(),
            ));
        }
        if [min, max].into_iter().flatten().any(|v| v.is_nan()) {
            return Err(invalid("a bound is NaN".into()));
        }
        Ok(PrometheusGate {
            name: spec.name.clone(),
            address: address.trim_end_matches('/').to_string(),
            query: query.clone(),
            rule: Rule {
                min: *min,
                max: *max,
                on_no_data: *on_no_data,
            },
            timeout: QUERY_TIMEOUT,
        })
    }

    /// The same gate with another per-query timeout (tests; a slow, far Prometheus).
    pub fn with_timeout(mut self, timeout: Duration) -> PrometheusGate {
        self.timeout = timeout;
        self
    }

    pub fn rule(&self) -> &Rule {
        &self.rule
    }

    /// The instant query URL for evaluation time `at`. The server is also asked to give up
    /// after the timeout, so that an expensive query does not run on after we stopped
    /// waiting.
    pub fn url(&self, at: DateTime<Utc>) -> String {
        format!(
            "{}/api/v1/query?query={}&time={}.{:03}&timeout={}ms",
            self.address,
            form_encode(&self.query),
            at.timestamp(),
            at.timestamp_subsec_millis(),
            self.timeout.as_millis().max(1)
        )
    }

    /// Run the query at `at` (real time) and parse the answer.
    pub async fn query(&self, at: DateTime<Utc>) -> Result<Answer, GateQueryError> {
        let url = self.url(at);
        let fetched = tokio::time::timeout(self.timeout, fetch(&url)).await;
        let error = match fetched {
            Ok(Ok(a)) => return Ok(a),
            Ok(Err(e)) => e,
            Err(_) => QueryError::Timeout(self.timeout),
        };
        Err(GateQueryError {
            gate: self.name.clone(),
            query: self.query.clone(),
            address: self.address.clone(),
            error,
        })
    }
}

/// One GET and its parsed answer, the body read up to [`MAX_ANSWER_BYTES`].
async fn fetch(url: &str) -> Result<Answer, QueryError> {
    let req = Request::get(url)
        .header(
            http::header::USER_AGENT,
            concat!("rota/", env!("CARGO_PKG_VERSION")),
        )
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::new()))
        .map_err(|e| QueryError::Transport(format!("building the request: {e}")))?;
    let resp = client()
        .request(req)
        .await
        .map_err(|e| QueryError::Transport(chain(&e)))?;
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let declared = resp
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_ANSWER_BYTES as u64) {
        return Err(QueryError::TooLarge(MAX_ANSWER_BYTES));
    }
    let body = Limited::new(resp.into_body(), MAX_ANSWER_BYTES)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                QueryError::TooLarge(MAX_ANSWER_BYTES)
            } else {
                QueryError::Transport(format!("reading the answer: {}", chain(&*e)))
            }
        })?
        .to_bytes();
    parse(status, content_type.as_deref(), &body)
}

/// An error with its causes (hyper's own text is only "client error (Connect)").
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        cur = s.source();
    }
    out
}

/// An `http://` or `https://` URL without query, fragment or credentials (they would live
/// in git).
fn check_address(address: &str) -> Result<(), String> {
    let uri: Uri = address
        .parse()
        .map_err(|e| format!("prometheus address {address:?} is not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => {
            return Err(format!(
                "prometheus address {address:?} must start with http:// or https://"
            ));
        }
    }
    let Some(authority) = uri.authority() else {
        return Err(format!("prometheus address {address:?} has no host"));
    };
    if authority.as_str().contains('@') {
        return Err(format!(
            "prometheus address {:?} holds credentials; rota does not send credentials from the fleet repo",
            crate::source::redact_url(address)
        ));
    }
    if uri.query().is_some() || address.contains('#') {
        return Err(format!(
            "prometheus address {address:?} must not carry a query or fragment (only a base URL, with an optional path prefix)"
        ));
    }
    Ok(())
}

/// Percent-encodes a query parameter (everything but the unreserved characters).
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

#[async_trait]
impl Gate for PrometheusGate {
    fn name(&self) -> &str {
        &self.name
    }

    async fn sample(&self, _inputs: &GateInputs<'_>) -> Sample {
        // Real time, not `inputs.now` (the controller's clock, faster under --speed).
        match self.query(Utc::now()).await {
            Ok(answer) => match evaluate(&self.rule, &answer) {
                Sample::Pass(d) => Sample::Pass(format!("{d}; query `{}`", self.query)),
                Sample::Fail(d) => Sample::Fail(format!("{d}; query `{}`", self.query)),
            },
            Err(e) => {
                tracing::warn!(gate = %self.name, query = %self.query, address = %self.address,
                    error = %e.error, "prometheus gate query failed; counted as a failing sample");
                Sample::Fail(e.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rota_core::fleet::duration::GoDuration;

    fn rule(min: Option<f64>, max: Option<f64>, on_no_data: NoData) -> Rule {
        Rule {
            min,
            max,
            on_no_data,
        }
    }

    fn vector(values: &[(&str, f64)]) -> Answer {
        Answer::Vector(
            values
                .iter()
                .map(|(code, v)| Series {
                    labels: BTreeMap::from([("code".to_string(), code.to_string())]),
                    value: *v,
                })
                .collect(),
        )
    }

    fn ok(body: &str) -> Result<Answer, QueryError> {
        parse(200, Some("application/json"), body.as_bytes())
    }

    fn malformed(r: Result<Answer, QueryError>) -> String {
        match r {
            Err(QueryError::Malformed(m)) => m,
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    #[test]
    fn a_vector_and_a_scalar_parse() {
        let a = ok(
            r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"code":"500"},"value":[1700000000.5,"0.25"]},
            {"metric":{},"value":[1700000000,"NaN"]},
            {"value":[1700000000,"+Inf"]}]},"warnings":["x"]}"#,
        )
        .unwrap();
        let Answer::Vector(s) = a else { panic!() };
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].labels["code"], "500");
        assert_eq!(s[0].value, 0.25);
        assert!(s[1].value.is_nan());
        assert_eq!(s[2].value, f64::INFINITY);
        let a = ok(r#"{"status":"success","data":{"resultType":"scalar","result":[1.5,"-3"]}}"#);
        assert_eq!(a, Ok(Answer::Scalar(-3.0)));
        assert_eq!(
            ok(r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#),
            Ok(Answer::Vector(vec![]))
        );
    }

    #[test]
    fn error_answers_keep_prometheus_words() {
        let e = parse(
            400,
            Some("application/json"),
            br#"{"status":"error","errorType":"bad_data","error":"1:5: parse error: unclosed left parenthesis"}"#,
        )
        .unwrap_err();
        assert_eq!(
            e,
            QueryError::Api {
                http_status: 400,
                error_type: "bad_data".into(),
                error: "1:5: parse error: unclosed left parenthesis".into()
            }
        );
        assert!(e.to_string().contains("bad_data"));
        // A proxy's 502 page.
        let e = parse(
            502,
            Some("text/html"),
            b"<html><body>Bad Gateway</body></html>",
        )
        .unwrap_err();
        assert!(
            matches!(&e, QueryError::Http { status: 502, body } if body.contains("Bad Gateway")),
            "{e:?}"
        );
        // Success in the body but not in the HTTP status: not trusted.
        let e = parse(
            500,
            None,
            br#"{"status":"success","data":{"resultType":"scalar","result":[1,"0"]}}"#,
        )
        .unwrap_err();
        assert!(matches!(e, QueryError::Http { status: 500, .. }), "{e:?}");
    }

    #[test]
    fn hostile_and_malformed_answers_are_errors_never_results() {
        let html = parse(
            200,
            Some("text/html"),
            b"<!doctype html><title>Sign in</title>",
        );
        let m = malformed(html);
        assert!(
            m.contains("not JSON") && m.contains("text/html") && m.contains("Sign in"),
            "{m}"
        );
        let cases = [
            (r#"[1,2]"#, "not a JSON object"),
            (r#"{"data":{}}"#, "no `status`"),
            (r#"{"status":"ok"}"#, "\"ok\""),
            (r#"{"status":"success"}"#, "`data` is missing"),
            (r#"{"status":"success","data":{"result":[]}}"#, "resultType"),
            (
                r#"{"status":"success","data":{"resultType":"vector"}}"#,
                "`data.result` is missing",
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":{}}}"#,
                "not an array",
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[1,0.5]}]}}"#,
                "data.result[0].value[1]` (the value) is not a string",
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"value":["1","0.5"]}]}}"#,
                "(the time) is not a number",
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"zero"]}]}}"#,
                "\"zero\", not a number",
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[1]}]}}"#,
                "not a [time, \"value\"] pair",
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"1"]}]}}"#,
                "metric.a` is not a string",
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}"#,
                "value` is missing",
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"histogram":[1,{}]}]}}"#,
                "native histogram",
            ),
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
                "range vector",
            ),
            (
                r#"{"status":"success","data":{"resultType":"string","result":[1,"x"]}}"#,
                "returns a string",
            ),
            (
                r#"{"status":"success","data":{"resultType":"scalar","result":"1"}}"#,
                "pair",
            ),
        ];
        for (body, want) in cases {
            let m = malformed(ok(body));
            assert!(m.contains(want), "{body}: {m}");
        }
        // Quotes are short and on one line.
        let long = format!("<html>\n{}</html>", "x".repeat(10_000));
        let m = malformed(parse(200, None, long.as_bytes()));
        assert!(m.len() < 400 && !m.contains('\n'), "{m}");
        assert!(malformed(parse(200, None, b"")).contains("(empty body)"));
    }

    #[test]
    fn max_and_min_are_inclusive_bounds() {
        let r = rule(None, Some(0.01), NoData::Fail);
        assert!(matches!(
            evaluate(&r, &Answer::Scalar(0.01)),
            Sample::Pass(_)
        ));
        match evaluate(&r, &Answer::Scalar(0.25)) {
            Sample::Fail(d) => assert_eq!(d, "0.25 above max 0.01"),
            s => panic!("{s:?}"),
        }
        let r = rule(Some(1.0), Some(5.0), NoData::Fail);
        assert_eq!(
            evaluate(&r, &Answer::Scalar(3.0)),
            Sample::Pass("3 within min 1, max 5".into())
        );
        assert_eq!(
            evaluate(&r, &Answer::Scalar(0.5)),
            Sample::Fail("0.5 below min 1".into())
        );
        assert!(matches!(
            evaluate(&r, &Answer::Scalar(f64::INFINITY)),
            Sample::Fail(d) if d.contains("inf above max 5")
        ));
    }

    #[test]
    fn every_series_must_be_within_bounds_and_the_worst_is_named() {
        let r = rule(None, Some(0.05), NoData::Fail);
        let a = vector(&[("200", 0.0), ("500", 0.31), ("503", 0.07)]);
        assert_eq!(
            evaluate(&r, &a),
            Sample::Fail(
                "0.31 for {code=\"500\"} above max 0.05 (2 of 3 series out of bounds)".into()
            )
        );
        let a = vector(&[("200", 0.0), ("500", 0.04)]);
        assert_eq!(
            evaluate(&r, &a),
            Sample::Pass("2 series from 0 to 0.04 within max 0.05".into())
        );
    }

    #[test]
    fn no_data_follows_on_no_data() {
        for (answer, what) in [
            (Answer::Vector(vec![]), "no data (empty result)"),
            (Answer::Scalar(f64::NAN), "no data (NaN)"),
            (
                vector(&[("500", f64::NAN)]),
                "no data (NaN for {code=\"500\"})",
            ),
        ] {
            assert_eq!(
                evaluate(&rule(None, Some(1.0), NoData::Fail), &answer),
                Sample::Fail(format!("{what} (onNoData: fail)"))
            );
            assert_eq!(
                evaluate(&rule(None, Some(1.0), NoData::Pass), &answer),
                Sample::Pass(format!("{what} (onNoData: pass)"))
            );
        }
        // A NaN series among numbers: no data on its own.
        let a = vector(&[("200", 0.0), ("500", f64::NAN)]);
        assert!(matches!(
            evaluate(&rule(None, Some(1.0), NoData::Fail), &a),
            Sample::Fail(d) if d.contains("NaN for {code=\"500\"}, 1 of 2 series")
        ));
        assert_eq!(
            evaluate(&rule(None, Some(1.0), NoData::Pass), &a),
            Sample::Pass("0 for {code=\"200\"} within max 1".into())
        );
        // A violation wins over no data, whatever onNoData says.
        let a = vector(&[("200", 2.0), ("500", f64::NAN)]);
        assert!(matches!(
            evaluate(&rule(None, Some(1.0), NoData::Pass), &a),
            Sample::Fail(d) if d.contains("above max 1")
        ));
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(num(0.0), "0");
        assert_eq!(num(12.0), "12");
        assert_eq!(num(0.012345), "0.0123");
        assert_eq!(num(0.5), "0.5");
        assert_eq!(num(0.0000123), "1.230e-5");
        assert_eq!(num(f64::NEG_INFINITY), "-inf");
    }

    fn spec(address: &str, query: &str) -> ResolvedGate {
        ResolvedGate {
            name: "error-rate".into(),
            interval: GoDuration::from_secs(30),
            samples: 3,
            failure_limit: 0,
            check: GateCheck::Prometheus {
                address: address.into(),
                query: query.into(),
                min: None,
                max: Some(0.01),
                on_no_data: NoData::Fail,
            },
        }
    }

    #[test]
    fn the_url_encodes_the_query_and_keeps_a_path_prefix() {
        let g = PrometheusGate::new(&spec(
            "https://thanos.example.com/prom/",
            r#"sum(rate(x{code=~"5.."}[5m])) / 2"#,
        ))
        .unwrap();
        let at = DateTime::parse_from_rfc3339("2026-11-23T10:00:00.250Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            g.url(at),
            "https://thanos.example.com/prom/api/v1/query?query=sum%28rate%28x%7Bcode%3D~%225..%22%7D%5B5m%5D%29%29%20%2F%202&time=1795428000.250&timeout=10000ms"
        );
    }

    #[test]
    fn bad_addresses_and_queries_are_invalid_gates() {
        for (address, query, want) in [
            ("prometheus:9090", "up", "must start with http"),
            ("ftp://prom", "up", "must start with http"),
            ("http://user:hunter2@prom:9090", "up", "credentials"),
            ("http://prom:9090/?x=1", "up", "query or fragment"),
            ("http://prom:9090", "  ", "query is empty"),
        ] {
            let e = PrometheusGate::new(&spec(address, query)).err().unwrap();
            let m = e.to_string();
            assert!(
                m.contains("error-rate") && m.contains(want),
                "{address}: {m}"
            );
            assert!(!m.contains("hunter2"), "{m}");
        }
    }

    #[tokio::test]
    async fn an_unreachable_server_is_a_failing_sample_naming_gate_and_query() {
        // A port nothing listens on: bind, note the port, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let g = PrometheusGate::new(&spec(&format!("http://127.0.0.1:{port}"), "up")).unwrap();
        let inputs = GateInputs {
            pods: &crate::gates::PodTally::default(),
            events: &[],
            now: Utc::now(),
        };
        match g.sample(&inputs).await {
            Sample::Fail(d) => {
                assert!(d.contains("prometheus gate error-rate"), "{d}");
                assert!(d.contains("query `up`"), "{d}");
                assert!(d.contains("request failed"), "{d}");
            }
            s => panic!("{s:?}"),
        }
    }
}
