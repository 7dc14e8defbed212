//! What a broker behind the front implements, and the request and response
//! codecs around it (the `kafka-protocol` crate's).

use super::sasl::Credentials;
use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use parking_lot::Mutex;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A broker's answers to decoded requests.
pub trait Service: Send + Sync + 'static {
    /// Each API this service answers, with the versions it implements
    /// (ApiVersions itself is the front's and is added to what is
    /// advertised). A request for any other API or version is refused by
    /// the front before it reaches [`call`](Self::call).
    fn apis(&self) -> Vec<(ApiKey, i16, i16)>;

    /// Answers one request; `None` for a request that gets no response
    /// (a produce with `acks=0`). The future may wait as long as the
    /// request's own timeout says (a parked produce or fetch): the front
    /// keeps reading and answering other requests meanwhile. The front
    /// polls it once before it reads the connection's next request, so
    /// what a call changes before its first wait takes effect in the order
    /// the connection sent the requests, as Kafka's do: a call should make
    /// its changes (append, commit, join) before it awaits anything. A
    /// call that finds the client over a quota says so on `throttle`,
    /// before its first wait where the next request must not be read.
    /// `principal` is who the connection authenticated as.
    fn call(
        self: Arc<Self>,
        header: RequestHeader,
        request: RequestKind,
        principal: Principal,
        throttle: Throttle,
    ) -> impl Future<Output = Answer> + Send + 'static;

    /// Waits out a client's throttle: the front reads nothing more from
    /// its connection until this returns.
    fn wait_throttle(self: Arc<Self>, time: Duration) -> impl Future<Output = ()> + Send + 'static;

    /// Whether a new connection from `peer` is served: zero if it is, or
    /// how long to hold it before closing it unread, as Kafka holds a
    /// connection its address's connection-rate quota refuses. The wait
    /// is [`wait_throttle`](Self::wait_throttle)'s. Every connection is
    /// served unless a service says otherwise.
    fn admit(&self, peer: std::net::IpAddr) -> Duration {
        let _ = peer;
        Duration::ZERO
    }

    /// Whom the listeners authenticate, with SASL (PLAIN, SCRAM-SHA-256,
    /// SCRAM-SHA-512), before they serve anything but SASL; `None`, the
    /// default, for plaintext listeners that authenticate nobody.
    fn credentials(&self) -> Option<Arc<dyn Credentials>> {
        None
    }

    /// The feature flags ApiVersions announces (KIP-584); `None`, the
    /// default, announces none.
    fn features(&self) -> Option<Features> {
        None
    }
}

/// What a broker announces of its feature flags (KIP-584) in ApiVersions
/// from v3: each feature it supports, with the levels it can run, and each
/// finalized for the whole cluster, at its level, with the epoch of the
/// last change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features {
    /// Name, lowest and highest level supported.
    pub supported: Vec<(String, i16, i16)>,
    /// Name and finalized level; a feature at level 0 is off and not
    /// listed.
    pub finalized: Vec<(String, i16)>,
    /// Rises with each change of a finalized level.
    pub epoch: i64,
}

/// Who a connection's requests come from: the user it authenticated as
/// with SASL, or nobody in particular on a plaintext listener; and the
/// address the connection comes from, where the front knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Principal {
    user: Option<Arc<str>>,
    host: Option<std::net::IpAddr>,
}

impl Principal {
    /// The name of the principal every client of a plaintext listener
    /// is, as Kafka names it.
    pub const ANONYMOUS: &'static str = "ANONYMOUS";

    /// The principal of `user`, authenticated.
    pub fn user(user: &str) -> Self {
        Principal {
            user: Some(Arc::from(user)),
            host: None,
        }
    }

    /// The same principal, connected from `host`.
    pub fn from_host(self, host: std::net::IpAddr) -> Self {
        Principal {
            host: Some(host),
            ..self
        }
    }

    /// Its name, as quotas name a user: the user authenticated, or
    /// `ANONYMOUS`.
    pub fn name(&self) -> &str {
        self.user.as_deref().unwrap_or(Self::ANONYMOUS)
    }

    /// The address its connection comes from, if known.
    pub fn host(&self) -> Option<std::net::IpAddr> {
        self.host
    }

    /// That address written as a Kafka broker writes it (Java's
    /// `InetAddress.getHostAddress`), which ACL hosts are matched
    /// against and group members' hosts are shown as: an IPv4 address
    /// mapped into IPv6 as the IPv4 address, any other IPv6 address as
    /// its eight groups in hexadecimal, none elided (`0:0:0:0:0:0:0:1`,
    /// where Rust writes `::1`).
    pub fn host_address(&self) -> Option<String> {
        self.host.map(host_address)
    }
}

