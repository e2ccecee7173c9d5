//! The typed client of the Vehicle Inventory Service (its interface: `docs/service.md`).
//!
//! Owns every HTTP call lotsync makes to the service: the headers, the URL layout
//! `{base_url}/{version}/...`, following list pages, reading answers (never more than
//! [`ClientSettings::max_answer_bytes`] for one resource or an error, nor more than
//! [`ClientSettings::max_list_page_bytes`] for one list page), and classing failures into
//! [`ApiError`]. It does not retry, throttle or remember anything: that is the uploader's job.
//! Whether an answer is about the vehicle asked for is the caller's to check (the uploader does);
//! an answer it will not use becomes a passing failure of its call with [`Answer::unusable`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), lotsync::api::ApiError> {
//! use lotsync::api::{ApiClient, ApiToken, ClientSettings, VehiclePayload};
//! let client = ApiClient::new(ClientSettings::new(
//!     "http://127.0.0.1:8080", 100, ApiToken::new("sandbox-token"),
//! ))?;
//! let answer = client.upsert_vehicle(&VehiclePayload::new(10, "A1", "1HGCM82633A004352")).await?;
//! println!("vehicle {} created: {}", answer.value.id, answer.created());
//! # Ok(()) }
//! ```

mod error;
mod list;
mod payload;
mod timing;
mod vehicle;
mod wait;

pub use error::{ApiError, Call, ErrorClass};
pub use payload::{
    Amount, BodyStyle, BodyType, Color, DriveType, Fuel, InteriorType, Price, PriceSet, SpecEnum,
    TitleStatus, Tonnage, TransmissionSpeed, TransmissionType, UnknownValue, VehiclePayload,
    VehicleType,
};
pub use timing::{RequestLabels, RequestTimes};
pub use vehicle::{
    Engine, Exterior, Interior, NewNotification, Notification, NotificationLevel, Odometer,
    Organization, PriceInfo, Transmission, Vehicle,
};
pub use wait::{said, ServiceWait, WaitReason, Window};

use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use reqwest::Method;
pub use reqwest::Url;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::HashSet;
use std::fmt;
use std::net::IpAddr;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime};

/// The API token. Its Debug output is redacted and it has no Display, so it cannot reach a log
/// line or an error message by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiToken(String);

impl ApiToken {
    pub fn new(token: impl Into<String>) -> Self {
        ApiToken(token.into())
    }

    /// `Bearer <token>`, marked sensitive (left out of HTTP debug output).
    fn header(&self) -> Result<HeaderValue, ApiError> {
        let mut value = HeaderValue::from_str(&format!("Bearer {}", self.0)).map_err(|_| {
            ApiError::Setup(
                "the API token holds characters a header cannot (a line break inside it?); \
                 copy it again from the service's account settings"
                    .into(),
            )
        })?;
        value.set_sensitive(true);
        Ok(value)
    }
}

/// The default of [`ClientSettings::max_answer_bytes`] (config `api.max_answer_kib`), in KiB: a
/// vehicle with every field, fifty options and a long description is under 16 KiB.
pub const DEFAULT_MAX_ANSWER_KIB: u32 = 256;
/// The default of [`ClientSettings::max_list_page_bytes`] (config `api.max_list_page_kib`), in
/// KiB: a page of 100 such vehicles is under 2 MiB.
pub const DEFAULT_MAX_LIST_PAGE_KIB: u32 = 8192;

impl fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiToken(<redacted>)")
    }
}

/// Where and as whom the client talks to the service.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    /// The spec's `{base_url}`: scheme, host, port and an optional path prefix.
    pub base_url: String,
    /// The version segment, `v1`.
    pub version: String,
    /// Sent as `X-Service-Organization-Id` on every call.
    pub organization_id: u64,
    pub token: ApiToken,
    /// Whole-request timeout.
    pub timeout: Duration,
    /// The most bytes read of an answer that is one resource (a vehicle, a notification) or an
    /// error. A larger answer is refused as soon as it shows (its Content-Length, or once that
    /// much was read), never read whole.
    pub max_answer_bytes: usize,
    /// The most bytes read of one page of a list.
    pub max_list_page_bytes: usize,
}

impl ClientSettings {
    /// Settings with version `v1`, a 30 s timeout and the default answer limits.
    pub fn new(base_url: impl Into<String>, organization_id: u64, token: ApiToken) -> Self {
        ClientSettings {
            base_url: base_url.into(),
            version: "v1".into(),
            organization_id,
            token,
            timeout: Duration::from_secs(30),
            max_answer_bytes: DEFAULT_MAX_ANSWER_KIB as usize * 1024,
            max_list_page_bytes: DEFAULT_MAX_LIST_PAGE_KIB as usize * 1024,
        }
    }
}

/// What the service reported about its rate limit on one answer, when it did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateLimit {
    /// Saturated at `u32::MAX`, which services use for "no limit".
    pub limit: Option<u32>,
    pub remaining: Option<u32>,
    /// How long from receipt of the answer until the bucket resets (`X-RateLimit-Reset`, sent
    /// as Unix seconds or as seconds from now); zero when that time has passed.
    pub reset: Option<Duration>,
}

/// A successful answer: the value plus what the uploader needs to pace itself.
#[derive(Debug, Clone)]
pub struct Answer<T> {
    pub value: T,
    pub status: u16,
    /// `X-RateLimit-*` of the (last) answer, when sent.
    pub rate_limit: Option<RateLimit>,
    /// The call answered (the last page's, for a list).
    pub call: Call,
}

