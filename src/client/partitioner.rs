//! Choosing a partition for a record the way Kafka's Java client does, so that a key lands on
//! the same partition whichever client produced it.
//!
//! - A record with a key goes to `toPositive(murmur2(key)) % numPartitions`, Kafka's
//!   `BuiltInPartitioner.partitionForKey`: [`murmur2`] is Kafka's `Utils.murmur2` (MurmurHash2,
//!   seed `0x9747b28c`, the Java code's signed 32-bit arithmetic), [`to_positive`] clears the
//!   sign bit (not `abs`, which would map `i32::MIN` to itself).
//! - A record without a key (and without an explicit partition) uses the sticky partitioner of
//!   KIP-480 as KIP-794 refined it: every keyless record of a topic goes to one partition until
//!   `batch_size` bytes have gone there, then a new partition is drawn at random (never the
//!   same one twice in a row when the topic has more than one). Keyless records thus fill whole
//!   batches instead of spreading one-record batches over every partition.
//!
//!   Simplification, documented: KIP-794's adaptive part (preferring partitions whose brokers
//!   have shorter queues, `partitioner.adaptive.partitioning.enable`, and avoiding partitions
//!   whose leader is slow, `partitioner.availability.timeout.ms`) is not implemented: every
//!   partition is drawn with equal probability.
//!
//! Invariant: the partitioner never answers a partition outside `0..num_partitions`; it is only
//! asked with `num_partitions >= 1`.

use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use rand::Rng;

/// Kafka's `Utils.murmur2`: MurmurHash2 over `data` with Kafka's seed, as a signed 32-bit
/// result identical to the Java method's.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    // Java's `int length` ^ seed: only the low 32 bits of the length take part.
    let mut h: u32 = SEED ^ (data.len() as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    // The tail: Java's switch falls through from case 3 to case 1.
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if let Some(&first) = tail.first() {
        h ^= u32::from(first);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: the sign bit cleared.
pub fn to_positive(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// The partition of a keyed record among `num_partitions` (Java's `partitionForKey`).
/// `num_partitions` below 1 is treated as 1.
pub fn partition_for_key(key: &[u8], num_partitions: i32) -> i32 {
    to_positive(murmur2(key)) % num_partitions.max(1)
}

/// The sticky choice for one topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sticky {
    partition: i32,
    /// Bytes sent to `partition` since it was chosen.
    bytes: usize,
}

/// The sticky partitioner for keyless records: one current partition per topic, switched after
/// `batch_size` bytes (see the module docs).
#[derive(Debug)]
pub struct StickyPartitioner {
    batch_size: usize,
    rng: SmallRng,
    topics: BTreeMap<String, Sticky>,
}

impl StickyPartitioner {
    /// `batch_size` is the producer's `batch.size`: how many bytes go to one partition before
    /// the next is drawn. `rng` comes from `crate::rt::rand` so a simulation seed reproduces
    /// the choices.
    pub fn new(batch_size: usize, rng: SmallRng) -> StickyPartitioner {
        StickyPartitioner {
            batch_size: batch_size.max(1),
            rng,
            topics: BTreeMap::new(),
        }
    }

    /// The partition for a keyless record of `record_bytes` bytes to `topic`, which has
    /// `num_partitions` partitions. The bytes count towards the switch.
    pub fn partition(&mut self, topic: &str, num_partitions: i32, record_bytes: usize) -> i32 {
        let num_partitions = num_partitions.max(1);
        let current = self.topics.get(topic).copied();
        let sticky = match current {
            Some(s) if s.partition < num_partitions && s.bytes < self.batch_size => s,
            previous => {
                let partition = self.draw(num_partitions, previous.map(|s| s.partition));
                Sticky {
                    partition,
                    bytes: 0,
                }
            }
        };
        let updated = Sticky {
            partition: sticky.partition,
            bytes: sticky.bytes.saturating_add(record_bytes),
        };
        match self.topics.get_mut(topic) {
            Some(slot) => *slot = updated,
            None => {
                self.topics.insert(topic.to_owned(), updated);
            }
        }
        sticky.partition
    }

    /// A random partition, other than `previous` when there is a choice.
    fn draw(&mut self, num_partitions: i32, previous: Option<i32>) -> i32 {
        match previous {
            Some(previous) if num_partitions > 1 && (0..num_partitions).contains(&previous) => {
                // Draw among the others: shift the draws at or above `previous` up by one.
                let pick = self.rng.gen_range(0..num_partitions - 1);
                if pick >= previous {
                    pick + 1
                } else {
                    pick
                }
            }
            _ => self.rng.gen_range(0..num_partitions),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// Kafka's own vectors, from `UtilsTest.testMurmur2` in Apache Kafka's clients module:
    /// the Java implementation's results.
    #[test]
    fn client_partitioner_murmur2_matches_kafkas_utils_test() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (key, expected) in cases {
            assert_eq!(murmur2(key), expected, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn client_partitioner_keys_map_like_the_java_client() {
        assert_eq!(to_positive(-1), i32::MAX);
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(5), 5);
        // toPositive(-973932308) = 1173551340; 1173551340 % 7 = 2, % 10 = 0.
        assert_eq!(partition_for_key(b"21", 7), 1_173_551_340 % 7);
        assert_eq!(partition_for_key(b"21", 10), 0);
        assert_eq!(partition_for_key(b"abc", 1), 0);
        for p in 1..20 {
            let got = partition_for_key(b"foobar", p);
            assert!((0..p).contains(&got));
        }
    }

    #[test]
    fn client_partitioner_sticks_until_batch_size_then_moves_elsewhere() {
        let mut sticky = StickyPartitioner::new(1000, SmallRng::seed_from_u64(7));
        let first = sticky.partition("t", 4, 400);
        assert_eq!(sticky.partition("t", 4, 400), first);
        assert_eq!(sticky.partition("t", 4, 400), first);
        // 1200 bytes went to `first`: the next record starts a new partition.
        let second = sticky.partition("t", 4, 400);
        assert_ne!(second, first);
        assert!((0..4).contains(&second));
        // Topics are independent, and a single-partition topic always answers 0.
        for _ in 0..10 {
            assert_eq!(sticky.partition("one", 1, 5000), 0);
        }
    }

    #[test]
    fn client_partitioner_sticky_spreads_over_every_partition() {
        let mut sticky = StickyPartitioner::new(10, SmallRng::seed_from_u64(1));
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..400 {
            seen.insert(sticky.partition("t", 5, 10));
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
        // A topic that shrank in the metadata (or a stale choice) never yields a partition
        // outside the range.
        assert!((0..2).contains(&sticky.partition("t", 2, 1)));
    }
}
