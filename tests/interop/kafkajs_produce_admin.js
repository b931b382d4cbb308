// kafkajs (pure JavaScript) against a running samsa broker: the producer and the admin
// client. Its consumer always joins a consumer group, which the broker does not serve yet
// (step 6), so nothing is read back here; instead every produce answer's base offset, the
// end offsets and offsets by timestamp are checked against what was sent.
//
// Per codec kafkajs supports without extra packages (none, gzip): creates a 3-partition topic
// (createTopics, waitForLeaders), checks it with fetchTopicMetadata, produces keyed records
// with headers and explicit timestamps with acks=-1 in several send() calls, predicting each
// record's partition with kafkajs's own default partitioner, and checks each answer's base
// offset, then fetchTopicOffsets and fetchTopicOffsetsByTimestamp. Finally deleteTopics.
//
// DescribeConfigs and CreatePartitions are being added to the broker separately: the check
// `describeConfigs+createPartitions` runs only with SAMSA_INTEROP_CONFIG_APIS=1 until then.
//
// Environment: SAMSA_BOOTSTRAP (host:port), SAMSA_INTEROP_RECORDS (records per codec),
// SAMSA_INTEROP_CONFIG_APIS=1 to include the config/partition check.
// Exits 0 when everything matched, 1 otherwise.
'use strict';

const crypto = require('crypto');
const {
  Kafka,
  CompressionTypes,
  Partitioners,
  ConfigResourceTypes,
  logLevel,
} = require('kafkajs');
const kafkajsVersion = require('kafkajs/package.json').version;

const PARTITIONS = 3;
const NULL_VALUE_EVERY = 97;
const EMPTY_HEADER_EVERY = 5;
// Records per send() call: several calls, so base offsets after the first are checked too.
const SEND_CHUNK_RECORDS = 500;
const OPERATION_TIMEOUT_MS = 60000;
const MISMATCHES_SHOWN_MAX = 20;
const CODECS = [
  ['none', CompressionTypes.None],
  ['gzip', CompressionTypes.GZIP],
];

const bootstrap = process.env.SAMSA_BOOTSTRAP;
if (!bootstrap) {
  console.error("SAMSA_BOOTSTRAP is not set (the broker's host:port)");
  process.exit(2);
}
const recordCount = parseInt(process.env.SAMSA_INTEROP_RECORDS || '2000', 10);
const configApis = process.env.SAMSA_INTEROP_CONFIG_APIS === '1';
const suffix = crypto.randomBytes(4).toString('hex');
const client = `kafkajs ${kafkajsVersion}`;

// The same records as tests/interop/interop_common.py's make_records.
function makeRecords(codec, n, baseTs) {
  const out = [];
  for (let i = 0; i < n; i++) {
    let value = null;
    if (i % NULL_VALUE_EVERY !== NULL_VALUE_EVERY - 1) {
      let filler = '';
      for (let j = 0; j < i % 53; j++) filler += String.fromCharCode(97 + ((i * 7 + j) % 26));
      value = `${codec}-v${String(i).padStart(6, '0')}-${filler}`;
    }
    const headers = { seq: String(i), codec };
    if (i % EMPTY_HEADER_EVERY === 0) headers.empty = '';
    out.push({ i, key: `k${i % 97}`, value, headers, timestamp: baseTs + i });
  }
  return out;
}

class Result {
  constructor(name) {
    this.name = name;
    this.mismatches = [];
    this.detail = '';
  }
  fail(msg) {
    this.mismatches.push(msg);
  }
  get ok() {
    return this.mismatches.length === 0;
  }
}

const results = [];

async function run(kind, name, fn) {
  const result = new Result(name);
  const started = Date.now();
  try {
    result.detail = (await fn(result)) || '';
  } catch (e) {
    result.fail(`${e.name}: ${e.message}${e.type ? ` (${e.type})` : ''}`);
    console.error(e);
  }
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  console.log(`[${client}] ${kind} ${name}: ${result.ok ? 'PASS' : 'FAIL'} ${result.detail} (${secs}s)`);
  for (const m of result.mismatches.slice(0, MISMATCHES_SHOWN_MAX)) console.log(`    ${m}`);
  if (result.mismatches.length > MISMATCHES_SHOWN_MAX) {
    console.log(`    ... and ${result.mismatches.length - MISMATCHES_SHOWN_MAX} more`);
  }
  results.push([kind, result]);
  return result;
}