impl<T> Answer<T> {
    /// Whether the call created a resource (201) rather than modifying one (200).
    pub fn created(&self) -> bool {
        self.status == 201
    }

    /// An answer the caller will not use (it is about another vehicle than the one asked
    /// for): a passing failure of its call, which may be answered rightly when sent again.
    /// `reason` says why it is not used and what happens next.
    pub fn unusable(&self, reason: String) -> ApiError {
        ApiError::Retryable {
            call: self.call.clone(),
            status: Some(self.status),
            messages: vec![],
            retry_after: None,
            rate_limit: None,
            reason,
        }
    }
}

impl<T> Answer<T> {
    /// An answer about another vehicle than the one the call was for, where going on could
    /// change the wrong vehicle (a sale answered with another VIN): delivery stops. `reason`
    /// names both vehicles, `fix` what to look at.
    pub fn about_another(&self, reason: String, fix: String) -> ApiError {
        ApiError::Fatal {
            call: self.call.clone(),
            status: Some(self.status),
            messages: vec![],
            reason,
            fix,
        }
    }
}

/// One page of a list as read.
#[derive(Debug, Clone)]
pub struct ListPage<T> {
    pub items: Vec<T>,
    /// The next page's address (on the service itself, keeping the page size asked); None on
    /// the last page.
    pub next: Option<Url>,
    /// Items in the whole list, when the page says (`total`, or `meta.total`).
    pub total: Option<u64>,
    /// The number of the list's last page, when the page says.
    pub last_page: Option<u64>,
}

/// Pages followed at most for one list, a guard against a service that never ends its list.
const MAX_PAGES: usize = 100_000;

/// A client for one organization on one service. Cheap to clone; clones share connections
/// and the token ([`ApiClient::set_token`] on one is seen by all).
#[derive(Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    /// `{base_url}/{version}/`, always ending in a slash so that `join` appends.
    root: Url,
    organization_id: u64,
    /// Whole-request timeout: an answer on its way arrives within it, or never.
    timeout: Duration,
    max_answer_bytes: usize,
    max_list_page_bytes: usize,
    /// `Bearer <token>`, sensitive; set on each request rather than as a default header so
    /// that a new token reaches every clone at once.
    authorization: Arc<RwLock<HeaderValue>>,
    /// The service's Retry-After, held for every call of every clone.
    wait: Arc<ServiceWait>,
    /// How long each request took, for the metrics; shared by every clone.
    times: RequestTimes,
}

/// What an answer is, for its size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answering {
    /// One resource (or an error): `max_answer_bytes`.
    One,
    /// One page of a list: `max_list_page_bytes`.
    ListPage,
}

impl fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiClient")
            .field("root", &self.root.as_str())
            .field("organization_id", &self.organization_id)
            .finish_non_exhaustive()
    }
}

impl ApiClient {
    /// Builds a client. Refuses a base URL that is not http(s), and plain http to any host but
    /// this machine, where the token would cross the network unencrypted.
    pub fn new(settings: ClientSettings) -> Result<Self, ApiError> {
        install_crypto_provider();
        let root = root_url(&settings.base_url, &settings.version)?;
        let authorization = settings.token.header()?;

        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        headers.insert(
            "x-service-organization-id",
            HeaderValue::from(settings.organization_id),
        );

        let http = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout.min(Duration::from_secs(10)))
            // A redirect would turn a POST into a GET and may carry the token elsewhere:
            // report it instead (ApiError::Fatal with the fix).
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("lotsync/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ApiError::Setup(format!("HTTP client: {e}")))?;
        Ok(ApiClient {
            http,
            root,
            organization_id: settings.organization_id,
            timeout: settings.timeout,
            max_answer_bytes: settings.max_answer_bytes,
            max_list_page_bytes: settings.max_list_page_bytes,
            authorization: Arc::new(RwLock::new(authorization)),
            wait: Arc::new(ServiceWait::default()),
            times: RequestTimes::default(),
        })
    }

