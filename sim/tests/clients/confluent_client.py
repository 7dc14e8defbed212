"""A confluent-kafka (librdkafka) client for broker-sim's wire tests.

    confluent_client.py roundtrip BOOTSTRAP TOPIC COUNT
        Produce COUNT records with acks=all, a few per millisecond, then
        read every partition from the start. Prints one JSON line: how many
        were acknowledged, how many of those were read back, the errors.
    confluent_client.py idempotent BOOTSTRAP TOPIC COUNT TIMEOUT_MS
        As roundtrip, with enable.idempotence and request.timeout.ms
        TIMEOUT_MS: a batch whose answer times out is sent again with the
        same sequence numbers. Also says how many records were read more
        than once.
    confluent_client.py timeout BOOTSTRAP TOPIC TIMEOUT_MS
        Produce one record with acks=all, request.timeout.ms TIMEOUT_MS and
        no retries, to a partition whose followers do not keep up. Prints
        the error name and the seconds it took.

    confluent_client.py produce BOOTSTRAP TOPIC COUNT PREFIX
        Produce COUNT records PREFIX-0.. with acks=all, round-robin over the
        partitions (librdkafka's sticky partitioner could put them all in
        one); prints how many were acknowledged.
    confluent_client.py group BOOTSTRAP TOPIC SECONDS GROUP [STRATEGY]
        Consume TOPIC in consumer group GROUP for SECONDS, committing each
        record synchronously after printing it (one line each), then leave.
        STRATEGY is partition.assignment.strategy (default range;
        cooperative-sticky rebalances incrementally). A refused commit is
        reported on stderr as "commit refused NAME".
    confluent_client.py regex BOOTSTRAP PREFIX
        List the cluster's topics, subscribe a group to ^PREFIX-.* with 20
        records in PREFIX-a, then create PREFIX-b with 10 more: the
        subscription takes it up. Prints one JSON line: whether PREFIX-a
        was listed, the assignments, how many records were read.
    confluent_client.py static BOOTSTRAP TOPIC GROUP
        Static membership: consumers "a" and "b" (group.instance.id) share
        TOPIC; "a" closes and comes back as a new process would, then a
        third consumer starts with "a" too. Prints one JSON line: each
        one's assignments and revocations, what admin tools describe while
        "a" is away, the errors the first "a" sees once fenced, and how many
        records were read (and read twice).

    confluent_client.py quota BOOTSTRAP TOPIC MEGABYTES CLIENT_ID
        Produce MEGABYTES of 1,000-byte records with acks=all as client
        CLIENT_ID, as fast as librdkafka sends them, counting the throttle
        times the broker reports. Prints one JSON line: how many were
        acknowledged, the seconds it took, how many throttles, the longest.

    confluent_client.py transactions BOOTSTRAP TOPIC
        Transactions on TOPIC (4 partitions): four of 20 records, committed
        and aborted in turn; a second producer with the same
        transactional.id fences the first; a transaction that outlives its
        timeout; a consume-transform-produce round that commits a group's
        offsets in the transaction. Prints one JSON line: the records read
        by committed and uncommitted readers (counted by prefix), the
        errors the fenced and the timed-out producers got, what the round
        read and wrote, and what the group reads after it.
    confluent_client.py timestamps BOOTSTRAP TOPIC
        Create TOPIC with message.timestamp.type=LogAppendTime, produce 10
        records stamped 1000 (1970) with acks=all, and read them back
        with check.crcs. Prints one JSON line: the wall clock before and
        after (ms), and the timestamp types and timestamps the delivery
        reports and the consumer gave.
    confluent_client.py codecs BOOTSTRAP TOPIC
        For each codec (none, gzip, snappy, lz4, zstd), create TOPIC-CODEC
        with one partition and produce 40 records with acks=all in one
        batch, their timestamps out of order, then ask ListOffsets for the
        largest timestamp and for the first at or after each timestamp,
        and read the records back with check.crcs. Then create a compacted
        TOPIC-compacted and produce one record without a key and one with.
        Prints one JSON line: per codec the timestamps produced (in offset
        order), what ListOffsets answered and the values read; and the two
        compacted produces' errors.
    confluent_client.py stored BOOTSTRAP TOPIC CODEC
        Create TOPIC with one partition and compression.type CODEC, then
        with each producer codec (none, gzip, snappy, lz4, zstd) produce
        20 records with acks=all in one batch; change the topic to
        producer and produce 20 more with gzip; describe the topic's
        compression.type before and after, ask ListOffsets for the largest
        timestamp and read every record back with check.crcs. Prints one
        JSON line.
    confluent_client.py scram BOOTSTRAP -
        Set SCRAM credentials for three users (one with too few
        iterations), delete one that does not exist, replace one, and
        describe them. Prints one JSON line: each alter's answers (user to
        error name, or null), and each describe's (user to its mechanisms
        and iterations, or the error name).
    confluent_client.py sasl BOOTSTRAP TOPIC USER:PASSWORD [CA]
        Against SASL_PLAINTEXT listeners (SASL_SSL, trusting the CA
        certificates of the PEM file CA, if given): as USER, produce 10 records with
        acks=all by each of PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; give
        the user "carol" a SCRAM-SHA-256 credential with the admin client;
        as carol, read the 30 records in a group that commits, by
        SCRAM-SHA-256. Then try what must fail: carol by PLAIN and by
        SCRAM-SHA-512 (neither is hers), USER with a wrong password, a
        client without SASL (over TLS all the same where the listeners
        are SASL_SSL); delete carol's credential and try her again.
        Prints one JSON line: how many records each mechanism had
        acknowledged, the alter's and delete's answers, how many records
        carol read and committed, and each failed try's error names.
    confluent_client.py acls BOOTSTRAP TOPIC SECRET
        Against SASL_PLAINTEXT listeners with an authorizer, users admin
        (a super user), alice and bob, each with the password NAME-pw: as
        admin, let alice write TOPIC, read every topic whose name starts
        with its first three letters and read the group "readers". bob
        tries to create an ACL; alice and bob produce to TOPIC and SECRET
        (idempotently, acks=all) and list the topics; alice reads TOPIC in
        "readers" and in "others"; admin deletes alice's ACLs and alice
        produces again. Prints one JSON line of what each step got.
    confluent_client.py certificates BOOTSTRAP TOPIC DIR
        Against SSL listeners that require client certificates, with an
        authorizer whose super user is the certificate DIR/admin.pem: as
        admin, let alice (DIR/alice.pem, CN=alice,OU=payments,O=Acme)
        write and read TOPIC (3 partitions) and read the group
        "tls-readers"; alice produces 60 records with acks=all and reads
        them in that group, committing; bob (DIR/bob.pem) and a client
        without a certificate produce one record each. Every client trusts
        DIR/ca.pem. Prints one JSON line: the ACLs' creation answers, the
        principals the ACLs name, how many records alice had acknowledged,
        read and committed, and the delivery errors of bob and of the
        client without a certificate.
    confluent_client.py reauth BOOTSTRAP TOPIC SECONDS
        Against SASL_PLAINTEXT listeners whose logins run out, as user
        alice (password alice-pw): produce to TOPIC with acks=all by
        SCRAM-SHA-256 for SECONDS, a record every 20 ms, then read them
        all back in a group by PLAIN. Prints one JSON line: how many
        records were acknowledged and read, and the errors.
    confluent_client.py steady BOOTSTRAP TOPIC SECONDS GROUP
        For SECONDS, an idempotent producer writes TOPIC while a consumer
        in GROUP (auto-commit, every 5 s by default) reads it; then the
        consumer reads what is left. Prints one JSON line: how many were
        sent, acknowledged, read, and read more than once, the
        rebalances the consumer saw, and the consumer errors.
    confluent_client.py eos BOOTSTRAP TOPIC COUNT SECONDS
        Exactly-once processing: an idempotent producer writes COUNT
        records to TOPIC (4 partitions) over SECONDS while a processor (a
        read_committed consumer in group "eos" and the transactional
        producer "eos-processor") copies what it reads to TOPIC-out (4
        partitions), upper-cased, committing the offsets it read in the
        same transaction. An abortable error aborts and rewinds to the
        group's commits; any other error starts the processor over. It
        stops once its transactions have committed the offsets of every
        record fed (or nothing came for 30 s), then reads TOPIC-out
        read_committed. Prints one JSON line: how many records were fed
        and how many of those the feeder was told failed, how many the
        committed offsets cover, how many distinct records came out, how
        many are missing and how many came out twice, the transactions
        committed and aborted, the restarts and the errors; or, if a call
        has not returned after SECONDS + 60 s, the call it is stuck in.
    confluent_client.py share BOOTSTRAP TOPIC GROUP
        A share group (KIP-932): GROUP set to read from the start
        (share.auto.offset.reset=earliest, IncrementalAlterConfigs on the
        group), 600 records produced to TOPIC, then two share consumers
        in explicit acknowledgement mode read them. The first gives back
        (RELEASE) the first batch it is handed, accepts the second, and
        closes holding the third; the second starts once the first has
        given its batch back. Whoever is handed "share-7" rejects it;
        every other record is accepted. Prints one JSON line: the group's setting as described,
        how many distinct records were accepted and how many were accepted
        twice, how many each consumer accepted, how many released records
        came back (and with which delivery counts), how many the first
        held at its close (but "share-7") and how many of those were
        accepted, how often
        "share-7" was handed out, and the errors.

Exits 0 when it ran; the caller judges the output.
"""
import json
import os
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec


