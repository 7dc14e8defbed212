//! Client quotas as admin clients manage them (AlterClientQuotas,
//! DescribeClientQuotas), with the rules of Kafka's controller
//! (`ClientQuotaControlManager`) and the answers of its brokers
//! (`ClientQuotasImage::describe`); and which quota applies to a client
//! (Kafka's default quota callback), for `throttling.rs` to enforce.
//!
//! An entity is a user, a client id or both (each named, or the default
//! for all that have no quota of their own), or an IP address. A client's
//! user is the one its connection authenticated as with SASL; on plaintext
//! listeners every client is the user `ANONYMOUS`, as Kafka names an
//! unauthenticated principal, and a quota of that user, or of the default
//! user, applies to all of them.
//!
//! Every quota Kafka takes is applied: the two byte rates,
//! `producer_byte_rate` and `consumer_byte_rate`, the request-time quota,
//! `request_percentage`, and the partition mutation rate,
//! `controller_mutation_rate`, for users and client ids; and for IP
//! addresses the connection rate, `connection_creation_rate`.

use super::service::BrokerService;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    alter_client_quotas_request, alter_client_quotas_response, describe_client_quotas_response,
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};

const USER: &str = "user";
const CLIENT_ID: &str = "client-id";
const IP: &str = "ip";

/// The user every client of a plaintext listener is.
#[cfg(test)]
const ANONYMOUS: &str = crate::wire::Principal::ANONYMOUS;

/// Who a request's quotas are looked up for: its connection's user and
/// its client id (empty for a request without one, as Kafka takes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Client<'a> {
    /// The principal's name.
    pub user: &'a str,
    /// The request header's client id.
    pub id: &'a str,
}

#[cfg(test)]
impl<'a> Client<'a> {
    /// A client of a plaintext listener.
    pub fn anonymous(id: &'a str) -> Self {
        Client {
            user: ANONYMOUS,
            id,
        }
    }
}

/// The quotas applied, by what they bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quota {
    /// `producer_byte_rate`: bytes of record batches produced per second.
    Produce,
    /// `consumer_byte_rate`: bytes of records fetched per second.
    Fetch,
    /// `request_percentage`: the time spent handling the client's
    /// requests, in percent of one thread.
    Request,
    /// `controller_mutation_rate`: partitions created or deleted per
    /// second (CreateTopics, CreatePartitions, DeleteTopics).
    Mutations,
    /// `connection_creation_rate`: connections an IP address opens per
    /// second.
    Connections,
}

impl Quota {
    fn key(self) -> &'static str {
        match self {
            Quota::Produce => "producer_byte_rate",
            Quota::Fetch => "consumer_byte_rate",
            Quota::Request => "request_percentage",
            Quota::Mutations => "controller_mutation_rate",
            Quota::Connections => "connection_creation_rate",
        }
    }
}

/// An entity: each of its types with its name (`None`: the default).
type Entity = BTreeMap<String, Option<String>>;

/// Who a quota's rate is measured for: the user and client id, either
/// empty when the quota is not one of that part (Kafka's metric tags).
pub type Measured = (String, String);

/// The quotas set, by entity.
#[derive(Debug, Default)]
pub struct ClientQuotas {
    entities: Mutex<BTreeMap<Entity, BTreeMap<String, f64>>>,
    /// Whether any quota is set: the produce and fetch paths look no
    /// further while none is.
    any: AtomicBool,
    /// Whether a `request_percentage` is set: requests are not timed
    /// while none is.
    request_time: AtomicBool,
    /// The connection rates of IP addresses, each entity's name resolved
    /// when it was set (as Kafka's brokers resolve it), and the default.
    /// Taken only while `entities` is held, so an alteration's table is
    /// never replaced by an older one.
    connection_rates: Mutex<ConnectionRates>,
}