    /// The wait the service asked of this token (shared by every clone).
    /// How long a request may take, answer included.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn service_wait(&self) -> &Arc<ServiceWait> {
        &self.wait
    }

    /// Calls from now on, by this client and every clone of it, carry `token` (a token
    /// rotated in its file, read again after a 401 or on SIGHUP). Refused, and the old token
    /// kept, when it cannot be a header.
    pub fn set_token(&self, token: ApiToken) -> Result<(), ApiError> {
        let header = token.header()?;
        // Poisoned only if a writer panicked mid-assignment of a HeaderValue, which cannot
        // leave it half-written: the value is still whole.
        *self
            .authorization
            .write()
            .unwrap_or_else(PoisonError::into_inner) = header;
        Ok(())
    }

    /// Whether calls carry `token` now (to tell a token read again from the one in use).
    pub fn token_is(&self, token: &ApiToken) -> bool {
        token
            .header()
            .is_ok_and(|header| header == self.current_authorization())
    }

    fn current_authorization(&self) -> HeaderValue {
        self.authorization
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn organization_id(&self) -> u64 {
        self.organization_id
    }

    /// `{base_url}/{version}/`, for messages.
    pub fn root(&self) -> &str {
        self.root.as_str()
    }

    /// GET /v1/inventory, every page.
    pub async fn list_vehicles(&self) -> Result<Answer<Vec<Vehicle>>, ApiError> {
        self.list_all("inventory").await
    }

    /// GET /v1/inventory, one page of one vehicle: proves the base URL, the token and the
    /// organization with one request (`lotsync validate --online`). True when the
    /// organization has vehicles.
    pub async fn probe(&self) -> Result<Answer<bool>, ApiError> {
        let mut url = self.url("inventory")?;
        url.query_pairs_mut().append_pair("per_page", "1");
        let answer = self
            .send(Method::GET, url, None, false, Answering::ListPage)
            .await?;
        let call = answer.call;
        let page =
            list::read_page(answer.value).map_err(|shape| unexpected(call.clone(), shape))?;
        Ok(Answer {
            value: !page.items.is_empty(),
            status: answer.status,
            rate_limit: answer.rate_limit,
            call,
        })
    }

    /// GET /v1/inventory/{id}.
    pub async fn get_vehicle(&self, id: u64) -> Result<Answer<Vehicle>, ApiError> {
        let url = self.url(&format!("inventory/{id}"))?;
        self.one(Method::GET, url, None, true).await
    }

    /// POST /v1/inventory: creates the vehicle (201) or modifies the one with this VIN (200).
    pub async fn upsert_vehicle(
        &self,
        payload: &VehiclePayload,
    ) -> Result<Answer<Vehicle>, ApiError> {
        let url = self.url("inventory")?;
        let body = serde_json::to_value(payload)
            .map_err(|e| ApiError::Setup(format!("payload does not serialize: {e}")))?;
        self.one(Method::POST, url, Some(&body), false).await
    }

    /// POST /v1/inventory/{id}/sold.
    pub async fn mark_sold(&self, id: u64) -> Result<Answer<Vehicle>, ApiError> {
        let url = self.url(&format!("inventory/{id}/sold"))?;
        self.one(Method::POST, url, None, true).await
    }

    /// POST /v1/inventory/{id}/in-stock.
    pub async fn mark_in_stock(&self, id: u64) -> Result<Answer<Vehicle>, ApiError> {
        let url = self.url(&format!("inventory/{id}/in-stock"))?;
        self.one(Method::POST, url, None, true).await
    }

    /// GET /v1/applications/{app}/notifications, every page.
    pub async fn list_notifications(
        &self,
        application: &str,
    ) -> Result<Answer<Vec<Notification>>, ApiError> {
        self.list_all(&format!(
            "applications/{}/notifications",
            segment(application)
        ))
        .await
    }

    /// POST /v1/applications/{app}/notifications.
    pub async fn create_notification(
        &self,
        application: &str,
        notification: &NewNotification,
    ) -> Result<Answer<Notification>, ApiError> {
        let url = self.url(&format!(
            "applications/{}/notifications",
            segment(application)
        ))?;
        let body = serde_json::to_value(notification)
            .map_err(|e| ApiError::Setup(format!("notification does not serialize: {e}")))?;
        self.one(Method::POST, url, Some(&body), false).await
    }

    /// POST /v1/applications/{app}/notifications/{id}/read.
    pub async fn mark_notification_read(
        &self,
        application: &str,
        id: u64,
    ) -> Result<Answer<Notification>, ApiError> {
        let url = self.url(&format!(
            "applications/{}/notifications/{id}/read",
            segment(application)
        ))?;
        self.one(Method::POST, url, None, true).await
    }

    fn url(&self, path: &str) -> Result<Url, ApiError> {
        self.root
            .join(path)
            .map_err(|e| ApiError::Setup(format!("bad path {path:?}: {e}")))
    }

    /// One call whose answer is one resource.
    async fn one<T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
        resource_call: bool,
    ) -> Result<Answer<T>, ApiError> {
        let answer = self
            .send(method, url, body, resource_call, Answering::One)
            .await?;
        read_one(answer)
    }

    /// Follows every page of a list, asking for the largest pages the service allows.
    async fn list_all<T: DeserializeOwned>(&self, path: &str) -> Result<Answer<Vec<T>>, ApiError> {
        let mut url = self.list_start(path)?;
        let mut items = Vec::new();
        let mut seen = HashSet::new();
        loop {
            let Answer {
                value: page,
                status,
                rate_limit,
                call,
            } = self.page(&url).await?;
            items.extend(page.items);
            let Some(next) = page.next else {
                return Ok(Answer {
                    value: items,
                    status,
                    rate_limit,
                    call,
                });
            };
            if !seen.insert(next.clone()) || seen.len() > MAX_PAGES {
                return Err(unexpected(
                    call,
                    format!("the list's pages do not end (next page {next} again)"),
                ));
            }
            url = next;
        }
    }

    /// The address of the first page of the vehicle list, asking for the largest pages the
    /// service allows; the pages after it are each page's [`ListPage::next`].
    pub fn vehicle_list_start(&self) -> Result<Url, ApiError> {
        self.list_start("inventory")
    }

    /// GET one page of the vehicle list: the first ([`ApiClient::vehicle_list_start`]) or
    /// one a page named as its next. Reading every page, and in what order, is the caller's.
    pub async fn vehicle_page(&self, url: &Url) -> Result<Answer<ListPage<Vehicle>>, ApiError> {
        self.page(url).await
    }

    fn list_start(&self, path: &str) -> Result<Url, ApiError> {
        let mut url = self.url(path)?;
        url.query_pairs_mut().append_pair("per_page", "100");
        Ok(url)
    }

    /// One page of a list, its items read as `T` and its next address checked.
    async fn page<T: DeserializeOwned>(&self, url: &Url) -> Result<Answer<ListPage<T>>, ApiError> {
        let Answer {
            value,
            status,
            rate_limit,
            call,
        } = self
            .send(Method::GET, url.clone(), None, false, Answering::ListPage)
            .await?;
        let page = list::read_page(value).map_err(|shape| unexpected(call.clone(), shape))?;
        let mut items = Vec::with_capacity(page.items.len());
        for (index, item) in page.items.into_iter().enumerate() {
            let item = serde_json::from_value(item).map_err(|e| ApiError::Fatal {
                call: call.clone(),
                status: None,
                messages: vec![],
                reason: format!("item {index} of the list cannot be read ({e})"),
                fix: "the service sent a record without a usable id; report it to the \
                      service's support with the call above"
                    .into(),
            })?;
            items.push(item);
        }
        let next = match page.next {
            Some(next) => Some(self.next_page(url, &next)?),
            None => None,
        };
        Ok(Answer {
            value: ListPage {
                items,
                next,
                total: page.total,
                last_page: page.last_page,
            },
            status,
            rate_limit,
            call,
        })
    }

    /// The next page's address, only if it is on the service itself: the token goes with it.
    /// It keeps our page size when the service's link leaves it out (as Laravel's paginator
    /// does), so that pages do not overlap.
    fn next_page(&self, current: &Url, next: &str) -> Result<Url, ApiError> {
        let call = call_of(&Method::GET, current);
        let mut next = current
            .join(next)
            .map_err(|e| unexpected(call.clone(), format!("next page {next:?}: {e}")))?;
        if !next.query_pairs().any(|(k, _)| k == "per_page") {
            next.query_pairs_mut().append_pair("per_page", "100");
        }
        if next.origin() != self.root.origin() {
            return Err(ApiError::Fatal {
                call,
                status: None,
                messages: vec![],
                reason: format!(
                    "the service points the next page to another host ({})",
                    next.origin().ascii_serialization()
                ),
                fix: "check api.base_url: it must be the address the service calls itself".into(),
            });
        }
        Ok(next)
    }

    /// How long each request of this client (and its clones) took, for the metrics.
    pub fn request_times(&self) -> &RequestTimes {
        &self.times
    }

    /// Sends one request and reads its answer, up to the limit of what it answers with.
    /// `resource_call` marks URLs that name one resource by id (a 404 there is Rejected,
    /// elsewhere Fatal).
    async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
        resource_call: bool,
        answering: Answering,
    ) -> Result<Answer<Value>, ApiError> {
        let call = self.wait.refuse(call_of(&method, &url))?;
        let started = Instant::now();
        let timed = url.clone();
        let took = |status: Option<u16>| {
            self.times
                .observe(call.method, &timed, status, started.elapsed());
        };
        let mut request = self
            .http
            .request(method, url)
            .header(AUTHORIZATION, self.current_authorization());
        if let Some(body) = body {
            request = request.json(body);
        }
        let mut response = request.send().await.map_err(|e| {
            took(None);
            transport(call.clone(), &e)
        })?;
        let status = response.status().as_u16();
        let success = (200..300).contains(&status);
        // An error's body only adds messages to its status: the smaller limit.
        let limit = if success && answering == Answering::ListPage {
            self.max_list_page_bytes
        } else {
            self.max_answer_bytes
        };
        let read = read_bounded(&mut response, limit).await;
        took(Some(status));
        let read = read.map_err(|e| transport(call.clone(), &e))?;
        let headers = response.headers();
        tracing::debug!(
            method = call.method,
            path = %call.path,
            status,
            bytes = read.as_ref().map_or(limit, Vec::len) as u64,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "service answered"
        );

        let Heard {
            rate_limit,
            retry_after,
        } = heed(&self.wait, status, headers, SystemTime::now());
        if success {
            let bytes =
                read.map_err(|over| self.too_large(call.clone(), status, answering, over))?;
            let value = serde_json::from_slice(&bytes)
                .map_err(|e| unexpected(call.clone(), format!("the answer is not JSON ({e})")))?;
            return Ok(Answer {
                value,
                status,
                rate_limit,
                call,
            });
        }
        // A 403 that says nothing remains is a quota spent, not a lack of access: passing, held
        // until its reset (see `heed`).
        if status == 403 && rate_limit.is_some_and(|l| l.remaining == Some(0)) {
            return Err(ApiError::Retryable {
                call,
                status: Some(status),
                messages: read.map(|bytes| error_messages(&bytes)).unwrap_or_default(),
                retry_after,
                rate_limit: rate_limit.map(Box::new),
                reason: "quota spent (403)".into(),
            });
        }
        // The service answers JSON, always: a 401 or 403 that is not JSON comes from a proxy or
        // firewall in front of it, and says nothing of the token or the organization. Passing:
        // retried, then probed like an outage.
        let json = read
            .as_ref()
            .is_ok_and(|bytes| serde_json::from_slice::<Value>(bytes).is_ok());
        if matches!(status, 401 | 403) && !json && rate_limit.is_none() {
            let content_type = headers
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(';').next())
                .unwrap_or("no content type");
            return Err(ApiError::Retryable {
                call,
                status: Some(status),
                messages: vec![],
                retry_after,
                rate_limit: None,
                reason: format!(
                    "an answer not from the service ({status}, {}): a proxy or firewall in front \
                     of it?",
                    crate::text::Escaped(content_type)
                ),
            });
        }
        // An error too large to read keeps its status's class (a proxy's 503 page is still a
        // 503), without the service's messages.
        let messages = read.map(|bytes| error_messages(&bytes)).unwrap_or_default();
        Err(ApiError::from_status(
            call,
            status,
            messages,
            retry_after,
            rate_limit,
            self.organization_id,
            resource_call,
        ))
    }

    /// A 2xx answer over its limit. Fatal: the same call would bring the same answer, read up
    /// to the limit again each time; a person has to look at what answers (a proxy or portal
    /// at api.base_url), or raise the limit if the service's answers really are that large.
    fn too_large(&self, call: Call, status: u16, answering: Answering, over: TooLarge) -> ApiError {
        let (limit, what, key) = match answering {
            Answering::One => (self.max_answer_bytes, "one resource", "api.max_answer_kib"),
            Answering::ListPage => (
                self.max_list_page_bytes,
                "one list page",
                "api.max_list_page_kib",
            ),
        };
        let limit = size(limit);
        let reason = match over.declared {
            Some(length) => format!(
                "the answer is {length} bytes (its Content-Length), over the {limit} lotsync \
                 reads for {what}; it was not read"
            ),
            None => format!(
                "the answer runs past the {limit} lotsync reads for {what}; the rest was not read"
            ),
        };
        ApiError::Fatal {
            call,
            status: Some(status),
            messages: vec![],
            reason,
            fix: format!(
                "check that api.base_url points at the Vehicle Inventory Service (this answer \
                 came from {}); if it does and its answers are this large, raise {key}",
                self.root
            ),
        }
    }
}