def roundtrip(bootstrap, topic, count, extra=None):
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 2,
        "retry.backoff.ms": 50,
        "message.timeout.ms": 30000,
        **(extra or {}),
    })
    acked, errors = [], []
    start = time.time()

    def done(err, msg):
        if err is None:
            acked.append(msg.value().decode())
        else:
            errors.append(err.name())

    for i in range(count):
        producer.produce(topic, value=f"record-{i}".encode(), callback=done)
        producer.poll(0)
        if i % 10 == 0:
            time.sleep(0.005)
    producer.flush(60)
    produce_seconds = time.time() - start

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "wire-test-reader",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 200,
    })
    metadata = consumer.list_topics(topic, timeout=10)
    consumer.assign([TopicPartition(topic, p, 0) for p in metadata.topics[topic].partitions])
    read = set()
    read_twice = 0
    deadline = time.time() + 30
    idle = 0
    while time.time() < deadline and idle < 5:
        msg = consumer.poll(0.5)
        if msg is None:
            idle += 1 if read >= set(acked) else 0
            continue
        if msg.error():
            continue
        value = msg.value().decode()
        read_twice += value in read
        read.add(value)
    consumer.close()
    lost = sorted(set(acked) - read)
    print(json.dumps({
        "acked": len(acked),
        "read_back": len(set(acked) & read),
        "read_twice": read_twice,
        "lost": lost[:10],
        "errors": sorted(set(errors)),
        "produce_seconds": produce_seconds,
    }))


def timeout(bootstrap, topic, timeout_ms):
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "request.timeout.ms": timeout_ms,
        "message.timeout.ms": timeout_ms * 10,
        "retries": 0,
    })
    result = {}
    start = time.time()

    def done(err, msg):
        result["error"] = err.name() if err else None
        result["seconds"] = time.time() - start

    producer.produce(topic, value=b"slow", callback=done)
    producer.flush(timeout_ms / 1000 * 20)
    print(json.dumps(result))


