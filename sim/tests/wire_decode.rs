//! Random bytes fed to the request decoding path: it answers with a
//! request or a typed refusal, never a panic, whatever the frame holds.

use broker_sim::live::APIS;
use broker_sim::wire::{decode_request, BadRequest};
use bytes::Bytes;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn random_frames_decode_or_are_refused(frame in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_request(Bytes::from(frame), &APIS);
    }

    /// A valid header for an implemented API and version, then random
    /// bytes: the body decoders are reached, not just the key check.
    #[test]
    fn random_bodies_after_a_valid_header_decode_or_are_refused(
        api in 0usize..17,
        version in 0i16..13,
        body in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let key: i16 = [0, 1, 2, 3, 18, 8, 9, 10, 11, 12, 13, 14, 15, 16, 19, 20, 22][api];
        let mut frame = Vec::new();
        frame.extend_from_slice(&key.to_be_bytes());
        frame.extend_from_slice(&version.to_be_bytes());
        frame.extend_from_slice(&7i32.to_be_bytes());
        frame.extend_from_slice(&body);
        match decode_request(Bytes::from(frame), &APIS) {
            Ok((header, _)) => prop_assert_eq!(header.correlation_id, 7),
            Err(BadRequest::UnsupportedVersion { correlation_id, .. }) => prop_assert_eq!(correlation_id, 7),
            Err(_) => {}
        }
    }
}

/// A refusal says in words what is served instead: the log line a user of
/// an old client reads when its connection is closed.
#[test]
fn a_refused_version_names_the_versions_served() {
    let header = |key: i16, version: i16| {
        let mut frame = Vec::new();
        frame.extend_from_slice(&key.to_be_bytes());
        frame.extend_from_slice(&version.to_be_bytes());
        frame.extend_from_slice(&7i32.to_be_bytes());
        Bytes::from(frame)
    };
    let said = |frame| decode_request(frame, &APIS).unwrap_err().to_string();
    // OffsetCommit v1, as sarama 1.22 sends it with no retention set.
    assert_eq!(
        said(header(8, 1)),
        "OffsetCommit v1 is not served (v2-9 are)"
    );
    // DescribeQuorum (55), which Kafka defines and the front does not
    // serve (it has no metadata quorum to describe).
    assert_eq!(said(header(55, 0)), "DescribeQuorum is not served");
    assert_eq!(said(header(999, 0)), "API key 999 is unknown");
}

mod well_formed {
    use broker_sim::live::APIS;
    use broker_sim::wire::decode_request;
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions as ConsumerGroupHeartbeatTopicPartitions;
    use kafka_protocol::messages::create_acls_request::AclCreation;
    use kafka_protocol::messages::create_partitions_request::{
        CreatePartitionsAssignment, CreatePartitionsTopic,
    };
    use kafka_protocol::messages::create_topics_request::{
        CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
    };
    use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    use kafka_protocol::messages::leave_group_request::MemberIdentity;
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::offset_delete_request::{
        OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    };
    use kafka_protocol::messages::offset_fetch_request::{
        OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
    };
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{
        AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AlterConfigsRequest,
        AlterPartitionReassignmentsRequest, AlterUserScramCredentialsRequest, ApiKey, BrokerId,
        ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, CreateAclsRequest,
        CreatePartitionsRequest, CreateTopicsRequest, DeleteAclsRequest, DeleteGroupsRequest,
        DeleteRecordsRequest, DeleteTopicsRequest, DescribeAclsRequest, DescribeClusterRequest,
        DescribeConfigsRequest, DescribeGroupsRequest, DescribeLogDirsRequest,
        DescribeProducersRequest, DescribeTopicPartitionsRequest, DescribeTransactionsRequest,
        DescribeUserScramCredentialsRequest, ElectLeadersRequest, EndTxnRequest, FetchRequest,
        FindCoordinatorRequest, GroupId, HeartbeatRequest, IncrementalAlterConfigsRequest,
        InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest, ListConfigResourcesRequest,
        ListGroupsRequest, ListOffsetsRequest, ListPartitionReassignmentsRequest,
        ListTransactionsRequest, MetadataRequest, OffsetCommitRequest, OffsetDeleteRequest,
        OffsetFetchRequest, OffsetForLeaderEpochRequest, ProduceRequest, ProducerId, RequestHeader,
        ShareAcknowledgeRequest, ShareFetchRequest, ShareGroupDescribeRequest,
        ShareGroupHeartbeatRequest, SyncGroupRequest, TopicName, TransactionalId,
        TxnOffsetCommitRequest,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn frame<R: Encodable>(api: ApiKey, version: i16, request: &R) -> Bytes {
        let mut header = RequestHeader::default();
        header.request_api_key = api as i16;
        header.request_api_version = version;
        header.correlation_id = 5;
        header.client_id = Some(StrBytes::from_static_str("t"));
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, api.request_header_version(version))
            .unwrap();
        request.encode(&mut buf, version).unwrap();
        buf.freeze()
    }

