// A @platformatic/kafka client (a protocol implementation in JavaScript,
// of its own, which sends nothing older than current brokers' versions:
// FindCoordinator v4+, OffsetFetch v8+, Fetch v12+) for broker-sim's wire
// tests. It is an ES module, which NODE_PATH does not reach: the package
// is found in the folder NODE_PATH names (npm's global one).
//
//     node platformatic_client.mjs groups BOOTSTRAP TOPIC COUNT
//
// Creates TOPIC (4 partitions, 3 replicas), produces COUNT records
// idempotently with acks=all, consumes them in a group of two consumers
// (committing each record), describes the group, closes one consumer,
// produces 40 more records and reads them on the one left, lists the
// group's committed offsets, deletes one of them, sets and describes the
// topic's min.insync.replicas and deletes the topic. Prints one JSON line
// with what it saw; exits 0 when it ran, and the caller judges the line.
//
//     node platformatic_client.mjs consumer-protocol BOOTSTRAP TOPIC COUNT
//
// The same reading in the consumer group protocol (KIP-848,
// `groupProtocol: 'consumer'`): creates TOPIC (4 partitions), produces
// COUNT records, reads them in a group of two consumers (committing each
// record) until both have their share, closes one, produces 40 more and
// reads them on the other.
//
//     node platformatic_client.mjs transactions BOOTSTRAP TOPIC
//
// On TOPIC (2 partitions), three transactions of 10 records: committed,
// aborted, committed. Prints what a committed and an uncommitted reader
// read, counted by prefix.
//
//     node platformatic_client.mjs quota BOOTSTRAP CLIENT_ID KEY=VALUE...
//
// Sets each KEY of CLIENT_ID's quotas (`-` for the default client) with
// AlterClientQuotas, as `kafka-configs --alter --entity-type clients`
// does, and prints them as DescribeClientQuotas then describes them.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const root = process.env.NODE_PATH ?? '';
const entry = createRequire(join(root, 'noop.js')).resolve('@platformatic/kafka');
const { Admin, Consumer, Producer, FetchIsolationLevels, stringSerializers, stringDeserializers } =
  await import(pathToFileURL(entry).href);

const [mode, bootstrap, topic, countText] = process.argv.slice(2);
const count = parseInt(countText ?? '0', 10);
const brokers = [bootstrap];
const describe = (e) => `${e.message} ${JSON.stringify(e.errors?.map((x) => x.message) ?? [])}`;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(condition, ms) {
  const end = Date.now() + ms;
  while (!condition() && Date.now() < end) await sleep(50);
  return condition();
}

// A consumer's stream of `topic`: from the group's committed offsets, the
// earliest where none is; committed by hand.
function fromCommitted(c) {
  return c.consume({ autocommit: false, topics: [topic], mode: 'committed', fallbackMode: 'earliest' });
}

function consumer(groupId, clientId, extra = {}) {
  return new Consumer({
    groupId,
    clientId,
    bootstrapBrokers: brokers,
    deserializers: stringDeserializers,
    maxWaitTime: 500,
    sessionTimeout: 10000,
    heartbeatInterval: 500,
    ...extra,
  });
}