/// The `connection_creation_rate`s set.
#[derive(Debug, Default)]
struct ConnectionRates {
    /// Each address's own.
    of: HashMap<IpAddr, f64>,
    /// Every other address's, each measured on its own.
    default: Option<f64>,
    /// The address each IP entity with a rate was resolved to when set.
    named: HashMap<String, IpAddr>,
}

/// Why a change or a filter is refused: the error code and a message.
type Refusal = (i16, String);

/// A key set to a value, or removed (`None`).
type Change = (String, Option<f64>);

/// An entry that passed the checks: its entity, its changes, and the
/// address its IP entity names (looked up by the check).
type Checked = (Entity, Vec<Change>, Option<IpAddr>);

/// A refusal: INVALID_REQUEST with Kafka's kind of message.
fn invalid(message: String) -> Refusal {
    (ResponseError::InvalidRequest.code(), message)
}

impl ClientQuotas {
    /// Applies each entry that passes the controller's checks (all of it
    /// or none of it), unless `validate_only`; answers each entry.
    pub fn alter(
        &self,
        r: &AlterClientQuotasRequest,
    ) -> Vec<alter_client_quotas_response::EntryData> {
        // Checked without the quotas' lock: an IP entity's host name is
        // looked up.
        let mut seen = BTreeSet::new();
        let checked: Vec<Result<Checked, Refusal>> = (r.entries.iter())
            .map(|entry| {
                let named: Vec<(String, Option<String>)> = (entry.entity.iter())
                    .map(|e| {
                        (
                            e.entity_type.to_string(),
                            e.entity_name.as_deref().map(String::from),
                        )
                    })
                    .collect();
                let (entity, address) = entity(&named)?;
                if !seen.insert(entity.clone()) {
                    return Err(invalid(format!("Ignoring duplicate entity {entity:?}")));
                }
                let changes = changes(&entity, &entry.ops)?;
                Ok((entity, changes, address))
            })
            .collect();
        if !r.validate_only {
            self.apply(checked.iter().filter_map(|c| c.as_ref().ok()));
        }
        (r.entries.iter().zip(checked))
            .map(|(entry, checked)| {
                let mut out = alter_client_quotas_response::EntryData::default();
                // The codec's default message is empty, not null.
                out.error_message = None;
                if let Err((code, message)) = checked {
                    out.error_code = code;
                    out.error_message = Some(StrBytes::from_string(message));
                }
                out.entity = (entry.entity.iter())
                    .map(|e| {
                        let mut d = alter_client_quotas_response::EntityData::default();
                        d.entity_type = e.entity_type.clone();
                        d.entity_name = e.entity_name.clone();
                        d
                    })
                    .collect();
                out
            })
            .collect()
    }