    fn txn_id() -> TransactionalId {
        TransactionalId(StrBytes::from_static_str("tx"))
    }

    fn group() -> GroupId {
        GroupId(StrBytes::from_static_str("readers"))
    }

    fn name(s: &str) -> TopicName {
        TopicName(StrBytes::from_string(s.to_string()))
    }

    /// A topic id made from a name, for requests that name topics by id.
    fn id(s: &str) -> uuid::Uuid {
        let mut bytes = [7u8; 16];
        for (b, c) in bytes.iter_mut().zip(s.bytes()) {
            *b = c;
        }
        uuid::Uuid::from_bytes(bytes)
    }

    /// Requests with two topics of two partitions each, and every field a
    /// version may carry set, in every implemented version, pass the bound
    /// check and decode.
    #[test]
    fn every_implemented_version_of_a_full_request_decodes() {
        for &(api, lo, hi) in &APIS {
            for version in lo..=hi {
                let bytes = match api {
                    ApiKey::Produce => {
                        let mut r = ProduceRequest::default();
                        r.acks = -1;
                        r.transactional_id = None;
                        r.topic_data = ["a", "bb"]
                            .iter()
                            .map(|t| {
                                let mut td = TopicProduceData::default();
                                if version >= 13 {
                                    td.topic_id = id(t);
                                } else {
                                    td.name = name(t);
                                }
                                td.partition_data = (0..2)
                                    .map(|i| {
                                        let mut p = PartitionProduceData::default();
                                        p.index = i;
                                        p.records = Some(Bytes::from_static(b"0123456789"));
                                        p
                                    })
                                    .collect();
                                td
                            })
                            .collect();
                        frame(api, version, &r)
                    }
                    ApiKey::Fetch => {
                        let mut r = FetchRequest::default();
                        r.topics = ["a", "bb"]
                            .iter()
                            .map(|t| {
                                let mut ft = FetchTopic::default();
                                if version >= 13 {
                                    ft.topic_id = id(t);
                                } else {
                                    ft.topic = name(t);
                                }
                                ft.partitions = (0..2)
                                    .map(|i| {
                                        let mut p = FetchPartition::default();
                                        p.partition = i;
                                        p.fetch_offset = 3;
                                        p
                                    })
                                    .collect();
                                ft
                            })
                            .collect();
                        if version >= 7 {
                            let mut f = ForgottenTopic::default();
                            if version >= 13 {
                                f.topic_id = id("gone");
                            } else {
                                f.topic = name("gone");
                            }
                            f.partitions = vec![1, 2];
                            r.forgotten_topics_data = vec![f];
                        }
                        if version >= 11 {
                            r.rack_id = StrBytes::from_static_str("rack-1");
                        }
                        frame(api, version, &r)
                    }
                    ApiKey::ListOffsets => {
                        let mut r = ListOffsetsRequest::default();
                        r.topics = ["a", "bb"]
                            .iter()
                            .map(|t| {
                                let mut lt = ListOffsetsTopic::default();
                                lt.name = name(t);
                                lt.partitions = (0..2)
                                    .map(|i| {
                                        let mut p = ListOffsetsPartition::default();
                                        p.partition_index = i;
                                        p.timestamp = -1;
                                        p
                                    })
                                    .collect();
                                lt
                            })
                            .collect();
                        if version >= 10 {
                            r.timeout_ms = 5_000;
                        }
                        frame(api, version, &r)
                    }
                    ApiKey::Metadata => {
                        let mut r = MetadataRequest::default();
                        r.topics = Some(
                            ["a", "bb"]
                                .iter()
                                .map(|t| {
                                    let mut mt = MetadataRequestTopic::default();
                                    mt.name = Some(name(t));
                                    if version >= 10 {
                                        mt.topic_id = id(t);
                                    }
                                    mt
                                })
                                .collect(),
                        );
                        frame(api, version, &r)
                    }
                    ApiKey::FindCoordinator => {
                        let mut r = FindCoordinatorRequest::default();
                        if version >= 4 {
                            r.coordinator_keys = vec![
                                StrBytes::from_static_str("readers"),
                                StrBytes::from_static_str("writers"),
                            ];
                        } else {
                            r.key = StrBytes::from_static_str("readers");
                        }
                        frame(api, version, &r)
                    }
                    ApiKey::JoinGroup => {
                        let mut r = JoinGroupRequest::default();
                        r.group_id = group();
                        r.member_id = StrBytes::from_static_str("m-1");
                        r.protocol_type = StrBytes::from_static_str("consumer");
                        if version >= 5 {
                            r.group_instance_id = Some(StrBytes::from_static_str("i-1"));
                        }
                        if version >= 8 {
                            r.reason = Some(StrBytes::from_static_str("a new subscription"));
                        }
                        r.protocols = ["range", "roundrobin"]
                            .iter()
                            .map(|n| {
                                let mut p = JoinGroupRequestProtocol::default();
                                p.name = StrBytes::from_static_str(n);
                                p.metadata = Bytes::from_static(b"meta");
                                p
                            })
                            .collect();
                        frame(api, version, &r)
                    }
                    ApiKey::SyncGroup => {
                        let mut r = SyncGroupRequest::default();
                        r.group_id = group();
                        r.member_id = StrBytes::from_static_str("m-1");
                        if version >= 3 {
                            r.group_instance_id = Some(StrBytes::from_static_str("i-1"));
                        }
                        if version >= 5 {
                            r.protocol_type = Some(StrBytes::from_static_str("consumer"));
                            r.protocol_name = Some(StrBytes::from_static_str("range"));
                        }
                        r.assignments = ["m-1", "m-2"]
                            .iter()
                            .map(|m| {
                                let mut a = SyncGroupRequestAssignment::default();
                                a.member_id = StrBytes::from_static_str(m);
                                a.assignment = Bytes::from_static(b"assigned");
                                a
                            })
                            .collect();
                        frame(api, version, &r)
                    }
                    ApiKey::Heartbeat => {
                        let mut r = HeartbeatRequest::default();
                        r.group_id = group();
                        r.member_id = StrBytes::from_static_str("m-1");
                        frame(api, version, &r)
                    }
                    ApiKey::LeaveGroup => {
                        let mut r = LeaveGroupRequest::default();
                        r.group_id = group();
                        if version <= 2 {
                            r.member_id = StrBytes::from_static_str("m-1");
                        } else {
                            r.members = ["m-1", "m-2"]
                                .iter()
                                .map(|m| {
                                    let mut i = MemberIdentity::default();
                                    i.member_id = StrBytes::from_static_str(m);
                                    i.group_instance_id = Some(StrBytes::from_static_str("i"));
                                    if version >= 5 {
                                        i.reason = Some(StrBytes::from_static_str("closing"));
                                    }
                                    i
                                })
                                .collect();
                        }
                        frame(api, version, &r)
                    }
                    ApiKey::OffsetCommit => {
                        let mut r = OffsetCommitRequest::default();
                        r.group_id = group();
                        r.member_id = StrBytes::from_static_str("m-1");
                        if version >= 7 {
                            r.group_instance_id = Some(StrBytes::from_static_str("i-1"));
                        }
                        r.topics = ["a", "bb"]
                            .iter()
                            .map(|t| {
                                let mut ot = OffsetCommitRequestTopic::default();
                                ot.name = name(t);
                                ot.partitions = (0..2)
                                    .map(|i| {
                                        let mut p = OffsetCommitRequestPartition::default();
                                        p.partition_index = i;
                                        p.committed_offset = 42;
                                        p.committed_metadata =
                                            Some(StrBytes::from_static_str("md"));
                                        p
                                    })
                                    .collect();
                                ot
                            })
                            .collect();
                        frame(api, version, &r)
                    }
                    ApiKey::OffsetFetch => {
                        let mut r = OffsetFetchRequest::default();
                        r.require_stable = version >= 7;
                        if version >= 8 {
                            // Two groups: one asking for two topics, one
                            // for everything committed.
                            let mut g = OffsetFetchRequestGroup::default();
                            g.group_id = group();
                            if version >= 9 {
                                g.member_id = Some(StrBytes::from_static_str("m-1"));
                                g.member_epoch = 3;
                            }
                            g.topics = Some(
                                ["a", "bb"]
                                    .iter()
                                    .map(|t| {
                                        let mut ot = OffsetFetchRequestTopics::default();
                                        ot.name = name(t);
                                        ot.partition_indexes = vec![0, 1, 2];
                                        ot
                                    })
                                    .collect(),
                            );
                            let mut all = OffsetFetchRequestGroup::default();
                            all.group_id = GroupId(StrBytes::from_static_str("g-2"));
                            all.topics = None;
                            r.groups = vec![g, all];
                        } else {
                            r.group_id = group();
                            r.topics = Some(
                                ["a", "bb"]
                                    .iter()
                                    .map(|t| {
                                        let mut ot = OffsetFetchRequestTopic::default();
                                        ot.name = name(t);
                                        ot.partition_indexes = vec![0, 1, 2];
                                        ot
                                    })
                                    .collect(),
                            );
                        }
                        frame(api, version, &r)
                    }
                    ApiKey::OffsetDelete => {
                        let mut r = OffsetDeleteRequest::default();
                        r.group_id = group();
                        r.topics = ["a", "bb"]
                            .iter()
                            .map(|t| {
                                let mut ot = OffsetDeleteRequestTopic::default();
                                ot.name = name(t);
                                ot.partitions = (0..2)
                                    .map(|i| {
                                        let mut p = OffsetDeleteRequestPartition::default();
                                        p.partition_index = i;
                                        p
                                    })
                                    .collect();
                                ot
                            })
                            .collect();
                        frame(api, version, &r)
                    }
                    ApiKey::ListGroups => {
                        let mut r = ListGroupsRequest::default();
                        if version >= 4 {
                            r.states_filter = vec![StrBytes::from_static_str("Stable")];
                        }
                        if version >= 5 {
                            r.types_filter = vec![StrBytes::from_static_str("classic")];
                        }
                        frame(api, version, &r)
                    }
                    ApiKey::DescribeGroups => {
                        let mut r = DescribeGroupsRequest::default();
                        r.groups = vec![group(), GroupId(StrBytes::from_static_str("g-2"))];
                        r.include_authorized_operations = version >= 3;
                        frame(api, version, &r)
                    }
                    ApiKey::InitProducerId => {
                        let mut r = InitProducerIdRequest::default();
                        r.transactional_id = Some(TransactionalId(StrBytes::from_static_str("tx")));
                        r.transaction_timeout_ms = 60_000;
                        frame(api, version, &r)
                    }
                    ApiKey::CreateTopics => {
                        let mut r = CreateTopicsRequest::default();
                        r.topics = ["a", "bb"]
                            .iter()
                            .map(|t| {
                                let mut ct = CreatableTopic::default();
                                ct.name = name(t);
                                ct.num_partitions = -1;
                                ct.replication_factor = -1;
                                let mut a = CreatableReplicaAssignment::default();
                                a.broker_ids = vec![BrokerId(0), BrokerId(1)];
                                ct.assignments = vec![a];
                                let mut c = CreatableTopicConfig::default();
                                c.name = StrBytes::from_static_str("retention.ms");
                                c.value = Some(StrBytes::from_static_str("1000"));
                                ct.configs = vec![c];
                                ct
                            })
                            .collect();
                        r.timeout_ms = 5_000;
                        r.validate_only = true;
                        frame(api, version, &r)
                    }
                    ApiKey::DeleteTopics => {
                        let mut r = DeleteTopicsRequest::default();
                        if version >= 6 {
                            r.topics = [Some(name("a")), None]
                                .into_iter()
                                .map(|n| {
                                    let mut t = DeleteTopicState::default();
                                    t.name = n;
                                    t
                                })
                                .collect();
                        } else {
                            r.topic_names = vec![name("a"), name("bb")];
                        }
                        r.timeout_ms = 5_000;
                        frame(api, version, &r)
                    }
                    ApiKey::CreatePartitions => {
                        let mut r = CreatePartitionsRequest::default();
                        r.topics = [("a", true), ("bb", false)]
                            .into_iter()
                            .map(|(t, assigned)| {
                                let mut ct = CreatePartitionsTopic::default();
                                ct.name = name(t);
                                ct.count = 4;
                                ct.assignments = assigned.then(|| {
                                    let mut a = CreatePartitionsAssignment::default();
                                    a.broker_ids = vec![BrokerId(0), BrokerId(1)];
                                    vec![a.clone(), a]
                                });
                                ct
                            })
                            .collect();
                        r.timeout_ms = 5_000;
                        r.validate_only = true;
                        frame(api, version, &r)
                    }
                    ApiKey::DescribeConfigs => {
                        let mut r = DescribeConfigsRequest::default();
                        r.resources = [(2, "a", true), (4, "0", false)]
                            .into_iter()
                            .map(|(kind, name, keys)| {
                                let mut d = DescribeConfigsResource::default();
                                d.resource_type = kind;
                                d.resource_name = StrBytes::from_static_str(name);
                                d.configuration_keys =
                                    keys.then(|| vec![StrBytes::from_static_str("retention.ms")]);
                                d
                            })
                            .collect();
                        r.include_synonyms = true;
                        frame(api, version, &r)
                    }
                    ApiKey::IncrementalAlterConfigs => {
                        use kafka_protocol::messages::incremental_alter_configs_request::{
                            AlterConfigsResource, AlterableConfig,
                        };
                        let mut r = IncrementalAlterConfigsRequest::default();
                        r.resources = ["a", "bb"]
                            .iter()
                            .map(|t| {
                                let mut res = AlterConfigsResource::default();
                                res.resource_type = 2;
                                res.resource_name = StrBytes::from_static_str(t);
                                res.configs = [(0, Some("3")), (1, None)]
                                    .into_iter()
                                    .map(|(op, value)| {
                                        let mut c = AlterableConfig::default();
                                        c.name = StrBytes::from_static_str("min.insync.replicas");
                                        c.config_operation = op;
                                        c.value = value.map(StrBytes::from_static_str);
                                        c
                                    })
                                    .collect();
                                res
                            })
                            .collect();
                        frame(api, version, &r)
                    }
                    ApiKey::AlterConfigs => {
                        use kafka_protocol::messages::alter_configs_request::{
                            AlterConfigsResource, AlterableConfig,
                        };
                        let mut r = AlterConfigsRequest::default();
                        r.resources = ["a", "bb"]
                            .iter()
                            .map(|t| {
                                let mut res = AlterConfigsResource::default();
                                res.resource_type = 2;
                                res.resource_name = StrBytes::from_static_str(t);
                                res.configs = ["min.insync.replicas", "max.message.bytes"]
                                    .iter()
                                    .map(|n| {
                                        let mut c = AlterableConfig::default();
                                        c.name = StrBytes::from_static_str(n);
                                        c.value = Some(StrBytes::from_static_str("2"));
                                        c
                                    })
                                    .collect();
                                res
                            })
                            .collect();
                        r.validate_only = true;
                        frame(api, version, &r)
                    }
                    ApiKey::DeleteGroups => {
                        let mut r = DeleteGroupsRequest::default();
                        r.groups_names = vec![group(), GroupId(StrBytes::from_static_str("g-2"))];
                        frame(api, version, &r)
                    }
                    ApiKey::DeleteRecords => {
                        let mut r = DeleteRecordsRequest::default();
                        r.topics = ["a", "bb"]
                            .iter()
                            .map(|t| {
                                let mut dt = DeleteRecordsTopic::default();
                                dt.name = name(t);
                                dt.partitions = (0..2)
                                    .map(|i| {
                                        let mut p = DeleteRecordsPartition::default();
                                        p.partition_index = i;
                                        p.offset = -1;
                                        p
                                    })
                                    .collect();
                                dt
                            })
                            .collect();
                        r.timeout_ms = 5_000;
                        frame(api, version, &r)
                    }
                    ApiKey::DescribeAcls => {
                        let mut r = DescribeAclsRequest::default();
                        r.resource_type_filter = 2;
                        r.resource_name_filter = Some(StrBytes::from_static_str("a"));
                        r.pattern_type_filter = 3;
                        r.operation = 2;
                        r.permission_type = 3;
                        frame(api, version, &r)
                    }
                    ApiKey::CreateAcls => {
                        let mut c = AclCreation::default();
                        c.resource_type = 2;
                        c.resource_name = StrBytes::from_static_str("a");
                        c.resource_pattern_type = 3;
                        c.principal = StrBytes::from_static_str("User:alice");
                        c.host = StrBytes::from_static_str("*");
                        c.operation = 3;
                        c.permission_type = 3;
                        let mut r = CreateAclsRequest::default();
                        r.creations = vec![c];
                        frame(api, version, &r)
                    }
                    ApiKey::DeleteAcls => {
                        let mut f = DeleteAclsFilter::default();
                        f.resource_type_filter = 2;
                        f.pattern_type_filter = 3;
                        f.operation = 1;
                        f.permission_type = 1;
                        let mut r = DeleteAclsRequest::default();
                        r.filters = vec![f];
                        frame(api, version, &r)
                    }
                    ApiKey::DescribeLogDirs => {
                        let mut r = DescribeLogDirsRequest::default();
                        let mut t = DescribableLogDirTopic::default();
                        t.topic = name("a");
                        t.partitions = vec![0, 1];
                        r.topics = Some(vec![t]);
                        frame(api, version, &r)
                    }
                    ApiKey::AddPartitionsToTxn => {
                        let mut r = AddPartitionsToTxnRequest::default();
                        r.v3_and_below_transactional_id = txn_id();
                        r.v3_and_below_producer_id = ProducerId(7);
                        r.v3_and_below_topics = ["a", "bb"]
                            .iter()
                            .map(|t| {
                                let mut at = AddPartitionsToTxnTopic::default();
                                at.name = name(t);
                                at.partitions = vec![0, 1, 2];
                                at
                            })
                            .collect();
                        frame(api, version, &r)
                    }
                    ApiKey::AddOffsetsToTxn => {
                        let mut r = AddOffsetsToTxnRequest::default();
                        r.transactional_id = txn_id();
                        r.producer_id = ProducerId(7);
                        r.group_id = group();
                        frame(api, version, &r)
                    }
                    ApiKey::EndTxn => {
                        let mut r = EndTxnRequest::default();
                        r.transactional_id = txn_id();
                        r.producer_id = ProducerId(7);
                        r.committed = true;
                        frame(api, version, &r)
                    }
                    ApiKey::TxnOffsetCommit => {
                        let mut r = TxnOffsetCommitRequest::default();
                        r.transactional_id = txn_id();
                        r.group_id = group();
                        r.producer_id = ProducerId(7);
                        if version >= 3 {
                            r.generation_id = 2;
                            r.member_id = StrBytes::from_static_str("m-1");
                            r.group_instance_id = Some(StrBytes::from_static_str("i-1"));
                        }
                        r.topics = ["a", "bb"]
                            .iter()
                            .map(|t| {
                                let mut tt = TxnOffsetCommitRequestTopic::default();
                                tt.name = name(t);
                                tt.partitions = (0..2)
                                    .map(|i| {
                                        let mut p = TxnOffsetCommitRequestPartition::default();
                                        p.partition_index = i;
                                        p.committed_offset = 40;
                                        p.committed_metadata = Some(StrBytes::from_static_str("m"));
                                        p
                                    })
                                    .collect();
                                tt
                            })
                            .collect();
                        frame(api, version, &r)
                    }
                    ApiKey::ConsumerGroupHeartbeat => {
                        let mut r = ConsumerGroupHeartbeatRequest::default();
                        r.group_id = group();
                        r.member_id = StrBytes::from_static_str("m-1");
                        r.instance_id = Some(StrBytes::from_static_str("i-1"));
                        r.rebalance_timeout_ms = 30_000;
                        r.subscribed_topic_names = Some(vec![name("a"), name("bb")]);
                        if version >= 1 {
                            r.subscribed_topic_regex = Some(StrBytes::from_static_str("b.*"));
                        }
                        r.server_assignor = Some(StrBytes::from_static_str("uniform"));
                        let mut owned = ConsumerGroupHeartbeatTopicPartitions::default();
                        owned.topic_id = uuid::Uuid::from_u128(7);
                        owned.partitions = vec![0, 2];
                        r.topic_partitions = Some(vec![owned]);
                        frame(api, version, &r)
                    }
                    ApiKey::DescribeCluster => {
                        let mut r = DescribeClusterRequest::default();
                        r.include_cluster_authorized_operations = true;
                        if version >= 1 {
                            r.endpoint_type = 1;
                        }
                        r.include_fenced_brokers = version >= 2;
                        frame(api, version, &r)
                    }
                    ApiKey::ElectLeaders => {
                        use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
                        let mut r = ElectLeadersRequest::default();
                        if version >= 1 {
                            r.election_type = 1;
                        }
                        r.topic_partitions = Some(
                            ["a", "bb"]
                                .iter()
                                .map(|t| {
                                    let mut tp = TopicPartitions::default();
                                    tp.topic = name(t);
                                    tp.partitions = vec![0, 1];
                                    tp
                                })
                                .collect(),
                        );
                        r.timeout_ms = 5_000;
                        frame(api, version, &r)
                    }
                    ApiKey::AlterPartitionReassignments => {
                        use kafka_protocol::messages::alter_partition_reassignments_request::{
                            ReassignablePartition, ReassignableTopic,
                        };
                        let mut r = AlterPartitionReassignmentsRequest::default();
                        r.timeout_ms = 5_000;
                        let mut t = ReassignableTopic::default();
                        t.name = name("a");
                        t.partitions = [Some(vec![BrokerId(2), BrokerId(0)]), None]
                            .into_iter()
                            .enumerate()
                            .map(|(i, replicas)| {
                                let mut p = ReassignablePartition::default();
                                p.partition_index = i as i32;
                                p.replicas = replicas;
                                p
                            })
                            .collect();
                        r.topics = vec![t];
                        frame(api, version, &r)
                    }
                    ApiKey::ListPartitionReassignments => {
                        use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
                        let mut r = ListPartitionReassignmentsRequest::default();
                        r.timeout_ms = 5_000;
                        let mut t = ListPartitionReassignmentsTopics::default();
                        t.name = name("bb");
                        t.partition_indexes = vec![0, 3];
                        r.topics = Some(vec![t]);
                        frame(api, version, &r)
                    }
                    ApiKey::OffsetForLeaderEpoch => {
                        use kafka_protocol::messages::offset_for_leader_epoch_request::{
                            OffsetForLeaderPartition, OffsetForLeaderTopic,
                        };
                        let mut r = OffsetForLeaderEpochRequest::default();
                        if version >= 3 {
                            r.replica_id = BrokerId(-1);
                        }
                        r.topics = ["a", "bb"]
                            .iter()
                            .map(|t| {
                                let mut ot = OffsetForLeaderTopic::default();
                                ot.topic = name(t);
                                ot.partitions = (0..2)
                                    .map(|i| {
                                        let mut p = OffsetForLeaderPartition::default();
                                        p.partition = i;
                                        p.current_leader_epoch = 3;
                                        p.leader_epoch = 2;
                                        p
                                    })
                                    .collect();
                                ot
                            })
                            .collect();
                        frame(api, version, &r)
                    }
                    ApiKey::ConsumerGroupDescribe => {
                        let mut r = ConsumerGroupDescribeRequest::default();
                        r.group_ids = vec![group(), GroupId(StrBytes::from_static_str("g-2"))];
                        r.include_authorized_operations = true;
                        frame(api, version, &r)
                    }
                    ApiKey::ShareGroupHeartbeat => {
                        let mut r = ShareGroupHeartbeatRequest::default();
                        r.group_id = group();
                        r.member_id = StrBytes::from_static_str("m-1");
                        r.rack_id = Some(StrBytes::from_static_str("rack"));
                        r.subscribed_topic_names = Some(vec![name("a"), name("bb")]);
                        frame(api, version, &r)
                    }
                    ApiKey::ShareGroupDescribe => {
                        let mut r = ShareGroupDescribeRequest::default();
                        r.group_ids = vec![group(), GroupId(StrBytes::from_static_str("g-2"))];
                        frame(api, version, &r)
                    }
                    ApiKey::ShareFetch => {
                        use kafka_protocol::messages::share_fetch_request::{
                            AcknowledgementBatch, FetchPartition, FetchTopic, ForgottenTopic,
                        };
                        let mut ack = AcknowledgementBatch::default();
                        ack.first_offset = 3;
                        ack.last_offset = 5;
                        ack.acknowledge_types = vec![1, 2, 3];
                        let mut p = FetchPartition::default();
                        p.partition_index = 1;
                        p.acknowledgement_batches = vec![ack.clone(), ack];
                        let mut t = FetchTopic::default();
                        t.topic_id = uuid::Uuid::from_u128(9);
                        t.partitions = vec![p.clone(), p];
                        let mut f = ForgottenTopic::default();
                        f.topic_id = uuid::Uuid::from_u128(10);
                        f.partitions = vec![0, 1];
                        let mut r = ShareFetchRequest::default();
                        r.group_id = Some(group());
                        r.member_id = Some(StrBytes::from_static_str("m-1"));
                        r.share_session_epoch = 2;
                        r.max_records = 500;
                        r.topics = vec![t.clone(), t];
                        r.forgotten_topics_data = vec![f];
                        frame(api, version, &r)
                    }
                    ApiKey::ShareAcknowledge => {
                        use kafka_protocol::messages::share_acknowledge_request::{
                            AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch,
                        };
                        let mut ack = AcknowledgementBatch::default();
                        ack.first_offset = 3;
                        ack.last_offset = 3;
                        ack.acknowledge_types = vec![0];
                        let mut p = AcknowledgePartition::default();
                        p.partition_index = 1;
                        p.acknowledgement_batches = vec![ack];
                        let mut t = AcknowledgeTopic::default();
                        t.topic_id = uuid::Uuid::from_u128(9);
                        t.partitions = vec![p.clone(), p];
                        let mut r = ShareAcknowledgeRequest::default();
                        r.group_id = Some(group());
                        r.member_id = Some(StrBytes::from_static_str("m-1"));
                        r.share_session_epoch = -1;
                        r.topics = vec![t];
                        frame(api, version, &r)
                    }
                    ApiKey::DescribeTopicPartitions => {
                        use kafka_protocol::messages::describe_topic_partitions_request::{
                            Cursor, TopicRequest,
                        };
                        let mut t = TopicRequest::default();
                        t.name = TopicName(StrBytes::from_static_str("orders"));
                        let mut cursor = Cursor::default();
                        cursor.topic_name = TopicName(StrBytes::from_static_str("orders"));
                        cursor.partition_index = 2;
                        let mut r = DescribeTopicPartitionsRequest::default();
                        r.topics = vec![t.clone(), t];
                        r.response_partition_limit = 100;
                        r.cursor = Some(cursor);
                        frame(api, version, &r)
                    }
                    ApiKey::ListTransactions => {
                        let mut r = ListTransactionsRequest::default();
                        r.state_filters = vec![StrBytes::from_static_str("Ongoing")];
                        r.producer_id_filters = vec![ProducerId(3), ProducerId(4)];
                        if version >= 1 {
                            r.duration_filter = 1_000;
                        }
                        frame(api, version, &r)
                    }
                    ApiKey::DescribeTransactions => {
                        let mut r = DescribeTransactionsRequest::default();
                        let id = TransactionalId(StrBytes::from_static_str("tx-1"));
                        r.transactional_ids = vec![id.clone(), id];
                        frame(api, version, &r)
                    }
                    ApiKey::DescribeProducers => {
                        use kafka_protocol::messages::describe_producers_request::TopicRequest;
                        let mut t = TopicRequest::default();
                        t.name = TopicName(StrBytes::from_static_str("orders"));
                        t.partition_indexes = vec![0, 2];
                        let mut r = DescribeProducersRequest::default();
                        r.topics = vec![t.clone(), t];
                        frame(api, version, &r)
                    }
                    ApiKey::DescribeUserScramCredentials => {
                        use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
                        let mut user = UserName::default();
                        user.name = StrBytes::from_static_str("alice");
                        let mut r = DescribeUserScramCredentialsRequest::default();
                        r.users = Some(vec![user.clone(), user]);
                        frame(api, version, &r)
                    }
                    ApiKey::AlterUserScramCredentials => {
                        use kafka_protocol::messages::alter_user_scram_credentials_request::{
                            ScramCredentialDeletion, ScramCredentialUpsertion,
                        };
                        let mut deletion = ScramCredentialDeletion::default();
                        deletion.name = StrBytes::from_static_str("bob");
                        deletion.mechanism = 2;
                        let mut upsertion = ScramCredentialUpsertion::default();
                        upsertion.name = StrBytes::from_static_str("alice");
                        upsertion.mechanism = 1;
                        upsertion.iterations = 8192;
                        upsertion.salt = Bytes::from_static(b"salt");
                        upsertion.salted_password = Bytes::from_static(&[7; 32]);
                        let mut r = AlterUserScramCredentialsRequest::default();
                        r.deletions = vec![deletion];
                        r.upsertions = vec![upsertion.clone(), upsertion];
                        frame(api, version, &r)
                    }
                    ApiKey::DescribeClientQuotas => {
                        use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
                        let mut c = ComponentData::default();
                        c.entity_type = StrBytes::from_static_str("client-id");
                        c._match = Some(StrBytes::from_static_str("app"));
                        let mut r =
                            kafka_protocol::messages::DescribeClientQuotasRequest::default();
                        r.components = vec![c];
                        r.strict = true;
                        frame(api, version, &r)
                    }
                    ApiKey::AlterClientQuotas => {
                        use kafka_protocol::messages::alter_client_quotas_request::{
                            EntityData, EntryData, OpData,
                        };
                        let mut entity = EntityData::default();
                        entity.entity_type = StrBytes::from_static_str("user");
                        let mut op = OpData::default();
                        op.key = StrBytes::from_static_str("producer_byte_rate");
                        op.value = 1024.0;
                        let mut e = EntryData::default();
                        e.entity = vec![entity];
                        e.ops = vec![op];
                        let mut r = kafka_protocol::messages::AlterClientQuotasRequest::default();
                        r.entries = vec![e];
                        r.validate_only = true;
                        frame(api, version, &r)
                    }
                    ApiKey::ListConfigResources => {
                        let mut r = ListConfigResourcesRequest::default();
                        // v0 has no fields.
                        if version >= 1 {
                            r.resource_types = vec![2, 32];
                        }
                        frame(api, version, &r)
                    }
                    ApiKey::WriteTxnMarkers => {
                        use kafka_protocol::messages::write_txn_markers_request::{
                            WritableTxnMarker, WritableTxnMarkerTopic,
                        };
                        let mut t = WritableTxnMarkerTopic::default();
                        t.name = TopicName(StrBytes::from_static_str("orders"));
                        t.partition_indexes = vec![0, 2];
                        let mut m = WritableTxnMarker::default();
                        m.producer_id = ProducerId(7);
                        m.coordinator_epoch = 3;
                        m.topics = vec![t.clone(), t];
                        let mut r = kafka_protocol::messages::WriteTxnMarkersRequest::default();
                        r.markers = vec![m.clone(), m];
                        frame(api, version, &r)
                    }
                    ApiKey::UpdateFeatures => {
                        use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
                        let mut u = FeatureUpdateKey::default();
                        u.feature = StrBytes::from_static_str("group.version");
                        // The upgrade type and validate_only from v1.
                        if version >= 1 {
                            u.upgrade_type = 2;
                        }
                        let mut r = kafka_protocol::messages::UpdateFeaturesRequest::default();
                        r.feature_updates = vec![u.clone(), u];
                        r.validate_only = version >= 1;
                        frame(api, version, &r)
                    }
                    _ => unreachable!(),
                };
                let decoded = decode_request(bytes, &APIS);
                assert!(decoded.is_ok(), "{api:?} v{version}: {decoded:?}");
            }
        }
    }
}