async function groups(out) {
  const admin = new Admin({ clientId: 'platformatic-check', bootstrapBrokers: brokers });
  const created = await admin.createTopics({ topics: [topic], partitions: 4, replicas: 3 });
  out.created = created.length === 1 && created[0].name === topic;
  out.topic_id = created[0]?.id ?? null;

  const producer = new Producer({
    clientId: 'platformatic-producer',
    bootstrapBrokers: brokers,
    serializers: stringSerializers,
    idempotent: true,
    acks: -1,
  });
  const written = new Set();
  let acked = 0;
  const produce = async (from, to) => {
    for (let i = from; i < to; i += 100) {
      const messages = [];
      for (let j = i; j < Math.min(to, i + 100); j++) {
        messages.push({ topic, key: `k${j % 17}`, value: `r-${j}`, partition: j % 4 });
      }
      const result = await producer.send({ messages });
      acked += messages.length;
      result.offsets?.forEach((o) => written.add(o.partition));
    }
  };
  await produce(0, count);
  out.acked = acked;
  out.partitions_written = written.size;

  const group = `${topic}-readers`;
  const seen = new Map();
  const commits = new Set();
  const failed = [];
  const read = (m) => {
    seen.set(m.value, (seen.get(m.value) ?? 0) + 1);
    const commit = Promise.resolve(m.commit()).catch((e) => failed.push(describe(e)));
    commits.add(commit);
    commit.finally(() => commits.delete(commit));
  };
  const settled = () => Promise.all([...commits]);
  const members = [consumer(group, 'member-0'), consumer(group, 'member-1')];
  const streams = [];
  for (const c of members) {
    const stream = await fromCommitted(c);
    stream.on('data', read);
    streams.push(stream);
  }
  out.read_all = await waitFor(() => seen.size >= count, 30000);
  const described = await admin.describeGroups({ groups: [group] });
  const g = described.get(group);
  out.group = { state: g?.state ?? null, members: g ? g.members.size : 0 };

  await settled();
  await streams[0].close();
  await members[0].close();
  const lateFrom = count;
  await produce(count, count + 40);
  const late = () => [...seen.keys()].filter((v) => parseInt(v.slice(2), 10) >= lateFrom).length;
  await waitFor(() => late() >= 40, 30000);
  out.late_read = late();
  await settled();
  await streams[1].close();
  await members[1].close();
  await producer.close();
  out.read = seen.size;
  out.read_twice = [...seen.values()].filter((n) => n > 1).length;
  out.commits_failed = failed.slice(0, 5);

  const offsets = await admin.listConsumerGroupOffsets({ groups: [group] });
  out.committed = offsets[0].topics
    .flatMap((t) => t.partitions)
    .reduce((sum, p) => sum + Number(p.committedOffset), 0);

  // The group is empty now: any of its offsets may go.
  await admin.deleteConsumerGroupOffsets({
    groupId: group,
    topics: [{ name: topic, partitionIndexes: [0] }],
  });
  const left = await admin.listConsumerGroupOffsets({ groups: [group] });
  out.offsets_left = left[0].topics.flatMap((t) => t.partitions).length;

  // The topic's own min.insync.replicas, set and described.
  await admin.incrementalAlterConfigs({
    resources: [
      {
        resourceType: 2,
        resourceName: topic,
        configs: [{ name: 'min.insync.replicas', configOperation: 0, value: '3' }],
      },
    ],
  });
  const configs = await admin.describeConfigs({
    resources: [{ resourceType: 2, resourceName: topic, configurationKeys: ['min.insync.replicas'] }],
  });
  out.min_insync = configs[0].configs.find((c) => c.name === 'min.insync.replicas')?.value ?? null;

  await admin.deleteTopics({ topics: [topic] });
  out.topic_left = (await admin.listTopics()).includes(topic);
  await admin.close();
}

async function transactions(out) {
  const producer = new Producer({
    clientId: 'platformatic-txn',
    bootstrapBrokers: brokers,
    serializers: stringSerializers,
    idempotent: true,
    transactionalId: `${topic}-txn`,
    acks: -1,
  });
  for (const [t, commit] of [['t0', true], ['t1', false], ['t2', true]]) {
    const txn = await producer.beginTransaction();
    for (let i = 0; i < 10; i++) {
      await txn.send({ messages: [{ topic, key: `${t}-${i}`, value: `${t}-${i}`, partition: i % 2 }] });
    }
    if (commit) await txn.commit();
    else await txn.abort();
  }
  await producer.close();
  for (const [name, level, expected] of [
    ['committed', 'READ_COMMITTED', 20],
    ['uncommitted', 'READ_UNCOMMITTED', 30],
  ]) {
    const c = consumer(`${topic}-${name}`, name, { isolationLevel: FetchIsolationLevels[level] });
    const stream = await c.consume({ autocommit: false, topics: [topic], mode: 'earliest' });
    const counts = {};
    let total = 0;
    stream.on('data', (m) => {
      const prefix = m.value.split('-')[0];
      counts[prefix] = (counts[prefix] ?? 0) + 1;
      total++;
    });
    // Enough for every record, then a while longer for any that should
    // not come.
    await waitFor(() => total >= expected, 20000);
    await sleep(1000);
    await stream.close();
    await c.close();
    out[name] = counts;
  }
}