/// What an answer's headers say of the token's pace.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Heard {
    /// `X-RateLimit-*`, when sent.
    pub rate_limit: Option<RateLimit>,
    /// Retry-After of an error answer, in seconds or as an HTTP date.
    pub retry_after: Option<Duration>,
}

/// Reads an answer's rate headers and Retry-After, and holds the service's own wait they name
/// for every call of the token: a 2xx that took the last token until a reset; a 429's
/// Retry-After, or for a 429 without one, the reset of the bucket it says is empty; and a
/// 503's Retry-After when it is long (the service says it is down: maintenance). A short one
/// on a 503 is one backend's hiccup: only that call waits it out (the uploader's retry).
pub(crate) fn heed(wait: &ServiceWait, status: u16, headers: &HeaderMap, now: SystemTime) -> Heard {
    let success = (200..300).contains(&status);
    let rate_limit = rate_limit_of(headers, now);
    if success {
        if let Some(reset) = rate_limit
            .filter(|l| l.remaining == Some(0))
            .and_then(|l| l.reset)
            .filter(|reset| !reset.is_zero())
        {
            // The last token until the reset: nothing more gets through before it.
            wait.hold(reset, reset_reason(reset));
        }
        return Heard {
            rate_limit,
            retry_after: None,
        };
    }
    let retry_after = headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| error::parse_retry_after(v, now))
        .map(|w| believed(w, rate_limit));
    let refused = status == 429 || status == 403;
    let reset = rate_limit
        .filter(|l| refused && l.remaining == Some(0))
        .and_then(|l| l.reset);
    let holds = |w: &Duration| refused || (status == 503 && *w >= wait::SAID_FROM);
    match (retry_after.filter(holds), reset) {
        // Longer than TRUSTED_WAIT only when a spent quota backs it.
        (Some(w), _) if w > TRUSTED_WAIT => wait.hold(w, WaitReason::Quota),
        (Some(w), _) => wait.hold(w, WaitReason::RetryAfter),
        (None, Some(w)) => wait.hold(w, reset_reason(w)),
        (None, None) => {}
    }
    Heard {
        rate_limit,
        retry_after,
    }
}

