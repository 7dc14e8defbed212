"""An aiokafka client for broker-sim's wire tests: another independent
implementation of the protocol (asyncio, pure Python, neither librdkafka
nor kafka-python), with an idempotent producer.

    aiokafka_client.py all BOOTSTRAP TOPIC COUNT
        Create TOPIC with 4 partitions through the admin client; let two
        consumers of one group join and wait until each holds two of
        its partitions; produce COUNT keyed records idempotently with
        acks=all; let the two read until every record is in, committing
        as they go; then read again in the same group with a third
        consumer (nothing should be left); delete the topic. Prints one
        JSON line; the caller judges it.
    aiokafka_client.py transactions BOOTSTRAP TOPIC
        On TOPIC (2 partitions): three transactions of 10 records,
        committed, aborted and committed; then a consume-transform-produce
        round in group "aiokafka-transform" whose output and consumed
        offsets commit in one transaction. Prints one JSON line: what
        committed and uncommitted readers read (counted by prefix), what
        the round wrote, and what the group reads after it.

The group is stable before the first record exists, so no rebalance
falls between a read and its commit: every record is read exactly once.
Exits 0 when it ran.
"""
import asyncio
import json
import sys
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

GROUP = "aiokafka-readers"


def consumer(bootstrap, topic, name, group=GROUP):
    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=name,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=200,
    )


async def until(condition, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline and not condition():
        await asyncio.sleep(0.05)
    return condition()


async def read(member, values, want, seconds):
    """Reads into `values` until `want` are in (all members' together),
    committing after each batch."""
    deadline = time.time() + seconds
    while time.time() < deadline and len(values) < want:
        batches = await member.getmany(timeout_ms=200)
        for records in batches.values():
            values.extend(r.value.decode() for r in records)
        if batches:
            await member.commit()


async def all_apis(bootstrap, topic, count):
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    created = await admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=3)])
    await admin.close()

    first, second = consumer(bootstrap, topic, "reader-1"), consumer(bootstrap, topic, "reader-2")
    await first.start()
    await second.start()
    # aiokafka joins and rebalances in a task of its own, without a poll.
    def split():
        return len(first.assignment()) == 2 and len(second.assignment()) == 2

    stable = await until(split, 30)
    assignments = [sorted(tp.partition for tp in m.assignment()) for m in (first, second)]

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    sent = [await producer.send(topic, f"record-{i}".encode(), key=f"key-{i}".encode())
            for i in range(count)]
    acked, errors, partitions = [], [], set()
    for i, future in enumerate(sent):
        try:
            metadata = await future
            acked.append(f"record-{i}")
            partitions.add(metadata.partition)
        except Exception as e:  # the caller reports what failed
            errors.append(type(e).__name__)
    await producer.stop()

    values = []
    await asyncio.gather(read(first, values, len(acked), 30), read(second, values, len(acked), 30))
    await first.stop()
    await second.stop()

    third = consumer(bootstrap, topic, "reader-3")
    await third.start()
    again = []
    await read(third, again, 1, 3)
    await third.stop()

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    deleted = await admin.delete_topics([topic])
    left = topic in await admin.list_topics()
    await admin.close()
    print(json.dumps({
        "created_errors": [e[1] for e in created.topic_errors],
        "stable": stable,
        "assignments": assignments,
        "acked": len(acked),
        "partitions_written": len(partitions),
        "errors": sorted(set(errors)),
        "read_back": len(set(acked) & set(values)),
        "read_twice": len(values) - len(set(values)),
        "after_commit": len(again),
        "deleted_errors": [e[1] for e in deleted.topic_error_codes],
        "topic_left": left,
    }))


async def read_all(bootstrap, topic, isolation, partitions):
    """Every record of `topic` from the start, counted by prefix."""
    reader = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                              enable_auto_commit=False)
    await reader.start()
    reader.assign([TopicPartition(topic, p) for p in range(partitions)])
    await reader.seek_to_beginning()
    counts, idle = {}, 0
    while idle < 10:
        batches = await reader.getmany(timeout_ms=200)
        idle = 0 if batches else idle + 1
        for records in batches.values():
            for r in records:
                prefix = r.value.decode().rsplit("-", 1)[0]
                counts[prefix] = counts.get(prefix, 0) + 1
    await reader.stop()
    return counts


async def transactions(bootstrap, topic):
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aiokafka-tx")
    await producer.start()
    for n, commit in enumerate([True, False, True]):
        await producer.begin_transaction()
        for i in range(10):
            await producer.send_and_wait(topic, f"t{n}-{i}".encode(), partition=i % 2)
        if commit:
            await producer.commit_transaction()
        else:
            await producer.abort_transaction()

    group = "aiokafka-transform"
    source = consumer(bootstrap, topic, "transform", group)
    await source.start()
    seen, positions = [], {}
    deadline = time.time() + 30
    while len(seen) < 20 and time.time() < deadline:
        for tp, records in (await source.getmany(timeout_ms=200)).items():
            seen.extend(r.value.decode() for r in records)
            positions[tp] = records[-1].offset + 1
    await producer.begin_transaction()
    for v in seen:
        await producer.send_and_wait(f"{topic}-out", v.upper().encode(), partition=0)
    await producer.send_offsets_to_transaction(positions, group)
    await producer.commit_transaction()
    await producer.stop()
    await source.stop()

    again = consumer(bootstrap, topic, "transform-again", group)
    values = []
    await again.start()
    await read(again, values, 1, 4)
    await again.stop()
    print(json.dumps({
        "committed": await read_all(bootstrap, topic, "read_committed", 2),
        "uncommitted": await read_all(bootstrap, topic, "read_uncommitted", 2),
        "out": await read_all(bootstrap, f"{topic}-out", "read_committed", 1),
        "read_again": len(values),
    }))


if __name__ == "__main__":
    mode, bootstrap, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "all":
        asyncio.run(all_apis(bootstrap, topic, int(sys.argv[4])))
    elif mode == "transactions":
        asyncio.run(transactions(bootstrap, topic))
    else:
        sys.exit(f"unknown mode {mode}")