async function roundTrip(kafka, admin, codec, compression, result) {
  const topic = `kafkajs-${codec}-${suffix}`;
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }],
    waitForLeaders: true,
    timeout: OPERATION_TIMEOUT_MS,
  });
  if (created !== true) result.fail(`createTopics answered ${created}, expected true`);
  const md = await admin.fetchTopicMetadata({ topics: [topic] });
  const partitionMetadata = md.topics[0].partitions;
  if (md.topics[0].name !== topic || partitionMetadata.length !== PARTITIONS) {
    result.fail(`fetchTopicMetadata: ${JSON.stringify(md.topics)}`);
  }

  const records = makeRecords(codec, recordCount, Date.now() - 60000);
  // kafkajs's own partitioner, asked the same question its producer asks, tells where each
  // keyed record goes; the produce answers' base offsets must then count up per partition.
  const partitioner = Partitioners.DefaultPartitioner();
  const placed = { 0: [], 1: [], 2: [] };
  const producer = kafka.producer({
    createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: false,
  });
  await producer.connect();
  try {
    for (let start = 0; start < records.length; start += SEND_CHUNK_RECORDS) {
      const chunk = records.slice(start, start + SEND_CHUNK_RECORDS);
      const messages = chunk.map((r) => ({
        key: r.key,
        value: r.value,
        headers: r.headers,
        timestamp: String(r.timestamp),
      }));
      const expectedBase = {};
      const inChunk = {};
      for (let k = 0; k < chunk.length; k++) {
        const p = partitioner({ topic, partitionMetadata, message: messages[k] });
        if (!(p in expectedBase)) expectedBase[p] = placed[p].length;
        inChunk[p] = (inChunk[p] || 0) + 1;
        placed[p].push(chunk[k]);
      }
      const answers = await producer.send({
        topic,
        acks: -1,
        timeout: OPERATION_TIMEOUT_MS,
        compression,
        messages,
      });
      const answered = new Set();
      for (const a of answers) {
        answered.add(a.partition);
        if (a.errorCode !== 0) result.fail(`send: partition ${a.partition} error ${a.errorCode}`);
        if (Number(a.baseOffset) !== expectedBase[a.partition]) {
          result.fail(
            `send of records ${start}..: partition ${a.partition} base offset ${a.baseOffset},` +
              ` expected ${expectedBase[a.partition]}`,
          );
        }
      }
      for (const p of Object.keys(inChunk)) {
        if (!answered.has(Number(p))) result.fail(`send of records ${start}..: no answer for partition ${p}`);
      }
    }
  } finally {
    await producer.disconnect();
  }

  const used = Object.keys(placed).filter((p) => placed[p].length > 0);
  if (used.length !== PARTITIONS) result.fail(`the keys landed on partitions ${used} only`);
  const offsets = await admin.fetchTopicOffsets(topic);
  for (const o of offsets) {
    const n = placed[o.partition].length;
    if (Number(o.high) !== n || Number(o.offset) !== n || Number(o.low) !== 0) {
      result.fail(`fetchTopicOffsets partition ${o.partition}: low ${o.low} high ${o.high}` +
        ` offset ${o.offset}, expected 0 and ${n}`);
    }
  }
  if (offsets.length !== PARTITIONS) result.fail(`fetchTopicOffsets: ${offsets.length} partitions`);

  // Offsets by timestamp: the first record of each partition at or after the probe.
  const probes = [records[0], records[Math.floor(records.length / 3)], records[records.length - 1]];
  for (const probe of probes) {
    const found = await admin.fetchTopicOffsetsByTimestamp(topic, probe.timestamp);
    for (const f of found) {
      const list = placed[f.partition];
      let expected = list.findIndex((r) => r.timestamp >= probe.timestamp);
      if (expected < 0) expected = list.length; // past the last record: the end offset
      if (Number(f.offset) !== expected) {
        result.fail(`fetchTopicOffsetsByTimestamp(${probe.timestamp}) partition ${f.partition}:` +
          ` ${f.offset}, expected ${expected}`);
      }
    }
  }
  result.produced = records.length;
  return { topic, detail: `${records.length} acknowledged, offsets checked` };
}

async function main() {
  const kafka = new Kafka({
    clientId: 'samsa-interop',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    retry: { retries: 3 },
    requestTimeout: OPERATION_TIMEOUT_MS,
  });
  const admin = kafka.admin();
  await admin.connect();
  const topics = [];
  for (const [codec, compression] of CODECS) {
    await run('codec', codec, async (result) => {
      const { topic, detail } = await roundTrip(kafka, admin, codec, compression, result);
      topics.push(topic);
      return detail;
    });
  }

  if (configApis) {
    await run('check', 'describeConfigs+createPartitions', async (result) => {
      const topic = topics[0];
      if (!topic) throw new Error('no topic was created');
      const described = await admin.describeConfigs({
        resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }],
        includeSynonyms: false,
      });
      const entries = described.resources[0].configEntries;
      const names = new Set(entries.map((e) => e.configName));
      for (const want of ['cleanup.policy', 'retention.ms', 'max.message.bytes']) {
        if (!names.has(want)) result.fail(`describeConfigs(${topic}): no ${want}`);
      }
      await admin.createPartitions({ topicPartitions: [{ topic, count: PARTITIONS + 1 }] });
      const md = await admin.fetchTopicMetadata({ topics: [topic] });
      const n = md.topics[0].partitions.length;
      if (n !== PARTITIONS + 1) result.fail(`after createPartitions: ${n} partitions`);
      return `${entries.length} config entries`;
    });
  } else {
    console.log(`[${client}] check describeConfigs+createPartitions: not run (set SAMSA_INTEROP_CONFIG_APIS=1)`);
  }

  await run('check', 'deleteTopics', async (result) => {
    if (topics.length === 0) return 'nothing to delete';
    await admin.deleteTopics({ topics, timeout: OPERATION_TIMEOUT_MS });
    const listed = new Set(await admin.listTopics());
    const left = topics.filter((t) => listed.has(t));
    if (left.length) result.fail(`still listed after deleteTopics: ${left}`);
    return `deleted ${topics.length} topics`;
  });
  await admin.disconnect();

  const failed = results.filter(([, r]) => !r.ok);
  console.log(`=== ${client} summary`);
  for (const [kind, r] of results) console.log(`  ${kind} ${r.name.padEnd(8)} ${r.ok ? 'PASS' : 'FAIL'}`);
  console.log(`${client}: ${results.length - failed.length} passed, ${failed.length} failed`);
  process.exitCode = failed.length ? 1 : 0;
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