/// `host` written as a Kafka broker writes it: see
/// [`Principal::host_address`].
fn host_address(host: std::net::IpAddr) -> String {
    match host {
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => (v6.segments().iter())
                .map(|group| format!("{group:x}"))
                .collect::<Vec<_>>()
                .join(":"),
        },
        v4 => v4.to_string(),
    }
}

/// What a call answers.
#[derive(Debug, Default)]
pub struct Answer {
    /// The response, if the request gets one.
    pub response: Option<ResponseKind>,
    /// How long the response is held before it is sent: a throttle time,
    /// for a client too old to throttle itself (Kafka's
    /// `shouldClientThrottle`), as Kafka holds it.
    pub hold: Duration,
}

impl From<Option<ResponseKind>> for Answer {
    fn from(response: Option<ResponseKind>) -> Self {
        Answer {
            response,
            hold: Duration::ZERO,
        }
    }
}

/// A connection's throttle: until when nothing more is read from it, as a
/// Kafka broker mutes the channel of a client a quota throttles.
#[derive(Debug, Clone, Default)]
pub struct Throttle(Arc<Muted>);

#[derive(Debug, Default)]
struct Muted {
    /// Whether `until` is set: the front looks before every request, and
    /// a connection nobody throttles takes no lock for it.
    set: AtomicBool,
    until: Mutex<Option<Instant>>,
}

impl Throttle {
    /// Reads nothing more for `time` from now (or for longer, if already
    /// throttled longer).
    pub fn mute(&self, time: Duration) {
        if time.is_zero() {
            return;
        }
        let at = Instant::now() + time;
        let mut until = self.0.until.lock();
        *until = Some(until.map_or(at, |m| m.max(at)));
        self.0.set.store(true, Ordering::Release);
    }

    /// How long reading must still wait, if it must; forgets it.
    pub fn take(&self) -> Option<Duration> {
        if !self.0.set.swap(false, Ordering::Acquire) {
            return None;
        }
        let until = self.0.until.lock().take()?;
        Some(until.saturating_duration_since(Instant::now())).filter(|d| !d.is_zero())
    }
}

/// Versions of ApiVersions the front answers (v3 and later are flexible
/// and carry the features; v4 differs from v3 only in that a supported
/// feature may start at level 0).
const API_VERSIONS: (i16, i16) = (0, 4);

/// Why a frame is not a request the service can be asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadRequest {
    /// An API key the crate does not know: the connection is closed.
    UnknownApiKey(i16),
    /// A known API at a version that is not implemented: ApiVersions is
    /// answered with UNSUPPORTED_VERSION; other APIs close the connection.
    UnsupportedVersion {
        /// The API.
        api: ApiKey,
        /// The version asked for.
        version: i16,
        /// The versions of the API that are served, if any.
        served: Option<(i16, i16)>,
        /// The request's correlation id, for the answer.
        correlation_id: i32,
    },
    /// The header or body does not decode, or bytes are left after it.
    Malformed(String),
}

/// In words, for the log line of a closed connection, so that the user of
/// a client on old versions learns what is served instead (sarama 1.22
/// commits offsets at OffsetCommit v1 unless a retention is set, and Kafka
/// 4 dropped v0-1, as this front does).
impl std::fmt::Display for BadRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadRequest::UnknownApiKey(key) => write!(f, "API key {key} is unknown"),
            BadRequest::UnsupportedVersion {
                api,
                version,
                served: Some((lo, hi)),
                ..
            } => write!(f, "{api:?} v{version} is not served (v{lo}-{hi} are)"),
            BadRequest::UnsupportedVersion {
                api, served: None, ..
            } => write!(f, "{api:?} is not served"),
            BadRequest::Malformed(why) => write!(f, "malformed request: {why}"),
        }
    }
}