    /// Applies checked changes, then rebuilds the connection rates: the
    /// IP entities changed at the addresses their check found, the others
    /// at those found when they were set. No name is looked up here, so
    /// the whole of it runs under the entities' lock.
    fn apply<'a>(&self, changed: impl Iterator<Item = &'a Checked>) {
        let mut entities = self.entities.lock();
        let mut found = HashMap::new();
        for (entity, changes, address) in changed {
            if let (Some(Some(name)), Some(ip)) = (entity.get(IP), address) {
                found.insert(name.clone(), *ip);
            }
            let quotas = entities.entry(entity.clone()).or_default();
            for (key, value) in changes {
                match value {
                    Some(v) => quotas.insert(key.clone(), *v),
                    None => quotas.remove(key),
                };
            }
            if quotas.is_empty() {
                entities.remove(entity);
            }
        }
        self.any.store(!entities.is_empty(), Ordering::Release);
        let timed = (entities.values()).any(|q| q.contains_key(Quota::Request.key()));
        self.request_time.store(timed, Ordering::Release);
        let rates: Vec<(Option<String>, f64)> = (entities.iter())
            .filter_map(|(entity, quotas)| {
                let name = entity.get(IP)?.clone();
                Some((name, *quotas.get(Quota::Connections.key())?))
            })
            .collect();
        let mut table = self.connection_rates.lock();
        let named = std::mem::take(&mut table.named);
        *table = connection_rates(rates, |name| found.get(name).or(named.get(name)).copied());
    }

    /// The entities whose types match the request's filter, with their
    /// quotas; or the error that refuses the filter.
    pub fn describe(
        &self,
        r: &DescribeClientQuotasRequest,
    ) -> Result<Vec<describe_client_quotas_response::EntryData>, Refusal> {
        // Type to name asked (`None`: the default), and types asked for
        // whatever their name.
        let mut exact: BTreeMap<String, Option<String>> = BTreeMap::new();
        let mut any = BTreeSet::new();
        for c in &r.components {
            let kind = c.entity_type.to_string();
            if kind.is_empty() {
                return Err(invalid("Invalid empty entity type.".into()));
            }
            if exact.contains_key(&kind) || any.contains(&kind) {
                return Err(invalid(format!(
                    "Entity type {kind} cannot appear more than once in the filter."
                )));
            }
            if ![USER, CLIENT_ID, IP].contains(&kind.as_str()) {
                return Err((
                    ResponseError::UnsupportedVersion.code(),
                    format!("Unsupported entity type {kind}"),
                ));
            }
            let name = c._match.as_deref().map(String::from);
            match (c.match_type, name) {
                (0, Some(name)) => {
                    exact.insert(kind, Some(name));
                }
                (1, None) => {
                    exact.insert(kind, None);
                }
                (2, None) => {
                    any.insert(kind);
                }
                (0, None) => {
                    return Err(invalid(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.".into(),
                    ))
                }
                (1, Some(_)) => {
                    return Err(invalid(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                            .into(),
                    ))
                }
                (2, Some(_)) => return Err(invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                        .into(),
                )),
                (other, _) => return Err(invalid(format!("Unknown match type {other}"))),
            }
        }
        let has = |kind: &str| exact.contains_key(kind) || any.contains(kind);
        if has(IP) && (has(USER) || has(CLIENT_ID)) {
            return Err(invalid(
                "Invalid entity filter component combination. IP filter component should not \
                 be used with user or clientId filter component."
                    .into(),
            ));
        }
        let entities = self.entities.lock();
        let matching = entities.iter().filter(|(entity, _)| {
            (!r.strict || entity.len() == exact.len() + any.len())
                && exact
                    .iter()
                    .all(|(kind, name)| entity.get(kind) == Some(name))
                && any.iter().all(|kind| entity.contains_key(kind))
        });
        Ok(matching
            .map(|(entity, quotas)| {
                let mut out = describe_client_quotas_response::EntryData::default();
                out.entity = (entity.iter())
                    .map(|(kind, name)| {
                        let mut d = describe_client_quotas_response::EntityData::default();
                        d.entity_type = StrBytes::from_string(kind.clone());
                        d.entity_name = name.clone().map(StrBytes::from_string);
                        d
                    })
                    .collect();
                out.values = (quotas.iter())
                    .map(|(key, &value)| {
                        let mut v = describe_client_quotas_response::ValueData::default();
                        v.key = StrBytes::from_string(key.clone());
                        v.value = value;
                        v
                    })
                    .collect();
                out
            })
            .collect())
    }

    /// Whether any quota is set: while none is, the produce and fetch
    /// paths neither read the clock nor lock anything for quotas.
    pub fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// The `connection_creation_rate` that applies to connections from
    /// `ip`, its own or the default, with whom it is measured for (each
    /// address on its own); `None` where none does.
    pub fn connection_rate(&self, ip: IpAddr) -> Option<(f64, Measured)> {
        if !self.any() {
            return None;
        }
        let rates = self.connection_rates.lock();
        let limit = rates.of.get(&ip).copied().or(rates.default)?;
        Some((limit, (ip.to_string(), String::new())))
    }

    /// Whether a `request_percentage` is set for anyone: while none is,
    /// requests are not timed.
    pub fn times_requests(&self) -> bool {
        self.request_time.load(Ordering::Acquire)
    }

    /// The `rate` quota that applies to `client`, with whom its rate is
    /// measured for; `None` where none does. Kafka's order: the user with
    /// the client id, the user with the default client, the user alone;
    /// then the same for the default user; then the client id alone, and
    /// the default client.
    pub fn applying(&self, rate: Quota, client: Client<'_>) -> Option<(f64, Measured)> {
        if !self.any() {
            return None;
        }
        // One pass over the few entities set, none built for the lookup:
        // each that names this client's user and client id (or their
        // defaults) has its rank in Kafka's order; the first rank wins.
        let entities = self.entities.lock();
        let (rank, limit) = (entities.iter())
            .filter_map(|(entity, quotas)| Some((rank(entity, client)?, *quotas.get(rate.key())?)))
            .min_by_key(|&(rank, _)| rank)?;
        let user = || client.user.to_string();
        let client = || client.id.to_string();
        let measured = match rank {
            // A user's own quota is the user's, whatever the client.
            2 | 5 => (user(), String::new()),
            6 | 7 => (String::new(), client()),
            _ => (user(), client()),
        };
        Some((limit, measured))
    }
}

