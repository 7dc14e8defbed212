//! IncrementalAlterConfigs and AlterConfigs: a topic's own settings
//! changed by an admin client, for the topic configs this broker takes
//! (`topic_config`'s `APPLIED`, among them `cleanup.policy`, a list, and
//! its `INERT`, kept without effect). As in Kafka, a resource's
//! changes are checked together and made together or not at all, any
//! broker answers for a topic, and `validate_only` checks without changing.
//! The brokers' own settings are static here: refused, as Kafka refuses a
//! setting it cannot change while running.

use super::checks::Checks;
use super::configs::{BROKER, GROUP, TOPIC};
use super::groups::GROUP_CONFIGS;
use super::service::BrokerService;
use super::topic_config;
use super::topics::Topic;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::HashSet;
use std::sync::Arc;

/// IncrementalAlterConfigs' operations.
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// Why a resource's changes are refused: the error and its message.
type Refusal = (ResponseError, String);

/// What a change asks of one topic config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edit {
    /// This value.
    Set(i64),
    /// Back to the broker's.
    Reset,
    /// A list's values added to what it holds (the broker's, if the topic
    /// sets none).
    Append(i64),
    /// A list's values taken out of what it holds.
    Subtract(i64),
}

/// One topic config's change: its name and what is asked of it.
type Change = (String, Edit);

impl BrokerService {
    pub(crate) fn incremental_alter_configs(
        &self,
        r: IncrementalAlterConfigsRequest,
    ) -> IncrementalAlterConfigsResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = IncrementalAlterConfigsResponse::default();
        response.responses = r
            .resources
            .into_iter()
            .map(|resource| {
                let changes = resource
                    .configs
                    .iter()
                    .map(|c| (c.name.as_str(), c.config_operation, c.value.as_deref()));
                let (error_code, error_message) = self.alter(
                    resource.resource_type,
                    &resource.resource_name,
                    changes,
                    false,
                    r.validate_only,
                );
                let mut out =
                    incremental_alter_configs_response::AlterConfigsResourceResponse::default();
                out.error_code = error_code;
                out.error_message = error_message;
                out.resource_type = resource.resource_type;
                out.resource_name = resource.resource_name;
                out
            })
            .collect();
        response
    }

    /// The legacy form: the settings named replace all of the topic's own
    /// (those left out go back to the broker's).
    pub(crate) fn alter_configs(&self, r: AlterConfigsRequest) -> AlterConfigsResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = AlterConfigsResponse::default();
        response.responses = r
            .resources
            .into_iter()
            .map(|resource| {
                let changes = resource
                    .configs
                    .iter()
                    .map(|c| (c.name.as_str(), SET, c.value.as_deref()));
                let (error_code, error_message) = self.alter(
                    resource.resource_type,
                    &resource.resource_name,
                    changes,
                    true,
                    r.validate_only,
                );
                let mut out = alter_configs_response::AlterConfigsResourceResponse::default();
                out.error_code = error_code;
                out.error_message = error_message;
                out.resource_type = resource.resource_type;
                out.resource_name = resource.resource_name;
                out
            })
            .collect();
        response
    }

    /// Checks one resource's (name, operation, value) changes together and
    /// makes them (unless `validate_only`), the topic's other settings going
    /// back to the broker's if `replace_all`; the error code and message to
    /// answer with.
    fn alter<'a>(
        &self,
        resource_type: i8,
        name: &str,
        changes: impl Iterator<Item = (&'a str, i8, Option<&'a str>)>,
        replace_all: bool,
        validate_only: bool,
    ) -> (i16, Option<StrBytes>) {
        if resource_type == GROUP {
            return match self.alter_group(name, changes, replace_all, validate_only) {
                Ok(()) => (0, None),
                Err((error, message)) => (error.code(), Some(StrBytes::from_string(message))),
            };
        }
        let checked = self
            .topic_to_alter(resource_type, name)
            .and_then(|topic| Ok((topic, incremental_changes(changes)?)));
        let checked = checked.and_then(|(topic, changes)| {
            let values = new_values(&topic, changes)?;
            Ok((topic, values))
        });
        let (topic, changes) = match checked {
            Ok(checked) => checked,
            Err((error, message)) => return (error.code(), Some(StrBytes::from_string(message))),
        };
        if validate_only {
            return (0, None);
        }
        if replace_all {
            for name in topic_config::taken_names() {
                if !changes.iter().any(|(n, _)| n == name) {
                    topic.config.set(name, None);
                }
            }
        }
        for (name, value) in changes {
            topic.config.set(&name, value);
        }
        (0, None)
    }

    /// [`alter`](Self::alter) for a group's settings: set or deleted (a
    /// list's append or subtract is refused), all or none.
    fn alter_group<'a>(
        &self,
        group: &str,
        changes: impl Iterator<Item = (&'a str, i8, Option<&'a str>)>,
        replace_all: bool,
        validate_only: bool,
    ) -> Result<(), Refusal> {
        let mut edits: Vec<(String, Option<String>)> = Vec::new();
        for (name, op, value) in changes {
            let value = match op {
                SET => value.map(str::to_string),
                DELETE => None,
                _ => {
                    let message = format!("{name} is not a list: it can only be set or deleted.");
                    return Err((ResponseError::InvalidConfig, message));
                }
            };
            edits.push((name.to_string(), value));
        }
        if replace_all {
            for (name, _) in GROUP_CONFIGS {
                if !edits.iter().any(|(n, _)| n == name) {
                    edits.push((name.to_string(), None));
                }
            }
        }
        let groups = &self.cluster.groups;
        groups.check_configs(&edits)?;
        if !validate_only {
            groups.alter_configs(group, &edits)?;
        }
        Ok(())
    }

    /// The topic a resource names, or why it cannot be altered here.
    fn topic_to_alter(&self, resource_type: i8, name: &str) -> Result<Arc<Topic>, Refusal> {
        match resource_type {
            TOPIC => self.cluster.topic(name).ok_or_else(|| {
                (
                    ResponseError::UnknownTopicOrPartition,
                    format!("Topic '{name}' does not exist."),
                )
            }),
            BROKER => Err((
                ResponseError::InvalidRequest,
                "A broker's settings are static here and cannot change while it runs.".into(),
            )),
            other => Err((
                ResponseError::InvalidRequest,
                format!("Resource type {other} has no settings this broker can change."),
            )),
        }
    }
}

