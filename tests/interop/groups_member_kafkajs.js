// One kafkajs group member, started by groups_coordinator.py (see groups_common.py for its
// configuration and output). kafkajs always joins a group and has one assigner
// (round-robin) and no rebalance callbacks: its GROUP_JOIN event carries the member's whole
// assignment and REBALANCING says it stops fetching, which is what this script reports as
// "assign" and "revoke". Each batch's records are committed before the batch returns.
'use strict'

const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

function emit(ev, fields) {
  process.stdout.write(JSON.stringify({ ev, ...fields }) + '\n')
}

async function main() {
  const cfg = JSON.parse(process.env.SAMSA_GROUP_MEMBER || 'null')
  if (!cfg) {
    console.error('SAMSA_GROUP_MEMBER is not set (the member\'s JSON configuration)')
    process.exit(2)
  }
  const kafka = new Kafka({
    clientId: cfg.name,
    brokers: [cfg.bootstrap],
    logLevel: logLevel.WARN,
    logCreator: () => ({ label, log }) => console.error(`[kafkajs ${label}] ${JSON.stringify(log)}`),
  })
  const consumer = kafka.consumer({
    groupId: cfg.group,
    sessionTimeout: cfg.session_timeout_ms,
    heartbeatInterval: cfg.heartbeat_interval_ms,
  })
  let owned = []
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    owned = (e.payload.memberAssignment[cfg.topic] || []).slice().sort((a, b) => a - b)
    emit('assign', { parts: owned })
    emit('owned', { parts: owned })
  })
  consumer.on(consumer.events.REBALANCING, () => {
    emit('revoke', { parts: owned })
    owned = []
    emit('owned', { parts: owned })
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [cfg.topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      if (batch.messages.length === 0) return
      const recs = batch.messages.map((m) => [
        batch.partition, Number(m.offset), m.value === null ? null : m.value.toString(),
      ])
      emit('records', { recs })
      const next = recs[recs.length - 1][1] + 1
      try {
        await consumer.commitOffsets([
          { topic: batch.topic, partition: batch.partition, offset: String(next) },
        ])
        emit('committed', { offsets: { [batch.partition]: next } })
      } catch (err) {
        emit('commit_failed', { error: String(err) })
      }
    },
  })
  const stdin = readline.createInterface({ input: process.stdin })
  let stopping = false
  const stop = async () => {
    if (stopping) return
    stopping = true
    await consumer.disconnect()
    emit('closed', {})
    process.exit(0)
  }
  stdin.on('line', (line) => { if (line.trim() === 'stop') stop() })
  stdin.on('close', stop)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