/// Where `entity` stands in Kafka's order for `client`, from 0 (the user
/// with the client id) to 7 (the default client); `None` if it does not
/// name this client.
fn rank(entity: &Entity, client: Client<'_>) -> Option<u8> {
    // Its user: 0 the client's own, 1 the default, 2 none named.
    let user = match entity.get(USER) {
        Some(Some(name)) if name == client.user => 0,
        Some(Some(_)) => return None,
        Some(None) => 1,
        None => 2,
    };
    // Its client id: 0 this one, 1 the default, 2 none named.
    let client = match entity.get(CLIENT_ID) {
        Some(Some(name)) if name == client.id => 0,
        Some(Some(_)) => return None,
        Some(None) => 1,
        None => 2,
    };
    match (user, client) {
        (2, 2) => None,
        // The users' ranks, each with the client id, the default client,
        // then alone: 0-2 and 3-5; then the client id, the default: 6-7.
        (u @ 0..=1, c) => Some(u * 3 + c),
        (_, c) => Some(6 + c),
    }
}

/// The connection rates of the IP entities that set one (`None`: the
/// default), by address, each name at the address `address_of` gives it.
fn connection_rates(
    rates: Vec<(Option<String>, f64)>,
    address_of: impl Fn(&str) -> Option<IpAddr>,
) -> ConnectionRates {
    let mut table = ConnectionRates::default();
    for (name, rate) in rates {
        match name {
            None => table.default = Some(rate),
            Some(name) => {
                if let Some(ip) = address_of(&name) {
                    table.of.insert(ip, rate);
                    table.named.insert(name, ip);
                }
            }
        }
    }
    table
}

/// The address an IP entity names: itself, or the host's first address.
fn resolve(name: &str) -> Option<IpAddr> {
    if let Ok(ip) = name.parse::<IpAddr>() {
        return Some(ip);
    }
    let mut found = (name, 0).to_socket_addrs().ok()?;
    found.next().map(|a| a.ip())
}