/// The value each change leaves its config with (`None`: the broker's),
/// a list's appends and subtractions made against what `topic` holds now;
/// or why one of them cannot be made.
fn new_values(topic: &Topic, changes: Vec<Change>) -> Result<Vec<(String, Option<i64>)>, Refusal> {
    changes
        .into_iter()
        .map(|(name, edit)| {
            let value = match edit {
                Edit::Set(v) => Some(v),
                Edit::Reset => None,
                Edit::Append(v) => Some(topic_config::combine(&topic.config, &name, v, true)?),
                Edit::Subtract(v) => Some(topic_config::combine(&topic.config, &name, v, false)?),
            };
            Ok((name, value))
        })
        .collect::<Result<_, String>>()
        .map_err(|why| (ResponseError::InvalidConfig, why))
}

/// A resource's (name, operation, value) changes, checked together: each
/// name at most once, a topic config this broker takes, a valid value
/// to set; appending to or subtracting from a setting that is not a list
/// is refused, as Kafka refuses it.
fn incremental_changes<'a>(
    changes: impl Iterator<Item = (&'a str, i8, Option<&'a str>)>,
) -> Result<Vec<Change>, Refusal> {
    let invalid_config = |why: String| (ResponseError::InvalidConfig, why);
    let mut named = HashSet::new();
    let mut checked = Vec::new();
    for (name, operation, value) in changes {
        if !named.insert(name) {
            return Err((
                ResponseError::InvalidRequest,
                format!("'{name}' is named more than once."),
            ));
        }
        let parsed = || topic_config::parse(name, value).map_err(invalid_config);
        let edit = match operation {
            SET => Edit::Set(parsed()?),
            DELETE => {
                topic_config::taken(name).map_err(invalid_config)?;
                Edit::Reset
            }
            APPEND if topic_config::is_list(name) => Edit::Append(parsed()?),
            SUBTRACT if topic_config::is_list(name) => Edit::Subtract(parsed()?),
            APPEND | SUBTRACT => {
                return Err(invalid_config(format!(
                    "'{name}' is not a list: it can be set or deleted, not appended to or subtracted from."
                )))
            }
            other => {
                return Err((
                    ResponseError::InvalidRequest,
                    format!("{other} is not an operation (0 set, 1 delete, 2 append, 3 subtract)."),
                ))
            }
        };
        checked.push((name.to_string(), edit));
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_checked_together() {
        let ok = [
            ("min.insync.replicas", SET, Some("3")),
            ("max.message.bytes", DELETE, None),
        ];
        assert_eq!(
            incremental_changes(ok.into_iter()).unwrap(),
            [
                ("min.insync.replicas".to_string(), Edit::Set(3)),
                ("max.message.bytes".to_string(), Edit::Reset)
            ]
        );
        let refused = |changes: &[(&'static str, i8, Option<&'static str>)]| {
            incremental_changes(changes.iter().copied()).unwrap_err().0
        };
        let twice = [
            ("min.insync.replicas", SET, Some("3")),
            ("min.insync.replicas", DELETE, None),
        ];
        assert_eq!(refused(&twice), ResponseError::InvalidRequest);
        assert_eq!(
            refused(&[("min.insync.replicas", APPEND, Some("3"))]),
            ResponseError::InvalidConfig
        );
        assert_eq!(
            refused(&[("remote.storage.enable", DELETE, None)]),
            ResponseError::InvalidConfig
        );
        assert_eq!(
            refused(&[("min.insync.replicas", SET, Some("zero"))]),
            ResponseError::InvalidConfig
        );
        assert_eq!(
            refused(&[("min.insync.replicas", 9, Some("1"))]),
            ResponseError::InvalidRequest
        );
    }
}