async function consumerProtocol(out) {
  const admin = new Admin({ clientId: 'platformatic-check', bootstrapBrokers: brokers });
  await admin.createTopics({ topics: [topic], partitions: 4, replicas: 3 });
  const producer = new Producer({
    clientId: 'platformatic-producer',
    bootstrapBrokers: brokers,
    serializers: stringSerializers,
    acks: -1,
  });
  const produce = async (from, to) => {
    const messages = [];
    for (let i = from; i < to; i++) messages.push({ topic, value: `r-${i}`, partition: i % 4 });
    await producer.send({ messages });
  };
  await produce(0, count);
  const seen = new Map();
  const failed = [];
  const members = [0, 1].map((i) =>
    consumer(`${topic}-readers`, `member-${i}`, { groupProtocol: 'consumer' }),
  );
  const streams = [];
  for (const c of members) {
    const stream = await fromCommitted(c);
    stream.on('data', (m) => {
      seen.set(m.value, (seen.get(m.value) ?? 0) + 1);
      Promise.resolve(m.commit()).catch((e) => failed.push(describe(e)));
    });
    streams.push(stream);
  }
  const share = (c) => (c.assignments ?? []).flatMap((a) => a.partitions).sort();
  out.read_all = await waitFor(() => seen.size >= count, 30000);
  out.both_assigned = await waitFor(() => members.every((c) => share(c).length > 0), 30000);
  out.shares = members.map(share);
  await streams[0].close();
  await members[0].close();
  await produce(count, count + 40);
  const late = () => [...seen.keys()].filter((v) => parseInt(v.slice(2), 10) >= count).length;
  await waitFor(() => late() >= 40, 30000);
  out.late_read = late();
  out.last_share = share(members[1]);
  await streams[1].close();
  await members[1].close();
  await producer.close();
  out.read = seen.size;
  out.read_twice = [...seen.values()].filter((n) => n > 1).length;
  out.commits_failed = failed.slice(0, 5);
  await admin.close();
}

async function quota(out) {
  const admin = new Admin({ clientId: 'quota-admin', bootstrapBrokers: [bootstrap] });
  const entityName = topic === '-' ? null : topic;
  const entities = [{ entityType: 'client-id', entityName }];
  const ops = process.argv.slice(5).map((kv) => {
    const [key, value] = kv.split('=');
    return { key, value: Number(value), remove: false };
  });
  const set = await admin.alterClientQuotas({ entries: [{ entities, ops }] });
  out.errors = set.map((e) => e.errorMessage ?? e.errorCode);
  const match = entityName === null ? { matchType: 1 } : { matchType: 0, match: entityName };
  const described = await admin.describeClientQuotas({
    components: [{ entityType: 'client-id', ...match }],
    strict: true,
  });
  out.quotas = Object.fromEntries(
    described.flatMap((e) => e.values.map((v) => [v.key, v.value])),
  );
  await admin.close();
}

const out = {};
try {
  if (mode === 'transactions') await transactions(out);
  else if (mode === 'quota') await quota(out);
  else if (mode === 'consumer-protocol') await consumerProtocol(out);
  else await groups(out);
} catch (e) {
  out.error = describe(e);
}
console.log(JSON.stringify(out));
process.exit(0);