/// The entity named, checked as Kafka's controller checks it, with the
/// address it names if it is a named IP entity.
fn entity(named: &[(String, Option<String>)]) -> Result<(Entity, Option<IpAddr>), Refusal> {
    if named.is_empty() {
        return Err(invalid("Invalid empty client quota entity".into()));
    }
    let mut entity = Entity::new();
    for (kind, name) in named {
        if entity.contains_key(kind) {
            return Err(invalid(format!(
                "Invalid client quota entity, duplicate entity entry {kind}"
            )));
        }
        if ![USER, CLIENT_ID, IP].contains(&kind.as_str()) {
            return Err(invalid(format!(
                "Unhandled client quota entity type: {kind}"
            )));
        }
        if name.as_deref() == Some("") {
            return Err(invalid(format!("Empty {kind} not supported")));
        }
        entity.insert(kind.clone(), name.clone());
    }
    let mut address = None;
    if entity.contains_key(IP) {
        if entity.len() > 1 {
            return Err(invalid(
                "Invalid quota entity combination, IP entity should not be combined with User \
                 or ClientId"
                    .into(),
            ));
        }
        if let Some(Some(ip)) = entity.get(IP) {
            address = resolve(ip);
            if address.is_none() {
                return Err(invalid(format!(
                    "{ip} is not a valid IP or resolvable host."
                )));
            }
        }
    }
    Ok((entity, address))
}

/// The entry's changes (`None`: remove the key), checked as Kafka's
/// controller checks them: each key once, a known key for the entity's
/// kind, a value above zero, whole for the integral ones.
fn changes(
    entity: &Entity,
    ops: &[alter_client_quotas_request::OpData],
) -> Result<Vec<Change>, Refusal> {
    let keys: &[&str] = if entity.contains_key(IP) {
        &["connection_creation_rate"]
    } else {
        &[
            "producer_byte_rate",
            "consumer_byte_rate",
            "request_percentage",
            "controller_mutation_rate",
        ]
    };
    let mut changes: Vec<Change> = Vec::new();
    for op in ops {
        let key = op.key.to_string();
        if changes.iter().any(|(k, _)| *k == key) {
            return Err(invalid(format!(
                "Duplicate quota key {key} not updating quota for this entity {entity:?}"
            )));
        }
        // A removal is not checked: removing what is not set changes nothing.
        if op.remove {
            changes.push((key, None));
            continue;
        }
        if !keys.contains(&key.as_str()) {
            return Err(invalid(format!("Invalid configuration key {key}")));
        }
        let value = op.value;
        if value.is_nan() || value <= 0.0 {
            return Err(invalid(format!("Quota {key} must be greater than 0")));
        }
        // Doubles; the byte rates are longs.
        if key == Quota::Mutations.key() || key == Quota::Request.key() {
            changes.push((key, Some(value)));
            continue;
        }
        // The byte rates are longs, the connection rate an int.
        let (most, kind) = if key == Quota::Connections.key() {
            (f64::from(i32::MAX), "an INT")
        } else {
            (i64::MAX as f64, "a LONG")
        };
        if value > most {
            return Err(invalid(format!(
                "Proposed value for {key} is too large for {kind}."
            )));
        }
        if (value % 1.0).abs() > 1e-6 {
            return Err(invalid(format!("{key} cannot be a fractional value.")));
        }
        changes.push((key, Some(value)));
    }
    Ok(changes)
}

impl BrokerService {
    pub(crate) fn alter_client_quotas(
        &self,
        r: AlterClientQuotasRequest,
    ) -> AlterClientQuotasResponse {
        let mut response = AlterClientQuotasResponse::default();
        response.entries = self.cluster.client_quotas.alter(&r);
        response
    }

