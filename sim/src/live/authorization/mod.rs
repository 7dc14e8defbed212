//! Every request checked against the ACLs (`--authorizer`), with the
//! operations and the errors Kafka's brokers use for each API
//! (`KafkaApis`):
//!
//! - a request that names one resource it may not touch (a group it may
//!   not join, a transactional id it may not write) is refused whole,
//!   before it reaches its handler, with that resource's error;
//! - a request over several topics or groups is handed on with only
//!   those it may touch, and the others are added to the response, each
//!   with its own error, as Kafka answers them;
//! - a request that lists what exists (all topics, all groups, all
//!   transactions) lists only what the principal may describe;
//! - the "authorized operations" fields say what the principal may do.
//!
//! Without an authorizer nothing here runs: every client may do
//! everything.
//!
//! This file holds what every check shares (the asker, the gate, the
//! shapes of a refusal); the checks themselves are split by kind of API:
//! [`data`](mod@data) (produce, fetch, metadata, offsets by time),
//! [`groups`](mod@groups),
//! [`transactions`](mod@transactions) and [`admin`](mod@admin).

use super::authorizer::{code, Authorizer, Requester, CLUSTER_NAME};
use super::service::BrokerService;
use super::LiveCluster;
use crate::wire::Principal;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;
use uuid::Uuid;

/// What the check of a request decided.
pub(crate) enum Gate {
    /// Answered here: the handler never sees it.
    Refuse(Box<ResponseKind>),
    /// Handed on (maybe with parts taken out), and its response amended
    /// by the function, if any, once the handler has answered.
    Pass(Option<Amend>),
}

fn refuse(response: ResponseKind) -> Gate {
    Gate::Refuse(Box::new(response))
}

/// A change to a response: the refused parts put back, or what may not
/// be described taken out.
pub(crate) type Amend = Box<dyn FnOnce(&mut ResponseKind) + Send>;

const TOPIC_DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;
const GROUP_DENIED: ResponseError = ResponseError::GroupAuthorizationFailed;
const CLUSTER_DENIED: ResponseError = ResponseError::ClusterAuthorizationFailed;
const TXN_DENIED: ResponseError = ResponseError::TransactionalIdAuthorizationFailed;

/// The principal asking, and the cluster whose ACLs decide: cloned into
/// the amendments that check the response. (Made only where the cluster
/// has an authorizer; were it to have none, everything would be allowed.)
#[derive(Clone)]
struct Asker {
    cluster: Arc<LiveCluster>,
    who: Requester,
}

impl Asker {
    fn authorizer(&self) -> Option<&Authorizer> {
        self.cluster.authorizer.as_ref()
    }

    fn may(&self, operation: i8, resource_type: i8, name: &str) -> bool {
        (self.authorizer()).is_none_or(|z| z.authorize(&self.who, operation, resource_type, name))
    }

    /// Kafka's `authorizeByResourceType`: `operation` on some resource of
    /// the type.
    fn may_on_some(&self, operation: i8, resource_type: i8) -> bool {
        (self.authorizer()).is_none_or(|z| z.authorize_any(&self.who, operation, resource_type))
    }

    /// The bits of what it may do on a resource.
    fn operations(&self, resource_type: i8, name: &str) -> i32 {
        (self.authorizer()).map_or(i32::MIN, |z| z.operations(&self.who, resource_type, name))
    }

    fn topic(&self, operation: i8, name: &str) -> bool {
        self.may(operation, code::TOPIC, name)
    }

    fn group(&self, operation: i8, name: &str) -> bool {
        self.may(operation, code::GROUP, name)
    }

    fn txn(&self, operation: i8, id: &str) -> bool {
        self.may(operation, code::TRANSACTIONAL_ID, id)
    }

    fn cluster(&self, operation: i8) -> bool {
        self.may(operation, code::CLUSTER, CLUSTER_NAME)
    }

