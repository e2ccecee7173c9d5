//! How long the service takes to answer: each request's time from sending it to its whole
//! answer read (or its failure), by endpoint and answer class, shared by every clone of a
//! client, for the metrics endpoint (`lotsync_request_duration_seconds`). It owns the
//! histogram and the names of endpoints and classes; encoding it is `daemon::metrics`'s.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use reqwest::Url;
use std::time::Duration;

/// The bucket bounds in seconds: a loopback answer in milliseconds to a slow list page.
const BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// One series: the endpoint (`POST /v1/inventory`, `PUT /v1/inventory/{id}`: ids as `{id}`,
/// no query) and the answer's class (`2xx`, `3xx`, `4xx`, `5xx`, or `none` when no answer came:
/// a connection refused or broken, a timeout).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub endpoint: String,
    pub answer: &'static str,
}

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// Request durations; clones share them.
#[derive(Debug, Clone)]
pub struct RequestTimes(Family<RequestLabels, Histogram, fn() -> Histogram>);

impl Default for RequestTimes {
    fn default() -> Self {
        RequestTimes(Family::new_with_constructor(histogram))
    }
}

impl RequestTimes {
    /// A request to `url` with `method` took `took`; `status` is its answer's, None when none
    /// came.
    pub fn observe(&self, method: &str, url: &Url, status: Option<u16>, took: Duration) {
        let labels = RequestLabels {
            endpoint: endpoint(method, url),
            answer: answer_class(status),
        };
        self.0.get_or_create(&labels).observe(took.as_secs_f64());
    }

    /// The histograms, to register.
    pub fn family(&self) -> Family<RequestLabels, Histogram, fn() -> Histogram> {
        self.0.clone()
    }
}

/// `METHOD /path`, each segment of digits as `{id}`: few series, whatever the ids.
fn endpoint(method: &str, url: &Url) -> String {
    let path: Vec<&str> = url
        .path()
        .split('/')
        .map(|segment| {
            if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
                "{id}"
            } else {
                segment
            }
        })
        .collect();
    format!("{method} {}", path.join("/"))
}

fn answer_class(status: Option<u16>) -> &'static str {
    match status {
        None => "none",
        Some(200..=299) => "2xx",
        Some(300..=399) => "3xx",
        Some(400..=499) => "4xx",
        Some(_) => "5xx",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_become_one_endpoint_and_answers_a_class() {
        let url = |s: &str| Url::parse(s).unwrap();
        assert_eq!(
            endpoint("PUT", &url("http://h/v1/inventory/123/sold")),
            "PUT /v1/inventory/{id}/sold"
        );
        assert_eq!(
            endpoint("GET", &url("http://h/v1/inventory?page=2&per_page=100")),
            "GET /v1/inventory"
        );
        assert_eq!(answer_class(Some(201)), "2xx");
        assert_eq!(answer_class(Some(429)), "4xx");
        assert_eq!(answer_class(Some(503)), "5xx");
        assert_eq!(answer_class(None), "none");
        let times = RequestTimes::default();
        times.observe(
            "POST",
            &url("http://h/v1/inventory"),
            Some(201),
            Duration::from_millis(7),
        );
        let shared = times.clone();
        shared.observe(
            "POST",
            &url("http://h/v1/inventory"),
            Some(201),
            Duration::from_millis(70),
        );
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("took", "", times.family());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let series = r#"took_count{endpoint="POST /v1/inventory",answer="2xx"} 2"#;
        assert!(text.lines().any(|l| l == series), "{text}");
        let bucket = r#"took_bucket{le="0.01",endpoint="POST /v1/inventory",answer="2xx"} 1"#;
        assert!(text.lines().any(|l| l == bucket), "{text}");
    }
}