/// Nothing remaining until `reset`: a bucket's refill, or a quota spent when further away than
/// an outage or a maintenance lasts.
fn reset_reason(reset: Duration) -> WaitReason {
    if reset > TRUSTED_WAIT {
        WaitReason::Quota
    } else {
        WaitReason::RateLimitReset
    }
}

/// The longest Retry-After believed on the service's word alone: a maintenance of minutes.
pub const TRUSTED_WAIT: Duration = Duration::from_secs(300);

/// A Retry-After as lotsync waits it: a longer one than [`TRUSTED_WAIT`] (a day; milliseconds
/// sent as seconds) is waited only that long, then tried again, unless the answer's
/// `X-RateLimit-*` back it (nothing remaining until a reset as far away: a quota spent). A
/// strict service refuses the try with the rest of its wait; the next is as far again.
fn believed(wait: Duration, rate_limit: Option<RateLimit>) -> Duration {
    let quota = rate_limit.is_some_and(|l| {
        l.remaining == Some(0) && l.reset.is_some_and(|reset| reset + wait::SAID_FROM >= wait)
    });
    if wait <= TRUSTED_WAIT || quota {
        return wait;
    }
    tracing::info!(
        asked_secs = wait.as_secs(),
        waits_secs = TRUSTED_WAIT.as_secs(),
        "a Retry-After longer than an outage or a maintenance lasts, and no quota that says \
         so: waiting {} s of it, then trying again",
        TRUSTED_WAIT.as_secs()
    );
    TRUSTED_WAIT
}

/// An answer longer than its limit; `declared` is its Content-Length, when that told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TooLarge {
    declared: Option<u64>,
}