def produce(bootstrap, topic, count, prefix):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2})
    partitions = len(producer.list_topics(topic, timeout=10).topics[topic].partitions)
    acked = []
    for i in range(count):
        producer.produce(topic, value=f"{prefix}-{i}".encode(), partition=i % partitions,
                         callback=lambda err, msg: err is None and acked.append(1))
        producer.poll(0)
    producer.flush(60)
    print(json.dumps({"acked": len(acked)}))


def group(bootstrap, topic, seconds, group_id, strategy="range"):
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
    }
    if strategy == "consumer":
        # The consumer group protocol (KIP-848): the coordinator assigns.
        config["group.protocol"] = "consumer"
    else:
        config["partition.assignment.strategy"] = strategy
    consumer = Consumer(config)
    # Assignments go to stderr, so a caller's failure message shows them
    # (incremental ones under cooperative-sticky: what is added, what is
    # taken away).
    def assigned(_, partitions):
        print("assigned", [p.partition for p in partitions], file=sys.stderr, flush=True)

    def revoked(_, partitions):
        print("revoked", [p.partition for p in partitions], file=sys.stderr, flush=True)

    consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked)
    deadline = time.time() + seconds
    while time.time() < deadline:
        msg = consumer.poll(0.2)
        if msg is None or msg.error():
            continue
        print(msg.value().decode(), flush=True)
        # Commit after processing: a record is processed once in the group.
        try:
            consumer.commit(message=msg, asynchronous=False)
        except KafkaException as e:
            print("commit refused", e.args[0].name(), file=sys.stderr, flush=True)
    consumer.close()


def regex(bootstrap, prefix):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce(f"{prefix}-a", value=f"a-{i}".encode(), partition=i % 2)
    producer.flush(30)
    # An all-topics Metadata request (librdkafka's has 3 bytes too many).
    listed = f"{prefix}-a" in admin.list_topics(timeout=10).topics
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"{prefix}-readers",
        "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 500,
    })
    assignments = []
    consumer.subscribe([f"^{prefix}-.*"], on_assign=lambda _, parts: assignments.append(
        sorted(f"{p.topic}:{p.partition}" for p in parts)))
    read = set()

    def poll_until(count, seconds):
        deadline = time.time() + seconds
        while len(read) < count and time.time() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                read.add(msg.value().decode())

    poll_until(20, 15)
    admin.create_topics([NewTopic(f"{prefix}-b", 1, 3)])[f"{prefix}-b"].result(10)
    for i in range(10):
        producer.produce(f"{prefix}-b", value=f"b-{i}".encode())
    producer.flush(30)
    poll_until(30, 20)
    consumer.close()
    print(json.dumps({"listed": listed, "assignments": assignments, "read": len(read)}))


def static(bootstrap, topic, group_id, protocol="classic"):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    read = []
    events = {}
    errors = {}
    names = {}

    def consumer(name, instance):
        events[name], errors[name] = [], []
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "group.instance.id": instance,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
        if protocol == "consumer":
            # The session timeout is the coordinator's in this protocol.
            config["group.protocol"] = "consumer"
        else:
            config["session.timeout.ms"] = 10000
        c = Consumer(config)
        c.subscribe(
            [topic],
            on_assign=lambda _, ps: events[name].append(["assigned", sorted(p.partition for p in ps)]),
            on_revoke=lambda _, ps: events[name].append(["revoked", sorted(p.partition for p in ps)]),
        )
        names[id(c)] = name
        return c

    def poll(consumers, until, seconds):
        deadline = time.time() + seconds
        while not until() and time.time() < deadline:
            for c in consumers:
                msg = c.poll(0.05)
                if msg is None:
                    continue
                if msg.error():
                    errors[names[id(c)]].append(msg.error().name())
                    continue
                read.append(msg.value().decode())
                # Processed, then committed: a record is read once in the
                # group unless a member is fenced before its commit.
                try:
                    c.commit(message=msg, asynchronous=False)
                except KafkaException as e:
                    errors[names[id(c)]].append("commit " + e.args[0].name())

    def assigned(name):
        return any(e[0] == "assigned" and e[1] for e in events[name])

    def produce(prefix, count):
        for i in range(count):
            producer.produce(topic, value=f"{prefix}-{i}".encode(), partition=i % 4)
        producer.flush(30)

    def describe():
        group = admin.describe_consumer_groups([group_id])[group_id].result(10)
        return sorted(m.group_instance_id for m in group.members)

    a, b = consumer("a", "a"), consumer("b", "b")
    poll([a, b], lambda: assigned("a") and assigned("b"), 20)
    produce("first", 100)
    poll([a, b], lambda: len(read) >= 100, 20)
    # A static member closes without leaving: its place is kept.
    a.close()
    away = describe()
    a2 = consumer("a2", "a")
    poll([a2, b], lambda: assigned("a2"), 20)
    produce("second", 100)
    poll([a2, b], lambda: len(read) >= 200, 20)
    # A second process with the same instance: in the classic protocol it
    # fences the first; in the consumer protocol it is refused while the
    # first is there.
    a3 = consumer("a3", "a")
    if protocol == "consumer":
        poll([a3, a2, b], lambda: errors["a3"], 20)
    else:
        poll([a3, a2, b], lambda: assigned("a3") and "_FATAL" in errors["a2"], 20)
    before_close = json.loads(json.dumps(events))
    for c in (a3, b, a2):
        c.close()
    print(json.dumps({
        "events": before_close,
        "errors": errors,
        "described_while_away": away,
        "read": len(set(read)),
        "read_twice": len(read) - len(set(read)),
    }))


