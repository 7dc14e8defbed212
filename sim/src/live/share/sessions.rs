//! A broker's share sessions (KIP-932): per group member, the partitions
//! it fetches from there, so that each ShareFetch names only what changed.
//! Epoch 0 opens a session (replacing the member's last one), each later
//! request carries the next epoch, and -1 closes it.

use kafka_protocol::error::ResponseError;
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};
use uuid::Uuid;

/// A partition, by topic id and index.
pub(crate) type Tp = (Uuid, i32);

/// Which request of its session a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Epoch 0: a new session, answered in full.
    Opened,
    /// The next epoch of an open session.
    Continued,
    /// Epoch -1: the session is closed.
    Closed,
}

struct Session {
    next_epoch: i32,
    partitions: BTreeSet<Tp>,
}

/// The share sessions of one broker, by group and member.
#[derive(Default)]
pub(crate) struct ShareSessions {
    sessions: Mutex<HashMap<(String, String), Session>>,
}

impl ShareSessions {
    /// Moves `member`'s session in `group` on for a request at `epoch`
    /// naming `added` partitions and dropping `forgotten` ones; returns
    /// which step it is and the session's partitions (for a close, those it
    /// had). `fetch` is false for ShareAcknowledge, which cannot open one.
    pub fn step(
        &self,
        (group, member): (&str, &str),
        epoch: i32,
        (added, forgotten): (&[Tp], &[Tp]),
        fetch: bool,
    ) -> Result<(Step, Vec<Tp>), ResponseError> {
        let mut sessions = self.sessions.lock();
        let id = (group.to_string(), member.to_string());
        match epoch {
            0 if fetch => {
                let partitions: BTreeSet<Tp> = added.iter().copied().collect();
                let listed = partitions.iter().copied().collect();
                sessions.insert(
                    id,
                    Session {
                        next_epoch: 1,
                        partitions,
                    },
                );
                Ok((Step::Opened, listed))
            }
            0 => Err(ResponseError::InvalidShareSessionEpoch),
            -1 => {
                let session = sessions
                    .remove(&id)
                    .ok_or(ResponseError::ShareSessionNotFound)?;
                Ok((Step::Closed, session.partitions.into_iter().collect()))
            }
            e => {
                let session = sessions
                    .get_mut(&id)
                    .ok_or(ResponseError::ShareSessionNotFound)?;
                if e != session.next_epoch {
                    return Err(ResponseError::InvalidShareSessionEpoch);
                }
                // After i32::MAX comes 1, as in Kafka.
                session.next_epoch = if e == i32::MAX { 1 } else { e + 1 };
                session.partitions.extend(added.iter().copied());
                for tp in forgotten {
                    session.partitions.remove(tp);
                }
                Ok((
                    Step::Continued,
                    session.partitions.iter().copied().collect(),
                ))
            }
        }
    }

    /// Drops `member`'s session in `group` (it left the group).
    pub fn forget(&self, group: &str, member: &str) {
        let id = (group.to_string(), member.to_string());
        self.sessions.lock().remove(&id);
    }

    /// Drops every session (the broker crashed).
    pub fn clear(&self) {
        self.sessions.lock().clear();
    }

    /// Open sessions.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.sessions.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: (&str, &str) = ("g", "m");

    fn tp(p: i32) -> Tp {
        (Uuid::from_u128(7), p)
    }

    #[test]
    fn a_session_opens_moves_on_by_epoch_and_closes() {
        let s = ShareSessions::default();
        let (step, parts) = s.step(M, 0, (&[tp(0)], &[]), true).unwrap();
        assert_eq!((step, parts), (Step::Opened, vec![tp(0)]));
        let (step, parts) = s.step(M, 1, (&[tp(1)], &[]), true).unwrap();
        assert_eq!((step, parts), (Step::Continued, vec![tp(0), tp(1)]));
        // Epoch 2 is next: 1 again, or 3, is refused.
        assert_eq!(
            s.step(M, 1, (&[], &[]), true),
            Err(ResponseError::InvalidShareSessionEpoch)
        );
        let (_, parts) = s.step(M, 2, (&[], &[tp(0)]), false).unwrap();
        assert_eq!(parts, vec![tp(1)]);
        assert_eq!(s.step(M, -1, (&[], &[]), false).unwrap().0, Step::Closed);
        assert_eq!(s.len(), 0);
        assert_eq!(
            s.step(M, 4, (&[], &[]), true),
            Err(ResponseError::ShareSessionNotFound)
        );
        // ShareAcknowledge cannot open a session.
        assert_eq!(
            s.step(M, 0, (&[], &[]), false),
            Err(ResponseError::InvalidShareSessionEpoch)
        );
    }
}
