//! The authorizer (`--authorizer`) over 127.0.0.1, driven by the test
//! client logged in by PLAIN: ACLs created, described and deleted by a
//! super user only, and each kind of request answered as the ACLs allow,
//! with Kafka's errors. (A real client: `real_clients.rs`.)

use broker_sim::live::{Authorization, LiveConfig};
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{batch, commit_request, produce_request, Client};
use broker_sim::wire::Limits;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    BrokerId, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest, DescribeConfigsRequest,
    FetchRequest, GroupId, IncrementalAlterConfigsRequest, InitProducerIdRequest, JoinGroupRequest,
    ListGroupsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::net::SocketAddr;

const TOPIC: i8 = 2;
const GROUP: i8 = 3;
const ANY: i8 = 1;
const MATCH: i8 = 2;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const READ: i8 = 3;
const WRITE: i8 = 4;
const DENY: i8 = 2;
const ALLOW: i8 = 3;

fn code(e: ResponseError) -> i16 {
    e.code()
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// One broker with users admin (a super user), alice and bob, and topics
/// `orders` and `secret`, on 127.0.0.1.
fn server(allow_everyone_if_no_acl_found: bool) -> Server {
    server_on(
        "127.0.0.1:0".parse().unwrap(),
        allow_everyone_if_no_acl_found,
    )
}

fn server_on(listen: SocketAddr, allow_everyone_if_no_acl_found: bool) -> Server {
    let users = ["admin", "alice", "bob"];
    Server::start(ServeOptions {
        listen,
        advertise: None,
        live: LiveConfig {
            sasl_users: users
                .iter()
                .map(|u| (u.to_string(), format!("{u}-pw")))
                .collect(),
            authorization: Some(Authorization {
                super_users: ["User:admin".to_string()].into(),
                allow_everyone_if_no_acl_found,
            }),
            ..LiveConfig::one_broker()
        },
        topics: vec![("orders".into(), 2), ("secret".into(), 1)],
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts")
}

/// Stops `server`, whose checks must all have held, and which must have
/// both allowed and denied some of what was asked.
fn passes(server: Server) {
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    for decision in ["ACL checks allowed", "ACL checks denied"] {
        assert!(report.count(decision) > Some(0), "{}", report.human());
    }
}

fn login(addr: SocketAddr, user: &str) -> Client {
    Client::connect_plain(addr, user, &format!("{user}-pw")).expect("logged in")
}

fn acl(
    resource_type: i8,
    name: &str,
    pattern: i8,
    principal: &str,
    op: i8,
    perm: i8,
) -> AclCreation {
    let mut c = AclCreation::default();
    c.resource_type = resource_type;
    c.resource_name = s(name);
    c.resource_pattern_type = pattern;
    c.principal = s(principal);
    c.host = s("*");
    c.operation = op;
    c.permission_type = perm;
    c
}

/// The error code of each creation (whose message is null on success,
/// as Kafka sends it).
fn create(c: &mut Client, acls: Vec<AclCreation>) -> Vec<i16> {
    let mut r = CreateAclsRequest::default();
    r.creations = acls;
    let answer = c.call(&r, 3);
    for result in answer.results.iter().filter(|r| r.error_code == 0) {
        assert_eq!(result.error_message, None);
    }
    answer.results.iter().map(|r| r.error_code).collect()
}

fn describe_all(c: &mut Client, name: Option<&str>, pattern: i8) -> (i16, Vec<(String, usize)>) {
    let mut r = DescribeAclsRequest::default();
    r.resource_type_filter = ANY;
    r.resource_name_filter = name.map(s);
    r.pattern_type_filter = pattern;
    r.principal_filter = None;
    r.host_filter = None;
    r.operation = ANY;
    r.permission_type = ANY;
    let answer = c.call(&r, 3);
    let resources = (answer.resources.iter())
        .map(|res| (res.resource_name.to_string(), res.acls.len()))
        .collect();
    (answer.error_code, resources)
}

fn metadata(c: &mut Client, topics: Option<&[&str]>) -> Vec<(String, i16)> {
    let mut r = MetadataRequest::default();
    r.topics = topics.map(|names| {
        (names.iter())
            .map(|n| {
                let mut t = MetadataRequestTopic::default();
                t.name = Some(TopicName(s(n)));
                t
            })
            .collect()
    });
    r.allow_auto_topic_creation = true;
    let mut out: Vec<(String, i16)> = (c.call(&r, 12).topics.iter())
        .map(|t| {
            (
                t.name.as_ref().map(|n| n.to_string()).unwrap_or_default(),
                t.error_code,
            )
        })
        .collect();
    out.sort();
    out
}

/// The error of each (topic, partition) of a produce of one record to
/// partition 0 of each topic.
fn produce(c: &mut Client, topics: &[&str]) -> Vec<(String, i16)> {
    let mut r = produce_request(topics[0], &[(0, batch(&[b"x"]))], -1, 5000);
    for t in &topics[1..] {
        let more = produce_request(t, &[(0, batch(&[b"x"]))], -1, 5000);
        r.topic_data.extend(more.topic_data);
    }
    let mut out: Vec<(String, i16)> = (c.call(&r, 9).responses.iter())
        .flat_map(|t| {
            (t.partition_responses.iter()).map(move |p| (t.name.to_string(), p.error_code))
        })
        .collect();
    out.sort();
    out
}

fn fetch(c: &mut Client, topic: &str) -> i16 {
    let mut p = FetchPartition::default();
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = TopicName(s(topic));
    t.partitions = vec![p];
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_bytes = 1 << 20;
    r.topics = vec![t];
    c.call(&r, 12).responses[0].partitions[0].error_code
}

fn join(c: &mut Client, group: &str) -> i16 {
    let mut r = JoinGroupRequest::default();
    r.group_id = GroupId(s(group));
    r.session_timeout_ms = 10_000;
    r.rebalance_timeout_ms = 10_000;
    r.protocol_type = s("consumer");
    c.call(&r, 5).error_code
}

#[test]
fn acls_are_created_described_and_deleted_by_super_users_only() {
    let server = server(false);
    let addr = server.addrs()[0];
    let mut admin = login(addr, "admin");
    let mut bob = login(addr, "bob");

    let orders = acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW);
    // Without ALTER on the cluster, nothing is created or described.
    assert_eq!(
        create(&mut bob, vec![orders.clone()]),
        vec![code(ResponseError::ClusterAuthorizationFailed)]
    );
    assert_eq!(
        describe_all(&mut bob, None, ANY).0,
        code(ResponseError::ClusterAuthorizationFailed)
    );

    // An invalid ACL is refused on its own; the others are created.
    let no_colon = acl(TOPIC, "orders", LITERAL, "alice", READ, ALLOW);
    let created = create(
        &mut admin,
        vec![
            orders.clone(),
            no_colon,
            acl(TOPIC, "ord", PREFIXED, "User:alice", READ, ALLOW),
            acl(TOPIC, "*", LITERAL, "User:bob", READ, ALLOW),
            acl(GROUP, "readers", LITERAL, "User:alice", READ, ALLOW),
        ],
    );
    assert_eq!(
        created,
        vec![0, code(ResponseError::InvalidRequest), 0, 0, 0]
    );
    // Created again: no second copy.
    assert_eq!(create(&mut admin, vec![orders]), vec![0]);

    let (error, all) = describe_all(&mut admin, None, ANY);
    assert_eq!(error, 0);
    assert_eq!(all.iter().map(|(_, n)| n).sum::<usize>(), 4, "{all:?}");
    // MATCH: every ACL that applies to the topic `orders`.
    let (_, applying) = describe_all(&mut admin, Some("orders"), MATCH);
    let mut names: Vec<&str> = applying.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    assert_eq!(names, ["*", "ord", "orders"]);
    // LITERAL: those of exactly that name.
    assert_eq!(
        describe_all(&mut admin, Some("orders"), LITERAL).1,
        [("orders".to_string(), 1)]
    );

    let mut delete = DeleteAclsRequest::default();
    let mut filter = DeleteAclsFilter::default();
    filter.resource_type_filter = ANY;
    filter.pattern_type_filter = ANY;
    filter.resource_name_filter = None;
    filter.principal_filter = Some(s("User:alice"));
    filter.host_filter = None;
    filter.operation = ANY;
    filter.permission_type = ANY;
    delete.filters = vec![filter];
    let deleted = admin.call(&delete, 3);
    assert_eq!(deleted.filter_results[0].error_code, 0);
    assert_eq!(deleted.filter_results[0].matching_acls.len(), 3);
    assert_eq!(
        describe_all(&mut admin, None, ANY).1,
        [("*".to_string(), 1)]
    );
    passes(server);
}

#[test]
fn each_request_is_answered_as_the_acls_allow() {
    let server = server(false);
    let addr = server.addrs()[0];
    let mut admin = login(addr, "admin");
    let created = create(
        &mut admin,
        vec![
            acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW),
            acl(TOPIC, "ord", PREFIXED, "User:alice", READ, ALLOW),
            acl(GROUP, "readers", LITERAL, "User:alice", READ, ALLOW),
        ],
    );
    assert_eq!(created, [0, 0, 0]);
    let mut alice = login(addr, "alice");
    let mut bob = login(addr, "bob");
    let topic_denied = code(ResponseError::TopicAuthorizationFailed);

    // Produce: each topic on its own.
    assert_eq!(
        produce(&mut alice, &["orders", "secret"]),
        [("orders".into(), 0), ("secret".into(), topic_denied)]
    );
    assert_eq!(
        produce(&mut bob, &["orders"]),
        [("orders".into(), topic_denied)]
    );

    // Fetch: READ by the prefix.
    assert_eq!(fetch(&mut alice, "orders"), 0);
    assert_eq!(fetch(&mut alice, "secret"), topic_denied);
    assert_eq!(fetch(&mut bob, "orders"), topic_denied);

    // Metadata: all topics lists what may be described; a topic asked for
    // is refused, and one that does not exist is not created without
    // CREATE.
    assert_eq!(metadata(&mut alice, None), [("orders".into(), 0)]);
    assert_eq!(metadata(&mut bob, None), []);
    assert_eq!(
        metadata(&mut alice, Some(&["secret", "new-one"])),
        [
            ("new-one".into(), topic_denied),
            ("secret".into(), topic_denied)
        ]
    );
    let everything = metadata(&mut admin, None);
    assert_eq!(everything, [("orders".into(), 0), ("secret".into(), 0)]);

    // Groups: READ on the group, then READ on each topic committed.
    let group_denied = code(ResponseError::GroupAuthorizationFailed);
    assert_eq!(join(&mut alice, "others"), group_denied);
    assert_eq!(join(&mut bob, "readers"), group_denied);
    let commit = commit_request("readers", -1, "", &[("orders", 0, 1), ("secret", 0, 1)]);
    let mut committed: Vec<(String, i16)> = (alice.call(&commit, 8).topics.iter())
        .map(|t| (t.name.to_string(), t.partitions[0].error_code))
        .collect();
    committed.sort();
    assert_eq!(
        committed,
        [("orders".into(), 0), ("secret".into(), topic_denied)]
    );
    let listed = |c: &mut Client| c.call(&ListGroupsRequest::default(), 4).groups.len();
    assert_eq!(listed(&mut alice), 1);
    assert_eq!(listed(&mut bob), 0);
    assert_eq!(listed(&mut admin), 1);

    // An idempotent producer: WRITE on some topic suffices (KIP-679).
    let mut init = InitProducerIdRequest::default();
    init.transactional_id = None;
    assert_eq!(alice.call(&init, 4).error_code, 0);
    assert_eq!(
        bob.call(&init, 4).error_code,
        code(ResponseError::ClusterAuthorizationFailed)
    );

    // Configs: ALTER_CONFIGS and DESCRIBE_CONFIGS on the topic.
    let mut alter = IncrementalAlterConfigsRequest::default();
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = s("orders");
    let mut setting = AlterableConfig::default();
    setting.name = s("retention.ms");
    setting.value = Some(s("60000"));
    resource.configs = vec![setting];
    alter.resources = vec![resource];
    assert_eq!(alice.call(&alter, 1).responses[0].error_code, topic_denied);
    assert_eq!(admin.call(&alter, 1).responses[0].error_code, 0);
    let mut describe = DescribeConfigsRequest::default();
    let mut resource = DescribeConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = s("orders");
    resource.configuration_keys = None;
    describe.resources = vec![resource];
    let described = alice.call(&describe, 4);
    assert_eq!(described.results[0].error_code, topic_denied);
    assert!(described.results[0].configs.is_empty());
    let described = admin.call(&describe, 4);
    // Null on success, as Kafka sends it.
    let result = &described.results[0];
    assert_eq!(
        (result.error_code, result.error_message.as_deref()),
        (0, None)
    );

    // A DENY wins over the ALLOW by the prefix.
    assert_eq!(
        create(
            &mut admin,
            vec![acl(TOPIC, "orders", LITERAL, "User:alice", READ, DENY)]
        ),
        [0]
    );
    assert_eq!(fetch(&mut alice, "orders"), topic_denied);
    // ...but a denied READ does not deny DESCRIBE, which WRITE implies.
    assert_eq!(
        metadata(&mut alice, Some(&["orders"])),
        [("orders".into(), 0)]
    );
    passes(server);
}

#[test]
fn with_allow_everyone_if_no_acl_found_only_named_resources_are_closed() {
    let server = server(true);
    let addr = server.addrs()[0];
    let mut admin = login(addr, "admin");
    let mut bob = login(addr, "bob");
    assert_eq!(
        produce(&mut bob, &["orders", "secret"]),
        [("orders".into(), 0), ("secret".into(), 0)]
    );
    // An ACL naming `secret` for someone else closes it to bob.
    assert_eq!(
        create(
            &mut admin,
            vec![acl(TOPIC, "secret", LITERAL, "User:alice", WRITE, ALLOW)]
        ),
        [0]
    );
    assert_eq!(
        produce(&mut bob, &["orders", "secret"]),
        [
            ("orders".into(), 0),
            (
                "secret".into(),
                code(ResponseError::TopicAuthorizationFailed)
            )
        ]
    );
    passes(server);
}

#[test]
fn admin_and_transaction_requests_are_answered_as_the_acls_allow() {
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
    use kafka_protocol::messages::{
        AddPartitionsToTxnRequest, ApiVersionsRequest, CreateTopicsRequest, DeleteTopicsRequest,
        DescribeClusterRequest, DescribeGroupsRequest, FindCoordinatorRequest, ProducerId,
        TransactionalId, UpdateFeaturesRequest,
    };
    const CLUSTER: i8 = 4;
    const TRANSACTIONAL_ID: i8 = 5;
    const CREATE: i8 = 5;
    const DESCRIBE: i8 = 8;
    let server = server(false);
    let addr = server.addrs()[0];
    let mut admin = login(addr, "admin");
    let created = create(
        &mut admin,
        vec![
            acl(TOPIC, "tmp-", PREFIXED, "User:alice", CREATE, ALLOW),
            acl(TOPIC, "tmp-", PREFIXED, "User:alice", WRITE, ALLOW),
            acl(TRANSACTIONAL_ID, "tx", LITERAL, "User:alice", WRITE, ALLOW),
            acl(GROUP, "readers", LITERAL, "User:alice", DESCRIBE, ALLOW),
            acl(
                CLUSTER,
                "kafka-cluster",
                LITERAL,
                "User:bob",
                DESCRIBE,
                ALLOW,
            ),
        ],
    );
    assert_eq!(created, [0; 5]);
    let mut alice = login(addr, "alice");
    let mut bob = login(addr, "bob");
    let topic_denied = code(ResponseError::TopicAuthorizationFailed);

    // CreateTopics: CREATE by the prefix; the configs of a topic made
    // are not told without DESCRIBE_CONFIGS.
    let mut make = CreateTopicsRequest::default();
    make.timeout_ms = 5000;
    make.topics = ["tmp-a", "other"]
        .iter()
        .map(|n| {
            let mut t = CreatableTopic::default();
            t.name = TopicName(s(n));
            t.num_partitions = 1;
            t.replication_factor = 1;
            t
        })
        .collect();
    let made = alice.call(&make, 7);
    let mut answers: Vec<(String, i16, i16)> = (made.topics.iter())
        .map(|t| (t.name.to_string(), t.error_code, t.topic_config_error_code))
        .collect();
    answers.sort();
    assert_eq!(
        answers,
        [
            ("other".into(), topic_denied, 0),
            ("tmp-a".into(), 0, topic_denied)
        ]
    );
    let listed = metadata(&mut admin, None);
    assert!(listed.contains(&("tmp-a".into(), 0)), "{listed:?}");
    assert!(!listed.iter().any(|(n, _)| n == "other"), "{listed:?}");

    // DeleteTopics: DESCRIBE and DELETE; the topic stays.
    let mut delete = DeleteTopicsRequest::default();
    delete.topic_names = vec![TopicName(s("tmp-a"))];
    delete.timeout_ms = 5000;
    let deleted = alice.call(&delete, 5);
    assert_eq!(deleted.responses[0].error_code, topic_denied);
    assert!(metadata(&mut admin, None).contains(&("tmp-a".into(), 0)));

    // FindCoordinator and DescribeGroups: DESCRIBE on the group.
    let mut find = FindCoordinatorRequest::default();
    find.coordinator_keys = vec![s("readers"), s("others")];
    let found = alice.call(&find, 4);
    let mut errors: Vec<(String, i16)> = (found.coordinators.iter())
        .map(|c| (c.key.to_string(), c.error_code))
        .collect();
    errors.sort();
    let group_denied = code(ResponseError::GroupAuthorizationFailed);
    assert_eq!(
        errors,
        [("others".into(), group_denied), ("readers".into(), 0)]
    );
    let mut describe = DescribeGroupsRequest::default();
    describe.groups = vec![GroupId(s("readers")), GroupId(s("others"))];
    describe.include_authorized_operations = true;
    let described = alice.call(&describe, 5);
    assert_eq!(described.groups[0].error_code, 0);
    assert_eq!(described.groups[0].authorized_operations, 1 << DESCRIBE);
    assert_eq!(described.groups[1].error_code, group_denied);

    // AddPartitionsToTxn: one topic refused, nothing added, the others
    // not attempted.
    let mut add = AddPartitionsToTxnRequest::default();
    add.v3_and_below_transactional_id = TransactionalId(s("tx"));
    add.v3_and_below_producer_id = ProducerId(0);
    add.v3_and_below_topics = ["tmp-a", "secret"]
        .iter()
        .map(|n| {
            let mut t = AddPartitionsToTxnTopic::default();
            t.name = TopicName(s(n));
            t.partitions = vec![0];
            t
        })
        .collect();
    let added = alice.call(&add, 3);
    let mut errors: Vec<(String, i16)> = (added.results_by_topic_v3_and_below.iter())
        .map(|t| {
            (
                t.name.to_string(),
                t.results_by_partition[0].partition_error_code,
            )
        })
        .collect();
    errors.sort();
    let not_attempted = code(ResponseError::OperationNotAttempted);
    assert_eq!(
        errors,
        [
            ("secret".into(), topic_denied),
            ("tmp-a".into(), not_attempted)
        ]
    );
    add.v3_and_below_transactional_id = TransactionalId(s("other-tx"));
    let added = alice.call(&add, 3);
    let txn_denied = code(ResponseError::TransactionalIdAuthorizationFailed);
    assert!((added.results_by_topic_v3_and_below.iter())
        .all(|t| t.results_by_partition[0].partition_error_code == txn_denied));

    // DescribeCluster: what bob may do on the cluster; nothing for alice.
    let mut cluster = DescribeClusterRequest::default();
    cluster.include_cluster_authorized_operations = true;
    assert_eq!(
        bob.call(&cluster, 1).cluster_authorized_operations,
        1 << DESCRIBE
    );
    assert_eq!(alice.call(&cluster, 1).cluster_authorized_operations, 0);

    // UpdateFeatures needs ALTER on the cluster: refused to bob, who may
    // only describe it, and the level stays; done for a super user.
    let mut update = UpdateFeaturesRequest::default();
    let mut off = FeatureUpdateKey::default();
    off.feature = s("group.version");
    off.upgrade_type = 2; // a safe downgrade, to 0
    update.feature_updates = vec![off];
    let refused = bob.call(&update, 1);
    assert_eq!(
        (refused.error_code, refused.results.len()),
        (code(ResponseError::ClusterAuthorizationFailed), 0)
    );
    let group_version = |c: &mut Client| {
        let v = c.call(&ApiVersionsRequest::default(), 4);
        (v.finalized_features.iter()).any(|f| f.name.as_str() == "group.version")
    };
    assert!(group_version(&mut bob));
    assert_eq!(admin.call(&update, 1).error_code, 0);
    assert!(!group_version(&mut bob));
    passes(server);
}

/// An ACL's host is the client's address as a Kafka broker writes it:
/// over IPv6 loopback that is `0:0:0:0:0:0:0:1`, and `::1` matches no
/// client. (Skipped where the machine has no IPv6 loopback.)
#[test]
fn over_ipv6_an_acl_names_the_host_as_kafka_writes_it() {
    let listen: SocketAddr = "[::1]:0".parse().unwrap();
    if std::net::TcpListener::bind(listen).is_err() {
        eprintln!("no IPv6 loopback here: skipped");
        return;
    }
    let server = server_on(listen, false);
    let addr = server.addrs()[0];
    let mut admin = login(addr, "admin");
    let mut alice = login(addr, "alice");
    let from = |host: &str| {
        let mut c = acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW);
        c.host = s(host);
        c
    };
    let denied = code(ResponseError::TopicAuthorizationFailed);
    assert_eq!(create(&mut admin, vec![from("::1")]), [0]);
    assert_eq!(
        produce(&mut alice, &["orders"]),
        [("orders".into(), denied)]
    );
    assert_eq!(create(&mut admin, vec![from("0:0:0:0:0:0:0:1")]), [0]);
    assert_eq!(produce(&mut alice, &["orders"]), [("orders".into(), 0)]);
    passes(server);
}
