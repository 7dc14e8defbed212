// A kafkajs client (a protocol implementation in JavaScript, of its own)
// for broker-sim's wire tests.
//
//     node kafkajs_client.js BOOTSTRAP TOPIC COUNT
//
// Creates TOPIC (4 partitions, 3 replicas), produces COUNT records with
// acks=all in batches of 100, consumes them in a group of two consumers
// (committing as it goes), describes the group, lets one consumer leave,
// produces 40 more records and reads them on the one left, fetches the
// group's committed offsets and deletes the topic. Prints one JSON line
// with what it saw; exits 0 when it ran, and the caller judges the line.
//
//     node kafkajs_client.js transactions BOOTSTRAP TOPIC
//
// On TOPIC (2 partitions), three transactions of 10 records: committed,
// aborted, committed. Prints what a committed and an uncommitted reader
// read, counted by prefix.
const { Kafka, logLevel } = require('kafkajs');

const transactional = process.argv[2] === 'transactions';
const [bootstrap, topic, countText] = process.argv.slice(transactional ? 3 : 2);
const count = parseInt(countText, 10);
const group = `${topic}-readers`;
const kafka = new Kafka({ clientId: 'kafkajs-check', brokers: [bootstrap], logLevel: logLevel.NOTHING });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(condition, ms) {
  const end = Date.now() + ms;
  while (!condition() && Date.now() < end) await sleep(50);
  return condition();
}

async function main() {
  const out = {};
  const admin = kafka.admin();
  await admin.connect();
  out.created = await admin.createTopics({
    topics: [{ topic, numPartitions: 4, replicationFactor: 3 }],
    waitForLeaders: true,
  });

  const producer = kafka.producer();
  await producer.connect();
  let acked = 0;
  const written = new Set();
  for (let i = 0; i < count; i += 100) {
    const messages = [];
    for (let j = i; j < Math.min(count, i + 100); j++) messages.push({ key: `k${j % 17}`, value: `r-${j}` });
    const answers = await producer.send({ topic, acks: -1, timeout: 30000, messages });
    acked += messages.length;
    answers.forEach((a) => written.add(a.partition));
  }
  out.acked = acked;
  out.partitions_written = written.size;

  const seen = new Map();
  const consumers = [];
  for (let c = 0; c < 2; c++) {
    const consumer = kafka.consumer({
      groupId: group,
      sessionTimeout: 10000,
      heartbeatInterval: 300,
      maxWaitTimeInMs: 200,
    });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }) => {
        const value = message.value.toString();
        seen.set(value, (seen.get(value) || 0) + 1);
      },
    });
    consumers.push(consumer);
  }
  await waitFor(() => seen.size >= count, 60000);
  const description = await admin.describeGroups([group]);
  out.group = description.groups.map((g) => ({ state: g.state, members: g.members.length, protocol: g.protocol }))[0];

  // The first leaves: the other takes its partitions and reads what comes.
  await consumers[0].disconnect();
  await producer.send({
    topic,
    acks: -1,
    messages: [...Array(40).keys()].map((i) => ({ value: `late-${i}` })),
  });
  const late = () => [...seen.keys()].filter((k) => k.startsWith('late-')).length;
  await waitFor(() => late() >= 40, 30000);
  out.late_read = late();
  await producer.disconnect();
  // Commits are asynchronous in kafkajs: wait until they all arrived.
  const committedTotal = async () => {
    const offsets = await admin.fetchOffsets({ groupId: group, topics: [topic] });
    return offsets[0].partitions.reduce((sum, p) => sum + Math.max(0, parseInt(p.offset, 10)), 0);
  };
  let committed = 0;
  const end = Date.now() + 15000;
  while ((committed = await committedTotal()) < count + 40 && Date.now() < end) await sleep(200);
  out.committed = committed;
  await consumers[1].disconnect();

  out.read = [...seen.keys()].filter((k) => k.startsWith('r-')).length;
  out.read_twice = [...seen.values()].filter((n) => n > 1).length;
  await admin.deleteTopics({ topics: [topic] });
  out.topic_left = (await admin.listTopics()).includes(topic);
  await admin.disconnect();
  console.log(JSON.stringify(out));
}

/** Every record of `topic` from the start, by prefix, as a reader of
 * committed records only or not. */
async function readAll(readUncommitted) {
  const consumer = kafka.consumer({ groupId: `${topic}-${readUncommitted}`, readUncommitted, maxWaitTimeInMs: 200 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const counts = {};
  let last = Date.now();
  await consumer.run({
    eachMessage: async ({ message }) => {
      const prefix = message.value.toString().split('-')[0];
      counts[prefix] = (counts[prefix] || 0) + 1;
      last = Date.now();
    },
  });
  // Until 3 s pass with nothing new (the group's first round included).
  await waitFor(() => Object.keys(counts).length > 0 && Date.now() - last > 3000, 30000);
  await consumer.disconnect();
  return counts;
}

async function transactions() {
  const producer = kafka.producer({ transactionalId: `${topic}-tx`, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  for (const [n, commit] of [[0, true], [1, false], [2, true]]) {
    const txn = await producer.transaction();
    await txn.send({
      topic,
      messages: [...Array(10).keys()].map((i) => ({ value: `t${n}-${i}`, partition: i % 2 })),
    });
    await (commit ? txn.commit() : txn.abort());
  }
  await producer.disconnect();
  console.log(JSON.stringify({ committed: await readAll(false), uncommitted: await readAll(true) }));
}

(transactional ? transactions() : main()).catch((e) => {
  console.log(JSON.stringify({ error: String(e && e.stack ? e.stack : e) }));
  process.exit(1);
});