def transactions(bootstrap, topic):
    def producer(txn_id, **extra):
        p = Producer({
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "linger.ms": 5,
            **extra,
        })
        p.init_transactions(30)
        return p

    def write(p, prefix, count, partitions=4, topic=topic):
        for i in range(count):
            p.produce(topic, f"{prefix}-{i}".encode(), partition=i % partitions)
        # Sent before the end: an abort would drop what is still queued.
        p.flush(30)

    def read(isolation, topic=topic, partitions=4, quiet=3.0):
        c = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        })
        c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
        counts = {}
        last = time.time()
        while time.time() - last < quiet:
            msg = c.poll(0.1)
            if msg is None or msg.error():
                continue
            last = time.time()
            prefix = msg.value().decode().rsplit("-", 1)[0]
            counts[prefix] = counts.get(prefix, 0) + 1
        c.close()
        return counts

    def fails(action):
        try:
            action()
            return None
        except KafkaException as e:
            return {"name": e.args[0].name(), "fatal": e.args[0].fatal()}

    first = producer("tx-main")
    for n, commit in enumerate([True, False, True, False]):
        first.begin_transaction()
        write(first, f"t{n}", 20)
        (first.commit_transaction if commit else first.abort_transaction)(30)

    # A new instance with the same transactional id fences the old one.
    second = producer("tx-main")

    def zombie():
        first.begin_transaction()
        try:
            write(first, "zombie", 4)
        except KafkaException as e:
            # Once the fence has come back for the partitions the first
            # message added, librdkafka refuses further messages with a
            # bare _FATAL; the commit below reports the fence itself.
            if e.args[0].code() != KafkaError._FATAL:
                raise
        first.commit_transaction(30)

    fenced = fails(zombie)
    second.begin_transaction()
    write(second, "second", 8)
    second.commit_transaction(30)

    # A transaction that outlives its timeout is aborted, its producer fenced.
    slow = producer("tx-slow", **{"transaction.timeout.ms": 1500})
    slow.begin_transaction()
    write(slow, "slow", 12)
    time.sleep(4)
    timed_out = fails(lambda: slow.commit_transaction(30))

    # Consume, transform, produce: the output and the consumed offsets
    # commit together.
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "transform",
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    seen = []
    deadline = time.time() + 30
    while len(seen) < 48 and time.time() < deadline:
        msg = consumer.poll(0.1)
        if msg is not None and not msg.error():
            seen.append(msg.value().decode())
    transform = producer("tx-transform")
    transform.begin_transaction()
    for v in seen:
        transform.produce(f"{topic}-out", v.upper().encode(), partition=0)
    assignment = consumer.assignment()
    transform.send_offsets_to_transaction(
        consumer.position(assignment), consumer.consumer_group_metadata(), 30)
    transform.commit_transaction(30)
    consumer.close()
    # The group resumes after what the transaction consumed.
    again = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "transform",
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
    })
    again.subscribe([topic])
    read_again = 0
    deadline = time.time() + 6
    while time.time() < deadline:
        msg = again.poll(0.1)
        if msg is not None and not msg.error():
            read_again += 1
    again.close()

    print(json.dumps({
        "committed": read("read_committed"),
        "uncommitted": read("read_uncommitted"),
        "fenced": fenced,
        "timed_out": timed_out,
        "transformed": len(seen),
        "out": read("read_committed", f"{topic}-out", 1),
        "read_again": read_again,
    }))


