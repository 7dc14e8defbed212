//! Incremental fetch sessions (KIP-227), one cache per broker, as Kafka's
//! `FetchSessionCache`. A consumer that opens a session (epoch 0) names
//! its partitions once; each later fetch (epochs 1, 2, ...) names only
//! the partitions whose fetch position changed, or that it drops, and is
//! answered only the partitions with something new: records, an error, or
//! a high watermark, last stable offset or log start offset other than
//! the one it was last told. A fetch that waits, waits on every partition
//! of its session.
//!
//! A session that is not found (FETCH_SESSION_ID_NOT_FOUND) or asked at
//! the wrong epoch (INVALID_FETCH_SESSION_EPOCH) is refused as a whole,
//! and the client opens a new one. The cache holds [`SLOTS`] sessions;
//! when it is full, a new session takes the place of the least recently
//! used one (Kafka also weighs sessions by size and keeps followers').

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{FetchRequest, TopicName};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// Kafka's `max.incremental.fetch.session.cache.slots`.
pub const SLOTS: usize = 1000;

/// The first version of Fetch with sessions.
const SESSIONS_V: i16 = 7;

/// A partition as a fetch names it: its topic by id from v13 (KIP-516),
/// by name before.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Asked {
    pub topic: TopicName,
    pub topic_id: Uuid,
    pub partition: i32,
}

/// Where a fetch reads a partition from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Position {
    pub offset: i64,
    pub max_bytes: i32,
    /// The leader epoch the client believes current (-1: not given).
    pub leader_epoch: i32,
    /// The epoch of the last record the client read (-1: not given), to
    /// tell whether the log diverged from it (v12 and later).
    pub last_fetched_epoch: i32,
}

/// What a partition's answer said last, in a session.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Told {
    pub high_watermark: i64,
    pub last_stable: i64,
    pub log_start: i64,
}

/// How a fetch is answered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Context {
    /// Every partition asked for, with no session (session id 0).
    Sessionless,
    /// Every partition of session `0`, just opened.
    Full(i32),
    /// The partitions of session `0` with something new.
    Incremental(i32),
}

impl Context {
    /// The session id the response carries.
    pub fn session_id(self) -> i32 {
        match self {
            Context::Sessionless => 0,
            Context::Full(id) | Context::Incremental(id) => id,
        }
    }
}

struct Partition {
    position: Position,
    /// `None` until first answered.
    told: Option<Told>,
}

struct Session {
    /// The epoch its next fetch must carry.
    epoch: i32,
    partitions: BTreeMap<Asked, Partition>,
    /// When it was last used, on the cache's clock.
    used: u64,
}

#[derive(Default)]
struct Cache {
    sessions: HashMap<i32, Session>,
    clock: u64,
}

/// One broker's fetch sessions.
#[derive(Default)]
pub struct FetchSessions {
    cache: Mutex<Cache>,
}

impl FetchSessions {
    /// Forgets every session, as a broker that crashed has: its cache was
    /// in its memory. Their consumers are refused and open new ones.
    pub fn clear(&self) {
        self.cache.lock().sessions.clear();
    }
}

fn refused(e: ResponseError) -> i16 {
    e.code()
}

/// The partitions `r` names, with their positions.
fn named(r: &FetchRequest) -> Vec<(Asked, Position)> {
    r.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                let asked = Asked {
                    topic: t.topic.clone(),
                    topic_id: t.topic_id,
                    partition: p.partition,
                };
                let position = Position {
                    offset: p.fetch_offset,
                    max_bytes: p.partition_max_bytes,
                    leader_epoch: p.current_leader_epoch,
                    last_fetched_epoch: p.last_fetched_epoch,
                };
                (asked, position)
            })
        })
        .collect()
}

/// A fresh session id: random, positive, not in use.
fn new_id(sessions: &HashMap<i32, Session>) -> i32 {
    loop {
        let bytes = Uuid::new_v4();
        let b = bytes.as_bytes();
        let id = i32::from_be_bytes([b[0], b[1], b[2], b[3]]) & i32::MAX;
        if id != 0 && !sessions.contains_key(&id) {
            return id;
        }
    }
}