/// Reads a body of at most `limit` bytes: refused at once when its Content-Length is over,
/// otherwise read chunk by chunk and given up as soon as it passes the limit, so that never
/// more than the limit plus one chunk is held. A body given up on is dropped with its
/// connection.
async fn read_bounded(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<Result<Vec<u8>, TooLarge>, reqwest::Error> {
    let declared = response.content_length();
    if let Some(length) = declared {
        if length > limit as u64 {
            return Ok(Err(TooLarge { declared }));
        }
    }
    // Within the limit (checked just above), so the cast cannot truncate.
    let mut body = Vec::with_capacity(declared.map_or(0, |length| length as usize));
    while let Some(chunk) = response.chunk().await? {
        let len = body.len() + chunk.len();
        if len > limit {
            return Ok(Err(TooLarge { declared }));
        }
        if len > body.capacity() {
            // Doubling, but never past the limit.
            let wanted = (body.capacity() * 2).clamp(len, limit);
            body.reserve_exact(wanted - body.len());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Ok(body))
}

/// A byte count as people read it: `256 KiB`, or `1000 bytes` when not whole KiB.
fn size(bytes: usize) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}

/// Reads one resource from an answer: the object itself, or `{"data": object}`.
fn read_one<T: DeserializeOwned>(answer: Answer<Value>) -> Result<Answer<T>, ApiError> {
    let Answer {
        value,
        status,
        rate_limit,
        call,
    } = answer;
    let value = match value {
        Value::Object(mut map) if !map.contains_key("id") && map.contains_key("data") => {
            map.remove("data").unwrap_or(Value::Null)
        }
        other => other,
    };
    match serde_json::from_value(value) {
        Ok(value) => Ok(Answer {
            value,
            status,
            rate_limit,
            call,
        }),
        Err(e) => Err(unexpected(call, e.to_string())),
    }
}

/// The messages of an error body: the spec's `{"errors":{"messages":[...]}}`, or the common
/// variants `{"message": "..."}` and `{"errors": {"field": ["..."]}}`.
fn error_messages(body: &[u8]) -> Vec<String> {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let strings = |v: &Value| -> Vec<String> {
        match v {
            Value::String(s) => vec![s.clone()],
            Value::Array(items) => items
                .iter()
                .filter_map(|m| m.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        }
    };
    if let Some(errors) = value.get("errors") {
        if let Some(messages) = errors.get("messages") {
            return strings(messages);
        }
        if let Some(fields) = errors.as_object() {
            return fields
                .iter()
                .filter(|(k, _)| k.as_str() != "code")
                .flat_map(|(_, v)| strings(v))
                .collect();
        }
    }
    value.get("message").map(strings).unwrap_or_default()
}

/// `X-RateLimit-*` of an answer received at `now`, when it has any of them.
fn rate_limit_of(headers: &HeaderMap, now: SystemTime) -> Option<RateLimit> {
    let number = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    let count = |name: &str| number(name).map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    let limit = count("x-ratelimit-limit");
    let remaining = count("x-ratelimit-remaining");
    let reset = number("x-ratelimit-reset").map(|n| reset_after(n, now));
    (limit.is_some() || remaining.is_some() || reset.is_some()).then_some(RateLimit {
        limit,
        remaining,
        reset,
    })
}

/// `X-RateLimit-Reset` as a wait from `now`. Services send either a Unix time (GitHub,
/// Laravel) or seconds from now (the IETF draft); no wait is a billion seconds (31 years)
/// long, and no Unix time since 2001 is that short, so the size tells which.
fn reset_after(value: u64, now: SystemTime) -> Duration {
    const UNIX_TIME_ABOVE: u64 = 1_000_000_000;
    if value > UNIX_TIME_ABOVE {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(value);
        at.duration_since(now).unwrap_or(Duration::ZERO)
    } else {
        Duration::from_secs(value)
    }
}

fn call_of(method: &Method, url: &Url) -> Call {
    let method = match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        _ => "HTTP",
    };
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };
    Call { method, path }
}

/// A transport failure: timeouts and broken connections are worth retrying.
fn transport(call: Call, error: &reqwest::Error) -> ApiError {
    let reason = if error.is_timeout() {
        "timed out".to_owned()
    } else if error.is_connect() {
        // Refused, or a name that does not resolve: most often a wrong base_url, or a proxy
        // in the way. Only the proxy's host is said: its URL may hold a password.
        let host = error
            .url()
            .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
            .unwrap_or_else(|| "the service".into());
        let proxy = ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]
            .iter()
            .find_map(|var| std::env::var(var).ok())
            .and_then(|p| reqwest::Url::parse(&p).ok()?.host_str().map(str::to_owned))
            .map(|p| format!(", and the proxy {p} (HTTPS_PROXY)"))
            .unwrap_or_default();
        format!(
            "could not connect to {host} ({}); check api.base_url{proxy}",
            root_cause(error)
        )
    } else {
        format!("connection failed ({})", root_cause(error))
    };
    ApiError::Retryable {
        call,
        status: None,
        messages: vec![],
        retry_after: None,
        rate_limit: None,
        reason,
    }
}

/// The innermost cause, which says what really happened ("connection refused"), without the
/// URL that reqwest's own message repeats.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

fn unexpected(call: Call, what: String) -> ApiError {
    ApiError::Fatal {
        call,
        status: None,
        messages: vec![],
        reason: format!("the answer is not what the service sends: {what}"),
        fix: "check that api.base_url points at the Vehicle Inventory Service".into(),
    }
}