def read_partition(bootstrap, topic, group_id, count, take):
    """Reads partition 0 of TOPIC from its start with check.crcs, up to
    COUNT records or 20 s: TAKE of each record, and the errors met."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "check.crcs": True,
    })
    consumer.assign([TopicPartition(topic, 0, 0)])
    read, errors = [], []
    deadline = time.time() + 20
    while len(read) < count and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            errors.append(msg.error().name())
            continue
        read.append(take(msg))
    consumer.close()
    return read, errors


def timestamps(bootstrap, topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"message.timestamp.type": "LogAppendTime"}
    for f in admin.create_topics([NewTopic(topic, 1, config=config)]).values():
        f.result()
    before = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    delivered = []
    for i in range(10):
        producer.produce(topic, value=f"stamped-{i}".encode(), timestamp=1000,
                         callback=lambda err, msg: delivered.append(msg.timestamp()))
    producer.flush(30)
    read, errors = read_partition(bootstrap, topic, "timestamps", 10, lambda m: m.timestamp())
    print(json.dumps({
        "before": before,
        "after": int(time.time() * 1000),
        "delivered": delivered,
        "read": read,
        "errors": errors,
    }))


def codecs(bootstrap, topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = ["none", "gzip", "snappy", "lz4", "zstd"]
    topics = [f"{topic}-{codec}" for codec in names]
    for f in admin.create_topics([NewTopic(t, 1) for t in topics]).values():
        f.result()
    base = int(time.time() * 1000) - 60000
    # Out of order within the batch: the largest is neither first nor last.
    stamps = [base + (i * 7) % 40 for i in range(40)]
    out = {}
    for codec, t in zip(names, topics):
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                             "compression.type": codec, "linger.ms": 100})
        errors = []
        for i, stamp in enumerate(stamps):
            producer.produce(t, value=f"{codec}-{i}".encode(), partition=0, timestamp=stamp,
                             on_delivery=lambda err, _m: err and errors.append(err.name()))
        producer.flush(30)
        tp = TopicPartition(t, 0)
        found = {}
        specs = [("max", OffsetSpec.max_timestamp())] + [
            (str(stamp), OffsetSpec.for_timestamp(stamp)) for stamp in sorted(set(stamps))]
        for name, spec in specs:
            r = admin.list_offsets({tp: spec})[tp].result(10)
            found[name] = [r.offset, r.timestamp]
        read, read_errors = read_partition(
            bootstrap, t, "codecs", len(stamps),
            lambda m: [m.offset(), m.value().decode(), m.timestamp()[1]])
        errors += read_errors
        out[codec] = {"stamps": stamps, "found": found, "read": read, "errors": errors}
    compacted = f"{topic}-compacted"
    config = {"cleanup.policy": "compact"}
    for f in admin.create_topics([NewTopic(compacted, 1, config=config)]).values():
        f.result()
    answers = {}
    for name, key in (("keyless", None), ("keyed", b"k")):
        # One record per producer, so that each is a batch of its own.
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                             "enable.idempotence": False})
        producer.produce(compacted, key=key, value=b"v", partition=0,
                         on_delivery=lambda err, _m, n=name: answers.update(
                             {n: err.name() if err else None}))
        producer.flush(30)
    out["compacted"] = answers
    print(json.dumps(out))


def stored(bootstrap, topic, codec):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"compression.type": codec}
    for f in admin.create_topics([NewTopic(topic, 1, config=config)]).values():
        f.result()

    def described():
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        entry = admin.describe_configs([resource])[resource].result(10)["compression.type"]
        return [entry.value, entry.source]

    out = {"described": described()}
    base = int(time.time() * 1000) - 60000
    errors, sent = [], []

    def produce(producer_codec, n):
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                             "compression.type": producer_codec, "linger.ms": 100})
        for _ in range(n):
            i = len(sent)
            sent.append(f"{producer_codec}-{i}")
            producer.produce(topic, value=sent[-1].encode(), partition=0, timestamp=base + i,
                             on_delivery=lambda err, _m: err and errors.append(err.name()))
        producer.flush(30)

    for producer_codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
        produce(producer_codec, 20)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"compression.type": "producer"})
    for f in admin.alter_configs([resource]).values():
        f.result(10)
    out["described_after"] = described()
    produce("gzip", 20)
    tp = TopicPartition(topic, 0)
    r = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(10)
    out["max_timestamp"] = [r.offset, r.timestamp - base]
    read, read_errors = read_partition(bootstrap, topic, "stored", len(sent),
                                       lambda m: m.value().decode())
    out["sent"], out["read"], out["errors"] = sent, read, errors + read_errors
    print(json.dumps(out))


def scram(bootstrap):
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion, UserScramCredentialUpsertion)
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def answers(futures):
        out = {}
        for user, f in futures.items():
            try:
                r = f.result(10)
            except KafkaException as e:
                out[user] = e.args[0].name()
                continue
            out[user] = None if r is None else sorted(
                [i.mechanism.name, i.iterations] for i in r.scram_credential_infos)
        return out

    def upsert(user, mechanism, iterations):
        info = ScramCredentialInfo(mechanism, iterations)
        return UserScramCredentialUpsertion(user, info, b"password", b"salt")

    sha256, sha512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
    first = answers(admin.alter_user_scram_credentials([
        upsert("alice", sha256, 8192),
        upsert("bob", sha512, 4096),
        upsert("carol", sha256, 100),
        UserScramCredentialDeletion("dave", sha256),
    ]))
    second = answers(admin.alter_user_scram_credentials([
        upsert("alice", sha512, 10000),
        upsert("bob", sha512, 16384),
    ]))
    # Asked for every user, the client answers with one future of them all.
    everyone = admin.describe_user_scram_credentials().result(10)
    described_all = {user: sorted([i.mechanism.name, i.iterations]
                                  for i in d.scram_credential_infos)
                     for user, d in everyone.items()}
    described_some = answers(admin.describe_user_scram_credentials(["alice", "carol"]))
    print(json.dumps({"first": first, "second": second,
                      "all": described_all, "some": described_some}))


def reauth(bootstrap, topic, seconds):
    def auth(mechanism):
        return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": mechanism, "sasl.username": "alice",
                "sasl.password": "alice-pw"}

    errors, acked = [], []
    p = Producer({**auth("SCRAM-SHA-256"), "acks": "all"})
    deadline = time.time() + seconds
    n = 0
    while time.time() < deadline:
        p.produce(topic, f"r-{n}".encode(),
                  on_delivery=lambda err, m: errors.append(err.name()) if err
                  else acked.append(m.value()))
        n += 1
        p.poll(0.02)
    p.flush(30)
    c = Consumer({**auth("PLAIN"), "group.id": "reauth-readers",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    read, deadline = set(), time.time() + 30
    while len(read) < len(acked) and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            errors.append(m.error().name())
        else:
            read.add(m.value())
    c.close()
    print(json.dumps({"acked": len(acked), "read": len(read & set(acked)), "errors": errors}))


def acls(bootstrap, topic, secret):
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                       AclPermissionType, ResourcePatternType, ResourceType)

    def auth(user):
        return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": user,
                "sasl.password": f"{user}-pw"}

    def error(future):
        try:
            future.result(10)
            return None
        except KafkaException as e:
            return e.args[0].name()

    def allow(resource_type, name, pattern, operation):
        return AclBinding(resource_type, name, pattern, "User:alice", "*", operation,
                          AclPermissionType.ALLOW)

    out = {}
    admin = AdminClient(auth("admin"))
    bindings = [
        allow(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, AclOperation.WRITE),
        allow(ResourceType.TOPIC, topic[:3], ResourcePatternType.PREFIXED, AclOperation.READ),
        allow(ResourceType.GROUP, "readers", ResourcePatternType.LITERAL, AclOperation.READ),
    ]
    out["created"] = [error(f) for f in admin.create_acls(bindings).values()]
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    out["described"] = sorted(b.name for b in admin.describe_acls(everything).result(10))
    bob_admin = AdminClient(auth("bob"))
    out["bob creates"] = error(bob_admin.create_acls(bindings[:1])[bindings[0]])

    def produce(user, to):
        p = Producer({**auth(user), "acks": "all", "enable.idempotence": True})
        errors = []
        p.produce(to, f"from {user}".encode(), partition=0,
                  on_delivery=lambda err, _m: errors.append(err.name() if err else None))
        p.flush(15)
        return errors

    out["produced"] = {f"{user} to {to}": produce(user, to)
                       for user in ["alice", "bob"] for to in [topic, secret]}
    out["listed"] = {user: sorted(AdminClient(auth(user)).list_topics(timeout=10).topics)
                     for user in ["alice", "bob"]}

    def read(group):
        c = Consumer({**auth("alice"), "group.id": group, "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        got, deadline = None, time.time() + 20
        while got is None and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None:
                got = m.error().name() if m.error() else m.value().decode()
        c.close()
        return got

    out["read"] = {group: read(group) for group in ["readers", "others"]}
    alices = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice",
                              None, AclOperation.ANY, AclPermissionType.ANY)
    out["deleted"] = len(admin.delete_acls([alices])[alices].result(10))
    out["alice again"] = produce("alice", topic)
    print(json.dumps(out))


def sasl(bootstrap, topic, user, password, ca=None):
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion, UserScramCredentialUpsertion)

    tls = {"ssl.ca.location": ca} if ca else {}

    def auth(mechanism, name, secret):
        return {"bootstrap.servers": bootstrap,
                "security.protocol": "SASL_SSL" if ca else "SASL_PLAINTEXT",
                "sasl.mechanisms": mechanism, "sasl.username": name, "sasl.password": secret,
                **tls}

    out = {"acked": {}}
    for i, mechanism in enumerate(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]):
        p = Producer({**auth(mechanism, user, password), "acks": "all"})
        acked = []
        for n in range(10):
            p.produce(topic, f"{mechanism}-{n}".encode(), partition=(i + n) % 3,
                      on_delivery=lambda err, _m: acked.append(err is None))
        p.flush(30)
        out["acked"][mechanism] = sum(acked)

    admin = AdminClient(auth("SCRAM-SHA-512", user, password))

    def answer(futures):
        try:
            futures["carol"].result(10)
            return None
        except KafkaException as e:
            return e.args[0].name()

    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    out["alter"] = answer(admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("carol", info, b"carols-secret")]))

    c = Consumer({**auth("SCRAM-SHA-256", "carol", "carols-secret"), "group.id": "sasl-readers",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    read, errors, deadline = set(), [], time.time() + 30
    while len(read) < 30 and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            errors.append(m.error().name())
            continue
        read.add(m.value().decode())
        c.commit(message=m, asynchronous=False)
    committed = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
    out["carol_read"] = len(read)
    out["carol_committed"] = sum(max(tp.offset, 0) for tp in committed)
    out["carol_errors"] = errors
    c.close()

    import logging
    import re

    class Lines(logging.Handler):
        def __init__(self):
            super().__init__()
            self.lines = []

        def emit(self, record):
            self.lines.append(record.getMessage())

    def refused(conf):
        # Why librdkafka's connections failed while it tried a metadata
        # request: the broker's message for a failed authentication, or
        # the rest of the reason it logs, without its timings.
        lines = Lines()
        logger = logging.getLogger(f"refused-{len(out['refused'])}")
        logger.addHandler(lines)
        logger.propagate = False
        a = AdminClient({**conf, "logger": logger})
        try:
            a.list_topics(timeout=2)
            failed = None
        except KafkaException as e:
            failed = e.args[0].str()
        # The log lines come through polls: wait for a failure's (on a
        # loaded machine it may come after the metadata request's 2 s).
        reasons, deadline = set(), time.time() + 10
        while not reasons and time.time() < deadline:
            a.poll(0.1)
            for line in lines.lines:
                m = re.search(r"bootstrap: (.*?) \(after", line)
                if m and "FAIL" in line:
                    reasons.add(m.group(1).replace("SASL authentication error: ", ""))
        # A connection the broker closes is, now and then on a loaded
        # machine, not logged at all (librdkafka 2.x): then the metadata
        # request's own error is what says it was refused.
        return sorted(reasons) or [f"metadata: {failed}"]

    out["refused"] = {}
    for name, conf in [
        ("carol by PLAIN", auth("PLAIN", "carol", "carols-secret")),
        ("carol by SCRAM-SHA-512", auth("SCRAM-SHA-512", "carol", "carols-secret")),
        ("wrong password", auth("SCRAM-SHA-256", user, password + "x")),
        ("no SASL", {"bootstrap.servers": bootstrap,
                     "security.protocol": "SSL" if ca else "PLAINTEXT", **tls}),
    ]:
        out["refused"][name] = refused(conf)
    out["delete"] = answer(admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)]))
    out["refused"]["carol deleted"] = refused(auth("SCRAM-SHA-256", "carol", "carols-secret"))
    print(json.dumps(out))


def certificates(bootstrap, topic, pki):
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                       AclPermissionType, ResourcePatternType, ResourceType)

    def ssl(name=None):
        conf = {"bootstrap.servers": bootstrap, "security.protocol": "SSL",
                "ssl.ca.location": f"{pki}/ca.pem"}
        if name:
            conf["ssl.certificate.location"] = f"{pki}/{name}.pem"
            conf["ssl.key.location"] = f"{pki}/{name}.key"
        return conf

    alice = "User:CN=alice,OU=payments,O=Acme"
    allow = AclPermissionType.ALLOW
    admin = AdminClient(ssl("admin"))
    bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, alice, "*",
                           op, allow) for op in (AclOperation.WRITE, AclOperation.READ)]
    bindings.append(AclBinding(ResourceType.GROUP, "tls-readers", ResourcePatternType.LITERAL,
                               alice, "*", AclOperation.READ, allow))
    out = {"created": [f.result(10) for f in admin.create_acls(bindings).values()]}
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    out["principals"] = sorted({b.principal for b in admin.describe_acls(every).result(10)})

    def produce(conf, prefix, count):
        p = Producer({**conf, "acks": "all", "message.timeout.ms": 5000})
        results = []
        for i in range(count):
            p.produce(topic, f"{prefix}-{i}".encode(), partition=i % 3,
                      on_delivery=lambda err, _m: results.append(err.name() if err else None))
        p.flush(30)
        return results

    out["alice acked"] = produce(ssl("alice"), "alice", 60).count(None)
    c = Consumer({**ssl("alice"), "group.id": "tls-readers", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    read, deadline = set(), time.time() + 30
    while len(read) < 60 and time.time() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        read.add(m.value().decode())
        c.commit(message=m, asynchronous=False)
    committed = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
    c.close()
    out["alice read"] = len(read)
    out["alice committed"] = sum(max(tp.offset, 0) for tp in committed)
    out["bob"] = sorted(set(produce(ssl("bob"), "bob", 3)))
    out["no certificate"] = sorted(set(produce(ssl(), "nobody", 1)))
    print(json.dumps(out))


def steady(bootstrap, topic, seconds, group_id):
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    acked = [0]

    def done(err, _msg):
        if err is None:
            acked[0] += 1

    rebalances = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic],
                       on_assign=lambda _c, ps: rebalances.append(("assigned", len(ps))),
                       on_revoke=lambda _c, ps: rebalances.append(("revoked", len(ps))))
    seen, twice, errors = set(), 0, []

    def take(msg):
        nonlocal twice
        if msg is None:
            return False
        if msg.error() is not None:
            errors.append(msg.error().name())
            return True
        value = int(msg.value())
        twice += value in seen
        seen.add(value)
        return True

    sent = 0
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(20):
            producer.produce(topic, value=str(sent).encode(), on_delivery=done)
            sent += 1
        producer.poll(0)
        while take(consumer.poll(0.005)):
            pass
    producer.flush(30)
    deadline = time.time() + 30
    while len(seen) < acked[0] and time.time() < deadline:
        take(consumer.poll(0.1))
    consumer.close()
    print(json.dumps({"sent": sent, "acked": acked[0], "read": len(seen),
                      "read_twice": twice, "rebalances": rebalances, "errors": errors}))


def eos(bootstrap, topic, count, seconds):
    out = f"{topic}-out"
    feeder = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                       "linger.ms": 5})
    state = {"call": "starting"}
    feed_failed = [0]

    def fed_one(err, _msg):
        feed_failed[0] += err is not None

    def stuck():
        print(json.dumps({"error": f"stuck in {state['call']}"}), flush=True)
        os._exit(0)

    watchdog = threading.Timer(seconds + 60, stuck)
    watchdog.daemon = True
    watchdog.start()

    def call(name, action):
        state["call"] = name
        return action()

    def processor():
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos",
                             "isolation.level": "read_committed",
                             "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe([topic])
        producer = Producer({"bootstrap.servers": bootstrap,
                             "transactional.id": "eos-processor", "linger.ms": 5})
        call("init_transactions", lambda: producer.init_transactions(60))
        return consumer, producer

    consumer, producer = processor()
    committed = aborted = restarts = 0
    errors = []
    fed = 0
    # The offsets the last transaction committed, by partition: every
    # record fed is consumed once they sum to COUNT.
    consumed = {}
    start = time.time()
    quiet_since = None
    while True:
        due = min(count, int(count * (time.time() - start) / seconds))
        while fed < due:
            feeder.produce(topic, f"r{fed}".encode(), partition=fed % 4,
                           on_delivery=fed_one)
            fed += 1
        feeder.poll(0)
        if fed == count and sum(consumed.values()) == count:
            break
        batch = [m for m in call("consume", lambda: consumer.consume(500, 0.2))
                 if m.error() is None]
        if not batch:
            quiet_since = quiet_since or time.time()
            if fed == count and time.time() - quiet_since > 30:
                break
            continue
        quiet_since = None
        try:
            call("begin_transaction", producer.begin_transaction)
            for m in batch:
                producer.produce(out, m.value().upper(), partition=m.partition())
            positions = consumer.position(consumer.assignment())
            call("send_offsets_to_transaction", lambda: producer.send_offsets_to_transaction(
                positions, consumer.consumer_group_metadata(), 60))
            call("commit_transaction", lambda: producer.commit_transaction(60))
            committed += 1
            consumed.update({tp.partition: tp.offset for tp in positions if tp.offset >= 0})
        except KafkaException as e:
            errors.append(e.args[0].name())
            if e.args[0].txn_requires_abort():
                call("abort_transaction", lambda: producer.abort_transaction(60))
                aborted += 1
                for tp in consumer.committed(consumer.assignment(), 30):
                    consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
            else:
                consumer.close()
                consumer, producer = processor()
                restarts += 1
    consumer.close()
    call("flush", lambda: feeder.flush(30))
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-check",
                       "isolation.level": "read_committed", "enable.auto.commit": False})
    reader.assign([TopicPartition(out, p, 0) for p in range(4)])
    times = {}
    last = time.time()
    # A second of quiet once every record is there; ten before.
    while time.time() - last < (1 if len(times) >= count else 10):
        msg = call("poll", lambda: reader.poll(0.1))
        if msg is None or msg.error() is not None:
            continue
        last = time.time()
        value = msg.value().decode()
        times[value] = times.get(value, 0) + 1
    reader.close()
    watchdog.cancel()
    print(json.dumps({
        "fed": fed,
        "feed_failed": feed_failed[0],
        "consumed": sum(consumed.values()),
        "out": len(times),
        "missing": sum(f"R{i}" not in times for i in range(count)),
        "twice": sum(n > 1 for n in times.values()),
        "committed": committed,
        "aborted": aborted,
        "restarts": restarts,
        "errors": errors,
    }))


def share(bootstrap, topic, group_id):
    from confluent_kafka import AcknowledgeType, ShareConsumer
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry,
                                       ConfigResource, ResourceType)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    setting = ConfigEntry("share.auto.offset.reset", "earliest",
                          incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group_id,
                              incremental_configs=[setting])
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(10)
    described = admin.describe_configs([ConfigResource(ResourceType.GROUP, group_id)])
    reset = [c.value for f in described.values()
             for name, c in f.result(10).items() if name == "share.auto.offset.reset"]
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(10)
    sent = produce_quietly(bootstrap, topic, 600, "share")
    lock = threading.Lock()
    accepted = {}
    per_consumer = {"a": 0, "b": 0}
    released = set()
    came_back = {}
    rejected_again = []
    held = []
    errors = []

    def consume(name):
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group_id,
                           "share.acknowledgement.mode": "explicit"})
        c.subscribe([topic])
        batches = 0
        deadline = time.time() + 40
        while time.time() < deadline:
            with lock:
                if len(accepted) >= 599:
                    break
            try:
                batch = c.poll(1)
            except KafkaException as e:
                errors.append(str(e))
                continue
            if batch:
                batches += 1
            if name == "a" and batches == 3:
                # Leaves holding its third batch: the close gives it back.
                with lock:
                    held.extend(v for v in (m.value().decode() for m in batch
                                            if not m.error()) if v != "share-7")
                break
            for m in batch:
                if m.error():
                    errors.append(str(m.error()))
                    continue
                value = m.value().decode()
                with lock:
                    if value in released:
                        came_back[value] = m.delivery_count()
                    if value == "share-7":
                        if value in accepted or rejected_again:
                            rejected_again.append(value)
                        c.acknowledge(m, AcknowledgeType.REJECT)
                        rejected_again.append("rejected")
                        continue
                    if name == "a" and batches == 1:
                        released.add(value)
                        c.acknowledge(m, AcknowledgeType.RELEASE)
                        continue
                    accepted[value] = accepted.get(value, 0) + 1
                    per_consumer[name] += 1
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            if batch:
                c.commit_sync(10)
        c.close()

    # "b" starts once "a" has given its first batch back.
    threads = [threading.Thread(target=consume, args=(n,)) for n in ("a", "b")]
    threads[0].start()
    deadline = time.time() + 20
    while time.time() < deadline:
        with lock:
            if released:
                break
        time.sleep(0.05)
    threads[1].start()
    for t in threads:
        t.join()
    print(json.dumps({
        "reset": reset,
        "sent": sent,
        "accepted": len(accepted),
        "accepted_twice": sum(1 for n in accepted.values() if n > 1),
        "per_consumer": per_consumer,
        "released": len(released),
        "came_back": len([v for v in released if v in accepted]),
        "held_at_close": len(held),
        "held_then_accepted": len([v for v in held if v in accepted]),
        "delivery_counts": sorted(set(str(d) for d in came_back.values())),
        "rejections": len(rejected_again),
        "errors": errors[:5],
    }))


def quota(bootstrap, topic, megabytes, client_id):
    throttles = []
    p = Producer({
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "acks": "all",
        "linger.ms": 5,
        "throttle_cb": lambda event: throttles.append(event.throttle_time),
    })
    acked = []
    value = b"q" * 1000
    started = time.monotonic()
    for _ in range(megabytes * 1000):
        while True:
            try:
                p.produce(topic, value, on_delivery=lambda err, _m: acked.append(err is None))
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)
    print(json.dumps({
        "acked": sum(acked),
        "seconds": time.monotonic() - started,
        "throttles": sum(1 for t in throttles if t > 0),
        "longest_ms": int(max(throttles, default=0) * 1000),
    }))


def produce_quietly(bootstrap, topic, count, prefix):
    """Produces COUNT records PREFIX-0.. round-robin with acks=all; how
    many were acknowledged."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    acked = []
    partitions = len(p.list_topics(topic, timeout=10).topics[topic].partitions)
    for i in range(count):
        p.produce(topic, f"{prefix}-{i}".encode(), partition=i % partitions,
                  on_delivery=lambda err, _m: acked.append(err is None))
    p.flush(30)
    return sum(acked)