impl FetchSessions {
    /// Works out which partitions fetch `r` (at `version`) reads and how
    /// it is answered, opening, updating or closing its session; or the
    /// error that refuses it as a whole.
    pub fn begin(
        &self,
        r: &FetchRequest,
        version: i16,
    ) -> Result<(Context, Vec<(Asked, Position)>), i16> {
        let asked = named(r);
        // Most fetches have no session: no lock for them.
        if version < SESSIONS_V || (r.session_id, r.session_epoch) == (0, -1) {
            return Ok((Context::Sessionless, asked));
        }
        let mut cache = self.cache.lock();
        cache.clock += 1;
        let now = cache.clock;
        match (r.session_id, r.session_epoch) {
            // No session; or the last fetch of one, which closes it.
            (id, -1) => {
                cache.sessions.remove(&id);
                Ok((Context::Sessionless, asked))
            }
            // A new session, closing the one named.
            (id, 0) => {
                cache.sessions.remove(&id);
                if cache.sessions.len() >= SLOTS {
                    let oldest = cache
                        .sessions
                        .iter()
                        .min_by_key(|(_, s)| s.used)
                        .map(|(id, _)| *id);
                    if let Some(oldest) = oldest {
                        cache.sessions.remove(&oldest);
                    }
                }
                let id = new_id(&cache.sessions);
                let partitions = asked
                    .iter()
                    .map(|(a, position)| {
                        let p = Partition {
                            position: *position,
                            told: None,
                        };
                        (a.clone(), p)
                    })
                    .collect();
                let session = Session {
                    epoch: 1,
                    partitions,
                    used: now,
                };
                cache.sessions.insert(id, session);
                Ok((Context::Full(id), asked))
            }
            (0, _) => Err(refused(ResponseError::InvalidFetchSessionEpoch)),
            (id, epoch) => {
                let session = cache
                    .sessions
                    .get_mut(&id)
                    .ok_or(refused(ResponseError::FetchSessionIdNotFound))?;
                if epoch != session.epoch {
                    return Err(refused(ResponseError::InvalidFetchSessionEpoch));
                }
                session.epoch = epoch.checked_add(1).unwrap_or(1);
                session.used = now;
                for (a, position) in asked {
                    session
                        .partitions
                        .entry(a)
                        .and_modify(|p| p.position = position)
                        .or_insert(Partition {
                            position,
                            told: None,
                        });
                }
                for t in &r.forgotten_topics_data {
                    for &partition in &t.partitions {
                        session.partitions.remove(&Asked {
                            topic: t.topic.clone(),
                            topic_id: t.topic_id,
                            partition,
                        });
                    }
                }
                let all = session
                    .partitions
                    .iter()
                    .map(|(a, p)| (a.clone(), p.position))
                    .collect();
                Ok((Context::Incremental(id), all))
            }
        }
    }

    /// Closes session `id` (a fetch that opened it was answered without
    /// it: throttled by a quota).
    pub fn forget(&self, id: i32) {
        self.cache.lock().sessions.remove(&id);
    }

    /// Whether partition `asked`'s answer goes out in session `context`:
    /// always in a full one, and in an incremental one only with records,
    /// an error or news (`told` unlike what the session last told).
    /// Records what the answer tells.
    pub fn answer(
        &self,
        context: Context,
        asked: &Asked,
        told: Told,
        records: bool,
        error: i16,
    ) -> bool {
        let (Context::Full(id) | Context::Incremental(id)) = context else {
            return true;
        };
        let mut cache = self.cache.lock();
        let Some(p) = cache
            .sessions
            .get_mut(&id)
            .and_then(|s| s.partitions.get_mut(asked))
        else {
            // Closed or evicted meanwhile: answered as asked.
            return true;
        };
        let news = p.told != Some(told);
        p.told = Some(told);
        !matches!(context, Context::Incremental(_)) || records || error != 0 || news
    }
}