/// Percent-encodes a value used as one path segment (an application slug).
fn segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Checks a base URL and version as the client would take them (`lotsync validate`).
pub fn check_base_url(base_url: &str, version: &str) -> Result<(), ApiError> {
    root_url(base_url, version).map(drop)
}

fn root_url(base_url: &str, version: &str) -> Result<Url, ApiError> {
    let trimmed = base_url.trim();
    if !trimmed.is_empty() && !trimmed.contains("://") {
        // A bare host ("inventory.example.com", "inventory.example.com:443").
        return Err(ApiError::Setup(format!(
            "api.base_url {base_url:?} has no scheme: did you mean \"https://{}\"?",
            trimmed.trim_start_matches('/')
        )));
    }
    let mut root = Url::parse(trimmed)
        .map_err(|e| ApiError::Setup(format!("api.base_url {base_url:?} is not a URL: {e}")))?;
    match root.scheme() {
        "https" => {}
        "http" if is_loopback(&root) => {}
        "http" => {
            return Err(ApiError::Setup(format!(
                "api.base_url {base_url} is plain http to another machine: the token would cross \
                 the network unencrypted; use https"
            )))
        }
        other => {
            return Err(ApiError::Setup(format!(
                "api.base_url {base_url} has scheme {other:?}; use https"
            )))
        }
    }
    if root.query().is_some() || root.fragment().is_some() {
        return Err(ApiError::Setup(format!(
            "api.base_url {base_url} must not carry a query or fragment"
        )));
    }
    let version = version.trim_matches('/');
    if version.is_empty() || version.contains('/') {
        return Err(ApiError::Setup(format!(
            "api.version {version:?} must be one path segment such as v1"
        )));
    }
    let path = format!("{}/{version}/", root.path().trim_end_matches('/'));
    root.set_path(&path);
    Ok(root)
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    }
}