    pub(crate) fn describe_client_quotas(
        &self,
        r: DescribeClientQuotasRequest,
    ) -> DescribeClientQuotasResponse {
        let mut response = DescribeClientQuotasResponse::default();
        response.error_message = None;
        match self.cluster.client_quotas.describe(&r) {
            Ok(entries) => response.entries = Some(entries),
            Err((code, message)) => {
                response.error_code = code;
                response.error_message = Some(StrBytes::from_string(message));
            }
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::describe_client_quotas_request::ComponentData;

    fn s(v: &str) -> StrBytes {
        StrBytes::from_string(v.to_string())
    }

    /// An entry setting (or, for `None`, removing) `ops` of `entity`.
    fn entry(
        entity: &[(&str, Option<&str>)],
        ops: &[(&str, Option<f64>)],
    ) -> alter_client_quotas_request::EntryData {
        let mut e = alter_client_quotas_request::EntryData::default();
        e.entity = (entity.iter())
            .map(|(kind, name)| {
                let mut d = alter_client_quotas_request::EntityData::default();
                d.entity_type = s(kind);
                d.entity_name = name.map(s);
                d
            })
            .collect();
        e.ops = (ops.iter())
            .map(|(key, value)| {
                let mut op = alter_client_quotas_request::OpData::default();
                op.key = s(key);
                op.value = value.unwrap_or(0.0);
                op.remove = value.is_none();
                op
            })
            .collect();
        e
    }

    fn alter(
        quotas: &ClientQuotas,
        entries: Vec<alter_client_quotas_request::EntryData>,
        validate_only: bool,
    ) -> Vec<(i16, String)> {
        let mut r = AlterClientQuotasRequest::default();
        r.entries = entries;
        r.validate_only = validate_only;
        (quotas.alter(&r).into_iter())
            .map(|e| {
                (
                    e.error_code,
                    e.error_message.map(|m| m.to_string()).unwrap_or_default(),
                )
            })
            .collect()
    }

    /// (entity, values) of each entity the filter matches, or the error.
    type Described = Vec<(Vec<(String, Option<String>)>, Vec<(String, f64)>)>;

    fn describe(
        quotas: &ClientQuotas,
        filter: &[(&str, i8, Option<&str>)],
        strict: bool,
    ) -> Result<Described, i16> {
        let mut r = DescribeClientQuotasRequest::default();
        r.strict = strict;
        r.components = (filter.iter())
            .map(|(kind, match_type, name)| {
                let mut c = ComponentData::default();
                c.entity_type = s(kind);
                c.match_type = *match_type;
                c._match = name.map(s);
                c
            })
            .collect();
        let entries = quotas.describe(&r).map_err(|(code, _)| code)?;
        Ok(entries
            .into_iter()
            .map(|e| {
                let entity = (e.entity.iter())
                    .map(|d| {
                        (
                            d.entity_type.to_string(),
                            d.entity_name.as_deref().map(String::from),
                        )
                    })
                    .collect();
                let values = (e.values.iter())
                    .map(|v| (v.key.to_string(), v.value))
                    .collect();
                (entity, values)
            })
            .collect())
    }

    const INVALID: i16 = 42;

    #[test]
    fn alterations_are_checked_as_kafkas_controller_checks_them() {
        let q = ClientQuotas::default();
        let rate = |v| [("producer_byte_rate", Some(v))];
        let refused = alter(
            &q,
            vec![
                entry(&[], &rate(1.0)),
                entry(&[("user", Some("a")), ("user", Some("b"))], &rate(1.0)),
                entry(&[("group", Some("g"))], &rate(1.0)),
                entry(&[("client-id", Some(""))], &rate(1.0)),
                entry(&[("ip", Some("10.0.0.1")), ("user", None)], &rate(1.0)),
                entry(&[("client-id", Some("c"))], &rate(0.0)),
                entry(&[("client-id", Some("d"))], &rate(1.5)),
                entry(&[("client-id", Some("e"))], &[("fetch_rate", Some(1.0))]),
                entry(
                    &[("client-id", Some("f"))],
                    &[("request_percentage", Some(-50.0))],
                ),
                entry(
                    &[("ip", Some("10.0.0.1"))],
                    &[("connection_creation_rate", Some(5.5))],
                ),
                entry(
                    &[("client-id", Some("g"))],
                    &[
                        ("producer_byte_rate", Some(1.0)),
                        ("producer_byte_rate", Some(2.0)),
                    ],
                ),
            ],
            false,
        );
        let codes: Vec<i16> = refused.iter().map(|(c, _)| *c).collect();
        assert_eq!(codes, vec![INVALID; 11], "{refused:?}");
        assert!(refused[8].1.contains("greater than 0"), "{refused:?}");
        assert!(refused[9].1.contains("fractional"), "{refused:?}");
        assert!(refused[6].1.contains("fractional"), "{refused:?}");
        assert_eq!(describe(&q, &[], false), Ok(vec![]), "nothing was set");
        // Validated only: answered, not kept.
        let entity = [("user", None), ("client-id", Some("app"))];
        assert_eq!(alter(&q, vec![entry(&entity, &rate(1024.0))], true)[0].0, 0);
        assert_eq!(describe(&q, &[], false), Ok(vec![]));
        // Kept; an entity named twice in one request is refused the
        // second time, after the first was applied.
        let again = alter(
            &q,
            vec![entry(&entity, &rate(1024.0)), entry(&entity, &rate(1.0))],
            false,
        );
        assert_eq!((again[0].0, again[1].0), (0, INVALID));
        let user_default_and_app = vec![
            ("client-id".to_string(), Some("app".to_string())),
            ("user".to_string(), None),
        ];
        assert_eq!(
            describe(&q, &[], false),
            Ok(vec![(
                user_default_and_app,
                vec![("producer_byte_rate".into(), 1024.0)]
            )])
        );
        // A removal of the last key forgets the entity; removing what was
        // never set changes nothing.
        let remove = [("producer_byte_rate", None), ("anything", None)];
        assert_eq!(alter(&q, vec![entry(&entity, &remove)], false)[0].0, 0);
        assert_eq!(describe(&q, &[], false), Ok(vec![]));
        assert_eq!(q.applying(Quota::Produce, Client::anonymous("app")), None);
    }

    #[test]
    fn a_filter_matches_named_default_and_any_entities_strictly_or_not() {
        let q = ClientQuotas::default();
        let rate = [("consumer_byte_rate", Some(100.0))];
        let entities: [&[(&str, Option<&str>)]; 4] = [
            &[("user", Some("alice"))],
            &[("user", Some("alice")), ("client-id", Some("app"))],
            &[("user", None)],
            &[("client-id", None)],
        ];
        let entries = entities.iter().map(|e| entry(e, &rate)).collect();
        assert!(alter(&q, entries, false).iter().all(|(code, _)| *code == 0));
        let count = |filter: &[(&str, i8, Option<&str>)], strict| {
            describe(&q, filter, strict).map(|found| found.len())
        };
        // Exact (0), default (1), any name (2).
        assert_eq!(count(&[("user", 0, Some("alice"))], false), Ok(2));
        assert_eq!(count(&[("user", 0, Some("alice"))], true), Ok(1));
        assert_eq!(count(&[("user", 1, None)], false), Ok(1));
        assert_eq!(count(&[("user", 2, None)], false), Ok(3));
        assert_eq!(count(&[("client-id", 2, None)], true), Ok(1));
        assert_eq!(
            count(&[("user", 2, None), ("client-id", 0, Some("app"))], true),
            Ok(1)
        );
        // Refused filters.
        assert_eq!(count(&[("user", 0, None)], false), Err(INVALID));
        assert_eq!(count(&[("user", 1, Some("x"))], false), Err(INVALID));
        assert_eq!(
            count(&[("user", 2, None), ("user", 2, None)], false),
            Err(INVALID)
        );
        assert_eq!(
            count(&[("ip", 2, None), ("user", 2, None)], false),
            Err(INVALID)
        );
        assert_eq!(count(&[("user", 3, None)], false), Err(INVALID));
        assert_eq!(
            count(&[("group", 2, None)], false),
            Err(ResponseError::UnsupportedVersion.code())
        );
    }

    #[test]
    fn the_quota_that_applies_is_the_most_specific_set_in_kafkas_order() {
        let q = ClientQuotas::default();
        let set = |entity: &[(&str, Option<&str>)], value: f64| {
            let ops = [("producer_byte_rate", Some(value))];
            assert_eq!(alter(&q, vec![entry(entity, &ops)], false)[0].0, 0);
        };
        let applying = |client: &str| q.applying(Quota::Produce, Client::anonymous(client));
        let tags = |user: &str, client: &str| (user.to_string(), client.to_string());
        assert_eq!(applying("app"), None);
        set(&[("client-id", None)], 8.0);
        assert_eq!(applying("app"), Some((8.0, tags("", "app"))));
        set(&[("client-id", Some("app"))], 7.0);
        assert_eq!(applying("app"), Some((7.0, tags("", "app"))));
        set(&[("user", None)], 6.0);
        assert_eq!(applying("app"), Some((6.0, tags(ANONYMOUS, ""))));
        set(&[("user", None), ("client-id", None)], 5.0);
        assert_eq!(applying("app"), Some((5.0, tags(ANONYMOUS, "app"))));
        set(&[("user", Some(ANONYMOUS))], 3.0);
        assert_eq!(applying("app"), Some((3.0, tags(ANONYMOUS, ""))));
        set(
            &[("user", Some(ANONYMOUS)), ("client-id", Some("app"))],
            1.0,
        );
        assert_eq!(applying("app"), Some((1.0, tags(ANONYMOUS, "app"))));
        // Another client falls to the user's own quota; fetching has none.
        assert_eq!(applying("other"), Some((3.0, tags(ANONYMOUS, ""))));
        assert_eq!(q.applying(Quota::Fetch, Client::anonymous("app")), None);
        // An authenticated user is not ANONYMOUS: the default user's
        // quota with the default client is its own; then one of its own.
        let alice = Client {
            user: "alice",
            id: "app",
        };
        assert_eq!(
            q.applying(Quota::Produce, alice),
            Some((5.0, tags("alice", "app")))
        );
        set(&[("user", Some("alice"))], 2.0);
        assert_eq!(
            q.applying(Quota::Produce, alice),
            Some((2.0, tags("alice", "")))
        );
        assert_eq!(applying("app"), Some((1.0, tags(ANONYMOUS, "app"))));
    }

    #[test]
    fn an_address_has_its_own_connection_rate_or_the_default() {
        let q = ClientQuotas::default();
        let set = |name: Option<&str>, value: Option<f64>| {
            let ops = [("connection_creation_rate", value)];
            assert_eq!(alter(&q, vec![entry(&[("ip", name)], &ops)], false)[0].0, 0);
        };
        let ip = |a: &str| a.parse::<IpAddr>().unwrap();
        let measured = |a: &str| (a.to_string(), String::new());
        assert_eq!(q.connection_rate(ip("10.0.0.1")), None);
        set(None, Some(10.0));
        assert_eq!(
            q.connection_rate(ip("10.0.0.1")),
            Some((10.0, measured("10.0.0.1")))
        );
        // A host name is resolved when set.
        set(Some("localhost"), Some(2.0));
        let local = resolve("localhost").unwrap();
        assert_eq!(
            q.connection_rate(local),
            Some((2.0, measured(&local.to_string())))
        );
        set(Some("10.0.0.2"), Some(3.0));
        assert_eq!(q.connection_rate(ip("10.0.0.2")).unwrap().0, 3.0);
        // Kept at the address it was set at by the alterations after it.
        assert_eq!(q.connection_rate(local).unwrap().0, 2.0);
        assert_eq!(q.connection_rate(ip("10.0.0.3")).unwrap().0, 10.0);
        // Removed, the default applies again.
        set(Some("10.0.0.2"), None);
        assert_eq!(q.connection_rate(ip("10.0.0.2")).unwrap().0, 10.0);
        // Not a client's quota, nor an address's byte rate.
        assert_eq!(
            q.applying(Quota::Connections, Client::anonymous("app")),
            None
        );
        let refused = alter(
            &q,
            vec![entry(
                &[("ip", None)],
                &[("connection_creation_rate", Some(3e9))],
            )],
            false,
        );
        assert!(refused[0].1.contains("too large for an INT"), "{refused:?}");
    }
}
