//! The admin APIs: topics, configs, ACLs, quotas, credentials,
//! reassignments, elections, log dirs, features and the cluster's
//! description.

use super::*;

/// AlterConfigs and IncrementalAlterConfigs (`$kind`): each resource the
/// principal may not alter is taken out and answered with its error.
macro_rules! configs_altered {
    ($a:ident, $r:ident, $kind:ident, $result:ty) => {{
        let denied = refused(&mut $r.resources, |c| {
            config_resource(&$a, code::ALTER_CONFIGS, c.resource_type, &c.resource_name).is_ok()
        });
        amend!($kind, |response| {
            response.responses.extend(denied.into_iter().map(|c| {
                let mut out = <$result>::default();
                out.error_message = None;
                let checked =
                    config_resource(&$a, code::ALTER_CONFIGS, c.resource_type, &c.resource_name);
                out.error_code = checked.err().map_or(0, error);
                out.resource_type = c.resource_type;
                out.resource_name = c.resource_name;
                out
            }))
        })
    }};
}

/// Topics, configs, ACLs, quotas, credentials, reassignments, elections,
/// log dirs, features and the cluster's description.
pub(super) fn admin(asker: &Asker, request: &mut RequestKind) -> Option<Gate> {
    let a = asker.clone();
    Some(match request {
        RequestKind::CreateTopics(r) => {
            let creates_any = a.cluster(code::CREATE);
            let denied = refused(&mut r.topics, |t| {
                creates_any || a.topic(code::CREATE, &t.name)
            });
            amend!(CreateTopics, |response| {
                for t in &mut response.topics {
                    if t.error_code == 0 && !a.topic(code::DESCRIBE_CONFIGS, &t.name) {
                        t.topic_config_error_code = error(TOPIC_DENIED);
                        t.configs = None;
                        t.num_partitions = -1;
                        t.replication_factor = -1;
                    }
                }
                response.topics.extend(denied.into_iter().map(|t| {
                    let mut out = create_topics_response::CreatableTopicResult::default();
                    out.error_message = None;
                    out.name = t.name;
                    out.error_code = error(TOPIC_DENIED);
                    out.num_partitions = -1;
                    out.replication_factor = -1;
                    out
                }))
            })
        }
        RequestKind::CreatePartitions(r) => {
            let denied = refused(&mut r.topics, |t| a.topic(code::ALTER, &t.name));
            amend!(CreatePartitions, |response| {
                response.results.extend(denied.into_iter().map(|t| {
                    let mut out =
                        create_partitions_response::CreatePartitionsTopicResult::default();
                    out.name = t.name;
                    out.error_code = error(TOPIC_DENIED);
                    out.error_message = Some(s("The topic authorization is failed."));
                    out
                }))
            })
        }
        RequestKind::DeleteTopics(r) => {
            // DESCRIBE as well as DELETE, so that a topic's existence is not
            // told to whoever may not see it.
            let allowed = |name: &str| a.topic(code::DESCRIBE, name) && a.topic(code::DELETE, name);
            let by_name = refused(&mut r.topic_names, |n| allowed(n));
            let by_state = refused(&mut r.topics, |t| {
                let name = t.name.as_deref().map(|n| n.to_string()).unwrap_or_default();
                a.topic_name(&name, t.topic_id).is_none_or(|n| allowed(&n))
            });
            amend!(DeleteTopics, |response| {
                let refusal = |name: Option<TopicName>, id: Uuid| {
                    let mut out = delete_topics_response::DeletableTopicResult::default();
                    out.name = name;
                    out.topic_id = id;
                    out.error_code = error(TOPIC_DENIED);
                    out
                };
                (response.responses)
                    .extend(by_name.into_iter().map(|n| refusal(Some(n), Uuid::nil())));
                (response.responses)
                    .extend(by_state.into_iter().map(|t| refusal(t.name, t.topic_id)));
            })
        }
        RequestKind::DeleteRecords(r) => {
            let denied = refused(&mut r.topics, |t| a.topic(code::DELETE, &t.name));
            amend!(DeleteRecords, |response| {
                response.topics.extend(topics_refused!(
                    denied,
                    delete_records_response::DeleteRecordsTopicResult,
                    delete_records_response::DeleteRecordsPartitionResult,
                    TOPIC_DENIED,
                    low_watermark = -1
                ))
            })
        }
        RequestKind::DescribeConfigs(_) => amend!(DescribeConfigs, |response| {
            for result in &mut response.results {
                if let Err(e) = config_resource(
                    &a,
                    code::DESCRIBE_CONFIGS,
                    result.resource_type,
                    &result.resource_name,
                ) {
                    result.error_code = error(e);
                    result.error_message = None;
                    result.configs.clear();
                }
            }
        }),
        RequestKind::AlterConfigs(r) => configs_altered!(
            a,
            r,
            AlterConfigs,
            alter_configs_response::AlterConfigsResourceResponse
        ),
        RequestKind::IncrementalAlterConfigs(r) => configs_altered!(
            a,
            r,
            IncrementalAlterConfigs,
            incremental_alter_configs_response::AlterConfigsResourceResponse
        ),
        RequestKind::DescribeAcls(_) if !a.cluster(code::DESCRIBE) => {
            let mut response = DescribeAclsResponse::default();
            response.error_message = None;
            response.error_code = error(CLUSTER_DENIED);
            refuse(ResponseKind::DescribeAcls(response))
        }
        RequestKind::CreateAcls(r) if !a.cluster(code::ALTER) => {
            let mut response = CreateAclsResponse::default();
            response.results = (r.creations.iter())
                .map(|_| {
                    let mut out = create_acls_response::AclCreationResult::default();
                    out.error_message = None;
                    out.error_code = error(CLUSTER_DENIED);
                    out
                })
                .collect();
            refuse(ResponseKind::CreateAcls(response))
        }
        RequestKind::DeleteAcls(r) if !a.cluster(code::ALTER) => {
            let mut response = DeleteAclsResponse::default();
            response.filter_results = (r.filters.iter())
                .map(|_| {
                    let mut out = delete_acls_response::DeleteAclsFilterResult::default();
                    out.error_message = None;
                    out.error_code = error(CLUSTER_DENIED);
                    out
                })
                .collect();
            refuse(ResponseKind::DeleteAcls(response))
        }
        RequestKind::DescribeCluster(_) => amend!(DescribeCluster, |response| {
            response.cluster_authorized_operations =
                a.cluster_operations_if_asked(response.cluster_authorized_operations);
        }),
        RequestKind::DescribeUserScramCredentials(_) if !a.cluster(code::DESCRIBE) => {
            let mut response = DescribeUserScramCredentialsResponse::default();
            response.error_message = None;
            response.error_code = error(CLUSTER_DENIED);
            refuse(ResponseKind::DescribeUserScramCredentials(response))
        }
        RequestKind::AlterUserScramCredentials(r) if !a.cluster(code::ALTER) => {
            let users = (r.deletions.iter().map(|d| d.name.clone()))
                .chain(r.upsertions.iter().map(|u| u.name.clone()));
            let mut response = AlterUserScramCredentialsResponse::default();
            response.results = users
                .map(|user| {
                    let mut out =
                        alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default();
                    out.error_message = None;
                    out.user = user;
                    out.error_code = error(CLUSTER_DENIED);
                    out
                })
                .collect();
            refuse(ResponseKind::AlterUserScramCredentials(response))
        }
        RequestKind::DescribeClientQuotas(_) if !a.cluster(code::DESCRIBE_CONFIGS) => {
            let mut response = DescribeClientQuotasResponse::default();
            response.error_message = None;
            response.error_code = error(CLUSTER_DENIED);
            refuse(ResponseKind::DescribeClientQuotas(response))
        }
        RequestKind::AlterClientQuotas(r) if !a.cluster(code::ALTER_CONFIGS) => {
            let mut response = AlterClientQuotasResponse::default();
            response.entries = (r.entries.iter())
                .map(|e| {
                    let mut out = alter_client_quotas_response::EntryData::default();
                    out.error_message = None;
                    out.error_code = error(CLUSTER_DENIED);
                    out.entity = (e.entity.iter())
                        .map(|entity| {
                            let mut out = alter_client_quotas_response::EntityData::default();
                            out.entity_type = entity.entity_type.clone();
                            out.entity_name = entity.entity_name.clone();
                            out
                        })
                        .collect();
                    out
                })
                .collect();
            refuse(ResponseKind::AlterClientQuotas(response))
        }
        RequestKind::ListConfigResources(_) if !a.cluster(code::DESCRIBE_CONFIGS) => {
            let mut response = ListConfigResourcesResponse::default();
            response.error_code = error(CLUSTER_DENIED);
            refuse(ResponseKind::ListConfigResources(response))
        }
        // Kafka's controller answers the error alone, with no result per
        // feature.
        RequestKind::UpdateFeatures(_) if !a.cluster(code::ALTER) => {
            let mut response = UpdateFeaturesResponse::default();
            response.error_message = None;
            response.error_code = error(CLUSTER_DENIED);
            refuse(ResponseKind::UpdateFeatures(response))
        }
        RequestKind::ElectLeaders(r) if !a.cluster(code::ALTER) => {
            let mut response = ElectLeadersResponse::default();
            response.error_code = error(CLUSTER_DENIED);
            response.replica_election_results = (r.topic_partitions.iter().flatten())
                .map(|t| {
                    let mut topic = elect_leaders_response::ReplicaElectionResult::default();
                    topic.topic = t.topic.clone();
                    topic.partition_result = (t.partitions.iter())
                        .map(|&p| {
                            let mut out = elect_leaders_response::PartitionResult::default();
                            out.error_message = None;
                            out.partition_id = p;
                            out.error_code = error(CLUSTER_DENIED);
                            out
                        })
                        .collect();
                    topic
                })
                .collect();
            refuse(ResponseKind::ElectLeaders(response))
        }
        RequestKind::AlterPartitionReassignments(_) if !a.cluster(code::ALTER) => {
            let mut response = AlterPartitionReassignmentsResponse::default();
            response.error_message = None;
            response.error_code = error(CLUSTER_DENIED);
            refuse(ResponseKind::AlterPartitionReassignments(response))
        }
        RequestKind::ListPartitionReassignments(_) if !a.cluster(code::DESCRIBE) => {
            let mut response = ListPartitionReassignmentsResponse::default();
            response.error_message = None;
            response.error_code = error(CLUSTER_DENIED);
            refuse(ResponseKind::ListPartitionReassignments(response))
        }
        RequestKind::DescribeLogDirs(_) if !a.cluster(code::DESCRIBE) => {
            let mut response = DescribeLogDirsResponse::default();
            response.error_code = error(CLUSTER_DENIED);
            refuse(ResponseKind::DescribeLogDirs(response))
        }
        _ => return None,
    })
}

/// Whether a config resource (DescribeConfigs' codes: 2 a topic, 4 a
/// broker, 8 a broker's loggers, 16 client metrics, 32 a group) may be
/// described or altered; the error for it if not.
fn config_resource(
    a: &Asker,
    operation: i8,
    resource_type: i8,
    name: &str,
) -> Result<(), ResponseError> {
    let (allowed, e) = match resource_type {
        2 => (a.topic(operation, name), TOPIC_DENIED),
        32 => (a.group(operation, name), GROUP_DENIED),
        _ => (a.cluster(operation), CLUSTER_DENIED),
    };
    if allowed {
        Ok(())
    } else {
        Err(e)
    }
}