/// reqwest is built without a TLS crypto provider (`rustls-no-provider`): ring is installed as
/// the process default before the first client is built.
pub fn install_crypto_provider() {
    // Err means some provider is installed already, which is all that is needed.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_url_joins_base_and_version() {
        let root = root_url("https://api.example.com", "v1").unwrap();
        assert_eq!(root.as_str(), "https://api.example.com/v1/");
        let root = root_url("https://api.example.com/prefix/", "/v1/").unwrap();
        assert_eq!(root.as_str(), "https://api.example.com/prefix/v1/");
        assert_eq!(
            root.join("inventory/5/sold").unwrap().path(),
            "/prefix/v1/inventory/5/sold"
        );
    }

    #[test]
    fn plain_http_only_to_this_machine() {
        assert!(root_url("http://127.0.0.1:8080", "v1").is_ok());
        assert!(root_url("http://localhost:8080", "v1").is_ok());
        assert!(root_url("http://[::1]:8080", "v1").is_ok());
        let err = root_url("http://inventory.example.com", "v1").unwrap_err();
        assert!(err.to_string().contains("use https"), "{err}");
        assert!(root_url("ftp://x", "v1").is_err());
        assert!(root_url("https://x", "").is_err());
    }

    #[test]
    fn token_is_redacted_in_debug() {
        let token = ApiToken::new("s3cret-token");
        assert_eq!(format!("{token:?}"), "ApiToken(<redacted>)");
        let settings = ClientSettings::new("http://127.0.0.1:1", 1, token);
        assert!(!format!("{settings:?}").contains("s3cret"));
        let client = ApiClient::new(settings).unwrap();
        assert!(!format!("{client:?}").contains("s3cret"));
    }

    #[test]
    fn error_messages_in_every_common_shape() {
        assert_eq!(
            error_messages(br#"{"errors":{"code":422,"messages":["a","b"]}}"#),
            vec!["a", "b"]
        );
        assert_eq!(
            error_messages(br#"{"errors":{"vin":["The vin field is required."]}}"#),
            vec!["The vin field is required."]
        );
        assert_eq!(
            error_messages(br#"{"message":"Server Error"}"#),
            vec!["Server Error"]
        );
        assert!(error_messages(b"<html>").is_empty());
    }

    fn client(base: &str) -> ApiClient {
        ApiClient::new(ClientSettings::new(base, 1, ApiToken::new("t"))).unwrap()
    }

    #[test]
    fn next_pages_stay_on_the_service_and_keep_the_page_size() {
        let api = client("https://inventory.example.com");
        let current =
            Url::parse("https://inventory.example.com/v1/inventory?per_page=100").unwrap();
        let next = api.next_page(&current, "/v1/inventory?page=2").unwrap();
        assert_eq!(
            next.as_str(),
            "https://inventory.example.com/v1/inventory?page=2&per_page=100"
        );
        let kept = api
            .next_page(
                &current,
                "https://inventory.example.com/v1/inventory?page=3&per_page=50",
            )
            .unwrap();
        assert_eq!(kept.query(), Some("page=3&per_page=50"));
        let err = api
            .next_page(&current, "https://evil.example.net/v1/inventory?page=2")
            .unwrap_err();
        assert_eq!(err.class(), ErrorClass::Fatal);
        assert!(
            err.to_string()
                .contains("another host (https://evil.example.net)"),
            "{err}"
        );
        assert!(
            api.next_page(&current, "http://inventory.example.com/x")
                .is_err(),
            "scheme too"
        );
    }

    #[test]
    fn one_resource_is_read_bare_or_wrapped_in_data() {
        let answer = |value| Answer {
            value,
            status: 200,
            rate_limit: None,
            call: Call {
                method: "GET",
                path: "/v1/inventory/1".into(),
            },
        };
        let bare: Answer<Vehicle> = read_one(answer(serde_json::json!({"id": 4}))).unwrap();
        assert_eq!(bare.value.id, 4);
        let wrapped: Answer<Vehicle> =
            read_one(answer(serde_json::json!({"data": {"id": 5}}))).unwrap();
        assert_eq!(wrapped.value.id, 5);
        assert!(read_one::<Vehicle>(answer(serde_json::json!({"data": 1}))).is_err());
    }

    #[test]
    fn rate_limit_headers_with_a_reset_as_unix_time_or_seconds() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut h = HeaderMap::new();
            for (name, value) in pairs {
                h.insert(*name, HeaderValue::from_str(value).unwrap());
            }
            h
        };
        assert_eq!(rate_limit_of(&headers(&[]), now), None);
        let at = headers(&[
            ("x-ratelimit-limit", "60"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1700000042"),
        ]);
        assert_eq!(
            rate_limit_of(&at, now),
            Some(RateLimit {
                limit: Some(60),
                remaining: Some(0),
                reset: Some(Duration::from_secs(42)),
            })
        );
        let passed = headers(&[("x-ratelimit-reset", "1699999990")]);
        assert_eq!(
            rate_limit_of(&passed, now).and_then(|r| r.reset),
            Some(Duration::ZERO)
        );
        let delta = headers(&[("x-ratelimit-reset", " 30 ")]);
        assert_eq!(
            rate_limit_of(&delta, now).and_then(|r| r.reset),
            Some(Duration::from_secs(30))
        );
        let unparsable = headers(&[("x-ratelimit-limit", "10"), ("x-ratelimit-reset", "soon")]);
        let limits = rate_limit_of(&unparsable, now).unwrap();
        assert_eq!((limits.limit, limits.reset), (Some(10), None));
        let huge = headers(&[("x-ratelimit-limit", "99999999999")]);
        assert_eq!(
            rate_limit_of(&huge, now).and_then(|r| r.limit),
            Some(u32::MAX)
        );
    }

    /// A Retry-After no outage or maintenance means (a day; "1500" meant as milliseconds) is
    /// waited five minutes, then tried again; one a spent quota backs (nothing remaining until
    /// a reset as far away) is believed whole; a junk or negative one is no wait at all.
    #[test]
    fn a_retry_after_longer_than_a_maintenance_is_believed_only_with_a_quota() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let refused = |pairs: &[(&'static str, &str)]| {
            let mut h = HeaderMap::new();
            for (name, value) in pairs {
                h.insert(*name, HeaderValue::from_str(value).unwrap());
            }
            let wait = ServiceWait::default();
            let heard = heed(&wait, 429, &h, now);
            let held = wait.window().map(|w| {
                w.until
                    .saturating_duration_since(std::time::Instant::now())
                    .as_secs_f64()
                    .round() as u64
            });
            (heard.retry_after.map(|d| d.as_secs()), held)
        };
        assert_eq!(refused(&[("retry-after", "120")]), (Some(120), Some(120)));
        assert_eq!(refused(&[("retry-after", "86400")]), (Some(300), Some(300)));
        assert_eq!(refused(&[("retry-after", "1500")]), (Some(300), Some(300)));
        let quota = [
            ("retry-after", "86400"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1700086400"),
        ];
        assert_eq!(refused(&quota), (Some(86_400), Some(86_400)));
        // Tokens left: no quota backs the long wait.
        let left = [
            ("retry-after", "86400"),
            ("x-ratelimit-remaining", "12"),
            ("x-ratelimit-reset", "1700086400"),
        ];
        assert_eq!(refused(&left), (Some(300), Some(300)));
        assert_eq!(refused(&[("retry-after", "-5")]), (None, None));
        assert_eq!(refused(&[("retry-after", "soon")]), (None, None));
    }

    /// Nothing remaining until a reset further than a maintenance, on a 429 or a 403, or on the
    /// 2xx that took the last request: a quota spent, held until its reset and said as such.
    #[test]
    fn a_spent_quota_holds_until_its_reset_whatever_the_status() {
        let now = SystemTime::now();
        let reset = (now + Duration::from_secs(7200))
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            .to_string();
        for status in [200, 403, 429] {
            let mut h = HeaderMap::new();
            h.insert("x-ratelimit-remaining", HeaderValue::from(0));
            h.insert("x-ratelimit-reset", HeaderValue::from_str(&reset).unwrap());
            let wait = ServiceWait::default();
            heed(&wait, status, &h, now);
            let window = wait.window().expect("held");
            assert_eq!(window.reason, WaitReason::Quota, "{status}");
            let line = said(window.reason.header(), window.until_shown());
            assert!(
                line.starts_with("the service's quota is spent until 20"),
                "{line}"
            );
        }
        // A bucket's short reset is no quota.
        let mut h = HeaderMap::new();
        h.insert("x-ratelimit-remaining", HeaderValue::from(0));
        h.insert("x-ratelimit-reset", HeaderValue::from(2));
        let wait = ServiceWait::default();
        heed(&wait, 429, &h, now);
        assert_eq!(wait.window().unwrap().reason, WaitReason::RateLimitReset);
    }

    #[test]
    fn application_slug_is_one_segment() {
        assert_eq!(segment("inventory"), "inventory");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
    }
}