/// Decodes one frame into its header and request, checking the version
/// against what is advertised.
pub fn decode_request(
    frame: Bytes,
    apis: &[(ApiKey, i16, i16)],
) -> Result<(RequestHeader, RequestKind), BadRequest> {
    if frame.len() < 8 {
        return Err(BadRequest::Malformed(format!(
            "{} bytes, below a header",
            frame.len()
        )));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let api = ApiKey::try_from(key).map_err(|_| BadRequest::UnknownApiKey(key))?;
    let served = advertised(apis)
        .iter()
        .find(|&&(a, _, _)| a == api)
        .map(|&(_, lo, hi)| (lo, hi));
    if !served.is_some_and(|(lo, hi)| (lo..=hi).contains(&version)) {
        return Err(BadRequest::UnsupportedVersion {
            api,
            version,
            served,
            correlation_id,
        });
    }
    let mut buf = frame;
    let header_version = api.request_header_version(version);
    let header = RequestHeader::decode(&mut buf, header_version)
        .map_err(|e| BadRequest::Malformed(format!("header: {e}")))?;
    // Request header v2 goes with the flexible body encodings.
    super::bounds::check(api, version, header_version >= 2, &buf)
        .map_err(|e| BadRequest::Malformed(format!("{api:?} v{version}: {e}")))?;
    // Bytes after the body are ignored, as Kafka's brokers ignore them:
    // librdkafka (2.x) writes the null topic list of an all-topics
    // Metadata request of v9 and later as 4 bytes where the compact
    // encoding has 1, and Kafka reads the first as null, the next as the
    // request's last fields, and leaves the rest. Refusing them broke
    // `list_topics()` and regex subscriptions.
    let request = RequestKind::decode(api, &mut buf, version)
        .map_err(|e| BadRequest::Malformed(format!("{api:?} v{version}: {e}")))?;
    Ok((header, request))
}

/// What the front advertises: the service's APIs and ApiVersions.
pub(crate) fn advertised(apis: &[(ApiKey, i16, i16)]) -> Vec<(ApiKey, i16, i16)> {
    let mut all = vec![(ApiKey::ApiVersions, API_VERSIONS.0, API_VERSIONS.1)];
    all.extend(apis.iter().filter(|a| a.0 != ApiKey::ApiVersions));
    all
}

/// The front's own answer to ApiVersions, at `version` (`None`: the
/// requested version is not supported, answered at v0 as Kafka does),
/// with the service's `features`.
pub(crate) fn api_versions(
    apis: &[(ApiKey, i16, i16)],
    version: Option<i16>,
    features: Option<Features>,
) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.api_keys = api_keys(apis);
    let Some(version) = version else {
        response.error_code = ResponseError::UnsupportedVersion.code();
        return response;
    };
    if let Some(features) = features {
        // Before v4, a client may fail to read a supported feature that
        // starts at level 0, so Kafka leaves those out (KAFKA-17492).
        response.supported_features = (features.supported.into_iter())
            .filter(|&(_, lo, _)| version >= 4 || lo > 0)
            .map(|(name, lo, hi)| {
                let mut key = SupportedFeatureKey::default();
                key.name = StrBytes::from_string(name);
                key.min_version = lo;
                key.max_version = hi;
                key
            })
            .collect();
        response.finalized_features = (features.finalized.into_iter())
            .filter(|&(_, level)| level != 0)
            .map(|(name, level)| {
                let mut key = FinalizedFeatureKey::default();
                key.name = StrBytes::from_string(name);
                key.min_version_level = level;
                key.max_version_level = level;
                key
            })
            .collect();
        response.finalized_features_epoch = features.epoch;
    }
    response
}

/// Each advertised API with its versions, as ApiVersions lists them.
fn api_keys(apis: &[(ApiKey, i16, i16)]) -> Vec<ApiVersion> {
    advertised(apis)
        .into_iter()
        .map(|(api, lo, hi)| {
            let mut v = ApiVersion::default();
            v.api_key = api as i16;
            v.min_version = lo;
            v.max_version = hi;
            v
        })
        .collect()
}

/// Encodes a response frame: size, header, body.
pub fn encode_response(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    response: &ResponseKind,
) -> Result<Bytes, String> {
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&[0; 4]);
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    header
        .encode(&mut buf, api.response_header_version(version))
        .map_err(|e| e.to_string())?;
    response
        .encode(&mut buf, version)
        .map_err(|e| format!("{api:?} v{version}: {e}"))?;
    let size = i32::try_from(buf.len() - 4).map_err(|_| "response over 2 GiB".to_string())?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    #[test]
    fn addresses_are_written_as_java_writes_them() {
        let v4 = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7));
        assert_eq!(host_address(v4), "10.0.0.7");
        assert_eq!(
            host_address(IpAddr::V6(Ipv6Addr::LOCALHOST)),
            "0:0:0:0:0:0:0:1"
        );
        let v6: IpAddr = "fe80::1:ab0".parse().unwrap();
        assert_eq!(host_address(v6), "fe80:0:0:0:0:0:1:ab0");
        let mapped = IpAddr::V6(Ipv4Addr::new(127, 0, 0, 1).to_ipv6_mapped());
        assert_eq!(host_address(mapped), "127.0.0.1");
        let principal = Principal::user("alice").from_host(IpAddr::V6(Ipv6Addr::LOCALHOST));
        assert_eq!(principal.host_address().as_deref(), Some("0:0:0:0:0:0:0:1"));
        assert_eq!(Principal::user("alice").host_address(), None);
    }
}
