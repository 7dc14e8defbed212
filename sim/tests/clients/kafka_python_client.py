"""A kafka-python client for broker-sim's wire tests: a second, independent
implementation of the protocol (pure Python, not librdkafka), with its
defaults (its producer is idempotent unless told otherwise).

    kafka_python_client.py all BOOTSTRAP TOPIC COUNT
        Create TOPIC with 3 partitions through the admin client, produce
        COUNT records with acks=all, consume them in a consumer group and
        commit, then consume again in the same group (nothing should be
        left); list and describe the groups while a member is in, then
        delete the topic. Prints one JSON line; the caller judges it.
    kafka_python_client.py transactions BOOTSTRAP TOPIC
        Create TOPIC with 2 partitions, leave one transaction open on both
        (transactional id "open") and commit another on partition 0
        ("done"), then list the transactions at every broker (also by
        state), describe both ids and one never used, and describe the
        partitions' producers; abort the open one and describe again.
        Prints one JSON line: what each call answered.
    kafka_python_client.py abort BOOTSTRAP TOPIC
        Create TOPIC with 2 partitions, leave a transaction open on both
        (transactional id "stuck"), find it on partition 0 with
        DescribeProducers and abort it there as an operator does
        (abort_transaction, after one try from an older producer epoch),
        then commit the transaction and read both partitions back with
        read_committed. Prints one JSON line: the producers and the
        committed end offsets before and after the abort, the errors, and
        the values read.
    kafka_python_client.py reassign BOOTSTRAP TOPIC
        Create TOPIC with 2 partitions of one replica each, produce 100
        records with acks=all, move partition 0 to brokers 2 and 1 and
        partition 1 to all three, wait until no move is listed, produce 20
        more, cancel a move that is not under way and ask for one to a
        broker that does not exist, then read every record back. Prints
        one JSON line: what each call answered and what was read.
    kafka_python_client.py sasl BOOTSTRAP TOPIC USER:PASSWORD
        Against SASL_PLAINTEXT listeners: as USER, produce 5 records with
        acks=all by each of PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, read
        the 15 in a group that commits, by SCRAM-SHA-512, then try USER
        with a wrong password for 3 s. Prints one JSON line: how many
        records each mechanism had acknowledged, how many were read, and
        the error of the wrong password's try.
    kafka_python_client.py features BOOTSTRAP -
        Describe the cluster's features, try to take group.version to 0
        without saying it is a downgrade, check a safe downgrade with
        validate_only, make it, then upgrade again, describing the
        finalized levels after each step. Prints one JSON line.

Needs kafka-python 3 or later (its admin client answers in dicts, and
its producer is idempotent by default). Exits 0 when it ran.
"""
import json
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import AbortTransactionSpec, NewTopic


def consume(bootstrap, topic, group, want, seconds):
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=200,
    )
    values = []
    deadline = time.time() + seconds
    while time.time() < deadline and len(values) < want:
        for records in consumer.poll(timeout_ms=500).values():
            values.extend(r.value.decode() for r in records)
    consumer.commit()
    consumer.close()
    return values


def all_apis(bootstrap, topic, count):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    created = admin.create_topics([NewTopic(topic, 3, 3)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2)
    futures = [producer.send(topic, f"record-{i}".encode()) for i in range(count)]
    producer.flush(60)
    acked, errors = [], []
    for i, f in enumerate(futures):
        try:
            f.get(timeout=30)
            acked.append(f"record-{i}")
        except Exception as e:  # the caller reports what failed
            errors.append(type(e).__name__)
    idempotent = bool(producer.config.get("enable_idempotence"))
    producer.close()
    read = consume(bootstrap, topic, "kafka-python-readers", len(acked), 30)
    again = consume(bootstrap, topic, "kafka-python-readers", 1, 3)
    groups = describe_a_live_group(bootstrap, topic)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    config_resources = admin.list_config_resources(["TOPIC", "BROKER"])
    deleted = admin.delete_topics([topic])
    deleted_errors = [t["error_code"] for t in deleted["topics"]]
    left = topic in admin.list_topics()
    admin.close()
    print(json.dumps({
        "created_errors": [t["error_code"] for t in created["topics"]],
        "config_resources": config_resources,
        "idempotent": idempotent,
        "acked": len(acked),
        "read_back": len(set(acked) & set(read)),
        "read_twice": len(read) - len(set(read)),
        "after_commit": len(again),
        "errors": sorted(set(errors)),
        "groups": groups,
        "deleted_errors": deleted_errors,
        "topic_left": left,
    }))


def describe_a_live_group(bootstrap, topic):
    """Lists and describes the groups while one member is in "watchers":
    the listed group ids, and the described group's state and members'
    assignments (partitions of TOPIC)."""
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="watchers",
                             client_id="watcher-1")
    deadline = time.time() + 30
    while time.time() < deadline and not consumer.assignment():
        consumer.poll(timeout_ms=200)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    listed = sorted(g["group_id"] for g in admin.list_groups())
    described = admin.describe_groups(["watchers"])
    admin.close()
    consumer.close()
    return {"listed": listed, "described": json.loads(json.dumps(described["watchers"], default=str))}