    /// The bits of what it may do on a resource, where the request asked
    /// (Kafka's schemas' default, `i32::MIN`, where it did not).
    fn operations_if_asked(&self, asked: i32, resource_type: i8, name: &str) -> i32 {
        if asked == i32::MIN {
            asked
        } else {
            self.operations(resource_type, name)
        }
    }

    /// The cluster's authorized operations, where asked: none at all
    /// without DESCRIBE on it, as Kafka answers.
    fn cluster_operations_if_asked(&self, asked: i32) -> i32 {
        match asked {
            i32::MIN => asked,
            _ if !self.cluster(code::DESCRIBE) => 0,
            _ => self.operations(code::CLUSTER, CLUSTER_NAME),
        }
    }

    /// The name a topic is asked by: its name, or (by id) the name of the
    /// topic with that id. `None` for an id no topic has: the handler
    /// answers that one as unknown, which tells nothing of any topic.
    fn topic_name(&self, name: &str, id: Uuid) -> Option<String> {
        if !name.is_empty() {
            return Some(name.to_string());
        }
        (self.cluster.topic_by_id(id)).map(|t| t.name.to_string())
    }

    /// Whether the topic asked by `name` or `id` may be touched by
    /// `operation` (an unknown id may: see `topic_name`).
    fn topic_by(&self, operation: i8, name: &str, id: Uuid) -> bool {
        self.topic_name(name, id)
            .is_none_or(|name| self.topic(operation, &name))
    }
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

fn error(e: ResponseError) -> i16 {
    e.code()
}

/// Takes out of `items` those `allowed` refuses, and returns them.
fn refused<T>(items: &mut Vec<T>, allowed: impl Fn(&T) -> bool) -> Vec<T> {
    items.extract_if(.., |item| !allowed(item)).collect()
}

/// An amendment from a function of the response of one kind: `$kind` is
/// the `ResponseKind` variant.
macro_rules! amend {
    ($kind:ident, |$response:ident| $body:expr) => {
        Gate::Pass(Some(Box::new(move |response: &mut ResponseKind| {
            if let ResponseKind::$kind($response) = response {
                $body
            }
        })))
    };
}

/// The topics of `$denied` (a request's, each with a `name` and its
/// `partitions`, each with a `partition_index`) as a response's `$topic`s,
/// every partition answered `$e`, with `$field`s set as well.
macro_rules! topics_refused {
    ($denied:expr, $topic:ty, $partition:ty, $e:expr $(, $field:ident = $value:expr)*) => {
        ($denied.into_iter())
            .map(|t| {
                let mut topic = <$topic>::default();
                topic.name = t.name;
                topic.partitions = (t.partitions.iter())
                    .map(|p| {
                        let mut out = <$partition>::default();
                        out.partition_index = p.partition_index;
                        out.error_code = error($e);
                        $(out.$field = $value;)*
                        out
                    })
                    .collect();
                topic
            })
            .collect::<Vec<_>>()
    };
}

// After the macros above, which the files below use.
mod admin;
mod data;
mod groups;
mod transactions;

use admin::admin;
use data::data_plane;
use groups::groups;
use transactions::transactions;

impl BrokerService {
    /// Checks `request` from `principal`, as described in the module
    /// docs; everything passes without an authorizer.
    pub(crate) fn gate(
        &self,
        principal: &Principal,
        version: i16,
        request: &mut RequestKind,
    ) -> Gate {
        if self.cluster.authorizer.is_none() {
            return Gate::Pass(None);
        }
        let asker = Asker {
            cluster: Arc::clone(&self.cluster),
            who: Requester {
                principal: format!("User:{}", principal.name()),
                host: principal.host_address().unwrap_or_else(|| "*".to_string()),
            },
        };
        data_plane(&asker, version, request)
            .or_else(|| groups(&asker, version, request))
            .or_else(|| transactions(&asker, request))
            .or_else(|| admin(&asker, request))
            .unwrap_or(Gate::Pass(None))
    }
}