if __name__ == "__main__":
    mode, bootstrap, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "regex":
        regex(bootstrap, topic)
    elif mode == "transactions":
        transactions(bootstrap, topic)
    elif mode == "static":
        static(bootstrap, topic, *sys.argv[4:6])
    elif mode == "produce":
        produce(bootstrap, topic, int(sys.argv[4]), sys.argv[5])
    elif mode == "group":
        group(bootstrap, topic, float(sys.argv[4]), sys.argv[5], *sys.argv[6:7])
    elif mode == "steady":
        steady(bootstrap, topic, float(sys.argv[4]), sys.argv[5])
    elif mode == "share":
        share(bootstrap, topic, sys.argv[4])
    elif mode == "timestamps":
        timestamps(bootstrap, topic)
    elif mode == "codecs":
        codecs(bootstrap, topic)
    elif mode == "stored":
        stored(bootstrap, topic, sys.argv[4])
    elif mode == "scram":
        scram(bootstrap)
    elif mode == "reauth":
        reauth(bootstrap, topic, float(sys.argv[4]))
    elif mode == "acls":
        acls(bootstrap, topic, sys.argv[4])
    elif mode == "sasl":
        sasl(bootstrap, topic, *sys.argv[4].split(":", 1), *sys.argv[5:6])
    elif mode == "certificates":
        certificates(bootstrap, topic, sys.argv[4])
    elif mode == "eos":
        eos(bootstrap, topic, int(sys.argv[4]), float(sys.argv[5]))
    elif mode == "quota":
        quota(bootstrap, topic, int(sys.argv[4]), sys.argv[5])
    elif mode == "idempotent":
        roundtrip(bootstrap, topic, int(sys.argv[4]), {
            "enable.idempotence": True,
            "request.timeout.ms": int(sys.argv[5]),
        })
    else:
        {"roundtrip": roundtrip, "timeout": timeout}[mode](bootstrap, topic, int(sys.argv[4]))