def open_transaction(bootstrap, topic, transactional_id):
    """A producer with a transaction left open on TOPIC's partitions 0 and
    1, one record each ("ID-0", "ID-1"), written with acks=all."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                             acks="all")
    producer.init_transactions()
    producer.begin_transaction()
    for partition in (0, 1):
        producer.send(topic, f"{transactional_id}-{partition}".encode(), partition=partition)
    producer.flush()
    return producer


def transactions(bootstrap, topic):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 2, 3)])
    before = int(time.time() * 1000)
    open_txn = open_transaction(bootstrap, topic, "open")
    done = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="done", acks="all")
    done.init_transactions()
    done.begin_transaction()
    done.send(topic, b"done-0", partition=0)
    done.flush()
    done.commit_transaction()
    done.close()

    def listed(**filters):
        return {str(broker): sorted([t.transactional_id, t.producer_id, t.state.value]
                                    for t in txns)
                for broker, txns in admin.list_transactions(**filters).items()}

    def described():
        out = {}
        for txn_id, d in admin.describe_transactions(["open", "done"]).items():
            out[txn_id] = {
                "coordinator": d.coordinator_id,
                "state": d.state.value,
                "producer_id": d.producer_id,
                "epoch": d.producer_epoch,
                "timeout_ms": d.transaction_timeout_ms,
                "start_ms": d.transaction_start_time_ms,
                "partitions": sorted([tp.topic, tp.partition] for tp in d.topic_partitions),
            }
        return out

    def producers():
        partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        return {str(tp.partition): [[p.producer_id, p.producer_epoch, p.last_sequence,
                                     p.coordinator_epoch, p.current_transaction_start_offset]
                                    for p in state.active_producers]
                for tp, state in admin.describe_producers(partitions).items()}

    out = {
        "before": before,
        "listed": listed(),
        "ongoing": listed(state_filters=["Ongoing"]),
        "described": described(),
        "producers": producers(),
    }
    try:
        admin.describe_transactions(["never-used"])
        out["never_used"] = None
    except Exception as e:  # the client raises the per-id error
        out["never_used"] = type(e).__name__
    open_txn.abort_transaction()
    open_txn.close()
    out["after"] = int(time.time() * 1000)
    out["described_after_abort"] = described()
    out["producers_after_abort"] = producers()
    admin.close()
    print(json.dumps(out))


def abort(bootstrap, topic):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 2, 3)])
    partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    producer = open_transaction(bootstrap, topic, "stuck")
    reader = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                           auto_offset_reset="earliest", consumer_timeout_ms=3000)

    def producers():
        return {str(tp.partition): [[p.producer_id, p.producer_epoch, p.coordinator_epoch,
                                     p.current_transaction_start_offset]
                                    for p in state.active_producers]
                for tp, state in admin.describe_producers(partitions).items()}

    def committed_ends():
        return {str(tp.partition): end for tp, end in reader.end_offsets(partitions).items()}

    out = {"producers": producers(), "ends": committed_ends()}
    [pid, epoch, coordinator_epoch, _] = out["producers"]["0"][0]
    try:
        admin.abort_transaction(AbortTransactionSpec(partitions[0], pid, epoch - 1,
                                                     max(coordinator_epoch, 0)))
        out["older_epoch"] = None
    except Exception as e:  # the client raises the partition's error
        out["older_epoch"] = type(e).__name__
    # As Kafka's tool does: the producer's coordinator epoch, 0 if none.
    admin.abort_transaction(AbortTransactionSpec(partitions[0], pid, epoch,
                                                 max(coordinator_epoch, 0)))
    out["producers_after"] = producers()
    out["ends_after"] = committed_ends()
    producer.commit_transaction()
    producer.close()
    deadline = time.time() + 20
    while time.time() < deadline and committed_ends()["1"] < 2:
        time.sleep(0.05)
    out["ends_committed"] = committed_ends()
    reader.assign(partitions)
    out["read"] = sorted(m.value.decode() for m in reader)
    reader.close()
    admin.close()
    print(json.dumps(out))


def reassign(bootstrap, topic):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1,
                                  topic_configs={"min.insync.replicas": "1"})])
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")

    def produce(numbers):
        for i in numbers:
            producer.send(topic, str(i).encode(), partition=i % 2)
        producer.flush()

    def placement():
        described = admin.describe_topics([topic])[0]["partitions"]
        return {p["partition_index"]: {"leader": p["leader_id"], "replicas": p["replica_nodes"],
                                       "isr": sorted(p["isr_nodes"])} for p in described}

    def errors(answer):
        return {tp.partition: (e.__name__ if e else None) for tp, e in answer.items()}

    out = {}
    produce(range(100))
    out["before"] = placement()
    out["moved"] = errors(admin.alter_partition_reassignments(
        {TopicPartition(topic, 0): [2, 1], TopicPartition(topic, 1): [0, 1, 2]}))
    deadline = time.time() + 20
    while admin.list_partition_reassignments() and time.time() < deadline:
        time.sleep(0.05)
    out["listed_after"] = {str(tp): v for tp, v in admin.list_partition_reassignments().items()}
    out["after"] = placement()
    produce(range(100, 120))
    out["cancelled"] = errors(admin.alter_partition_reassignments({TopicPartition(topic, 0): None}))
    out["unknown_broker"] = errors(admin.alter_partition_reassignments({TopicPartition(topic, 0): [5]}))
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    out["read"] = sorted(int(m.value) for m in consumer)
    consumer.close()
    producer.close()
    admin.close()
    print(json.dumps(out))


def sasl(bootstrap, topic, user, password):
    def auth(mechanism, secret=password):
        return {"bootstrap_servers": bootstrap, "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": mechanism, "sasl_plain_username": user,
                "sasl_plain_password": secret}

    out = {"acked": {}}
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]:
        producer = KafkaProducer(acks="all", **auth(mechanism))
        sent = [producer.send(topic, f"{mechanism}-{i}".encode()) for i in range(5)]
        out["acked"][mechanism] = sum(1 for f in sent if f.get(timeout=30))
        producer.close()
    consumer = KafkaConsumer(topic, group_id="sasl-readers", auto_offset_reset="earliest",
                             enable_auto_commit=False, **auth("SCRAM-SHA-512"))
    values = set()
    deadline = time.time() + 30
    while time.time() < deadline and len(values) < 15:
        for records in consumer.poll(timeout_ms=500).values():
            values.update(r.value.decode() for r in records)
    consumer.commit()
    consumer.close()
    out["read"] = len(values)

    try:
        KafkaProducer(bootstrap_timeout_ms=3000, **auth("SCRAM-SHA-256", password + "x")).close()
        out["wrong_password"] = "connected"
    except Exception as e:  # the client's error for a bootstrap that failed
        out["wrong_password"] = type(e).__name__
    print(json.dumps(out))


def features(bootstrap):
    """What describe_features reports, before and after update_features
    turns group.version off and on again, and the error of a downgrade
    that does not say it is one."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)

    def finalized():
        return {name: f.get("finalized") for name, f in admin.describe_features().items()}

    out = {"supported": {n: f["supported"] for n, f in admin.describe_features().items()}}
    out["before"] = finalized()
    try:
        admin.update_features({"group.version": 0})
        out["plain_downgrade"] = None
    except Exception as e:
        out["plain_downgrade"] = type(e).__name__
    out["checked"] = admin.update_features(
        {"group.version": ("SAFE_DOWNGRADE", 0)}, validate_only=True)
    out["after_check"] = finalized()
    out["downgrade"] = admin.update_features({"group.version": ("SAFE_DOWNGRADE", 0)})
    out["off"] = finalized()
    out["upgrade"] = admin.update_features({"group.version": 1})
    out["on"] = finalized()
    admin.close()
    print(json.dumps(out))


if __name__ == "__main__":
    mode, bootstrap, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "all":
        all_apis(bootstrap, topic, int(sys.argv[4]))
    elif mode == "transactions":
        transactions(bootstrap, topic)
    elif mode == "abort":
        abort(bootstrap, topic)
    elif mode == "reassign":
        reassign(bootstrap, topic)
    elif mode == "sasl":
        sasl(bootstrap, topic, *sys.argv[4].split(":", 1))
    elif mode == "features":
        features(bootstrap)
    else:
        sys.exit(f"unknown mode {mode}")
