//! A share group's membership (KIP-932), as its coordinator keeps it: the
//! members, each with its subscription, epoch and session, and the group's
//! epoch. Partitions are shared, so assigning is simple: every member gets
//! every partition of the topics it subscribes to (Kafka's
//! `SimpleAssignor` as of trunk `0bbed823`), and no member ever has
//! anything to give up first, unlike in a consumer group.

use super::assignors::Partitions;
use super::consumer_group::{Refusal, Topics, LEAVE};
use super::group::Action;
use super::ops::{MemberTimer, SessionCompleter};
use kafka_protocol::error::ResponseError;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// One member of a share group.
pub struct ShareMember {
    pub client_id: String,
    /// `/address`, as ShareGroupDescribe gives it (empty where unknown).
    pub client_host: String,
    pub rack_id: Option<String>,
    pub topic_names: BTreeSet<String>,
    pub epoch: i32,
    /// The last assignment it was sent.
    pub assigned: Partitions,
    /// Its session: expires `session_timeout` after its last heartbeat.
    pub session: Option<SessionCompleter>,
    pub session_timeout: Duration,
    pub last_beat: Instant,
    /// Which joining under its id this is (see the consumer group's).
    pub incarnation: u64,
}

/// A share group's members.
#[derive(Default)]
pub struct ShareGroup {
    /// Moves on whenever membership or a subscription changes.
    pub epoch: i32,
    pub members: BTreeMap<String, ShareMember>,
    incarnations: u64,
}

/// A ShareGroupHeartbeat, decoded.
pub struct ShareBeat {
    pub member_id: String,
    pub epoch: i32,
    pub rack_id: Option<String>,
    /// `None`: unchanged since the last heartbeat.
    pub topic_names: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

/// What a heartbeat is answered.
#[derive(Debug, PartialEq, Eq)]
pub struct ShareAnswer {
    pub epoch: i32,
    /// Sent when it changed (and at the join).
    pub assignment: Option<Partitions>,
}

impl ShareGroup {
    /// "Empty" or "Stable", as Kafka names a share group's states.
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else {
            "Stable"
        }
    }

    /// Handles a heartbeat: a join (epoch 0), a leave (-1) or a member
    /// staying. Timers to start, push back or end go to `actions`.
    pub fn heartbeat(
        &mut self,
        beat: ShareBeat,
        topics: &dyn Topics,
        session_timeout: Duration,
        actions: &mut Vec<Action>,
    ) -> Result<ShareAnswer, Refusal> {
        let id = beat.member_id.clone();
        match beat.epoch {
            0 => {
                let Some(names) = beat.topic_names else {
                    return Err(Refusal::new(
                        ResponseError::InvalidRequest,
                        "SubscribedTopicNames must be set in first request.",
                    ));
                };
                if let Some(old) = self.members.remove(&id) {
                    // Joining again under its id: its old session ends.
                    actions.extend(old.session.map(Action::EndSession));
                }
                self.epoch += 1;
                self.incarnations += 1;
                let topic_names: BTreeSet<String> = names.into_iter().collect();
                let assigned = assignment(&topic_names, topics);
                self.members.insert(
                    id.clone(),
                    ShareMember {
                        client_id: beat.client_id,
                        client_host: beat.client_host,
                        rack_id: beat.rack_id,
                        topic_names,
                        epoch: self.epoch,
                        assigned: assigned.clone(),
                        session: None,
                        session_timeout,
                        last_beat: Instant::now(),
                        incarnation: self.incarnations,
                    },
                );
                actions.push(Action::StartConsumerTimer {
                    member: id,
                    incarnation: self.incarnations,
                    timeout: session_timeout,
                    timer: MemberTimer::Session,
                });
                Ok(ShareAnswer {
                    epoch: self.epoch,
                    assignment: Some(assigned),
                })
            }
            LEAVE => {
                let Some(m) = self.members.remove(&id) else {
                    return Err(unknown(&id));
                };
                actions.extend(m.session.map(Action::EndSession));
                self.epoch += 1;
                Ok(ShareAnswer {
                    epoch: LEAVE,
                    assignment: None,
                })
            }
            epoch => {
                let group_epoch = self.epoch;
                let Some(m) = self.members.get_mut(&id) else {
                    return Err(unknown(&id));
                };
                if epoch != m.epoch {
                    let message = format!(
                        "The share group member has a smaller member epoch ({epoch}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
                        m.epoch
                    );
                    return Err(Refusal::new(ResponseError::FencedMemberEpoch, message));
                }
                m.last_beat = Instant::now();
                if let Some(s) = &m.session {
                    actions.push(Action::Beat(s.clone(), m.session_timeout));
                }
                let mut changed = false;
                if let Some(names) = beat.topic_names {
                    let names: BTreeSet<String> = names.into_iter().collect();
                    changed = names != m.topic_names;
                    m.topic_names = names;
                }
                // Topics made or grown since, too.
                let target = assignment(&m.topic_names, topics);
                let moved = target != m.assigned || changed;
                let new_epoch = if moved { group_epoch + 1 } else { group_epoch };
                if moved {
                    m.assigned = target;
                }
                let answer = if new_epoch != m.epoch {
                    m.epoch = new_epoch;
                    Some(m.assigned.clone())
                } else {
                    None
                };
                self.epoch = new_epoch;
                Ok(ShareAnswer {
                    epoch: new_epoch,
                    assignment: answer,
                })
            }
        }
    }

    /// Removes `member` (its session ran out), returning its timer.
    pub fn remove(&mut self, member: &str) -> Option<SessionCompleter> {
        let m = self.members.remove(member)?;
        self.epoch += 1;
        m.session
    }
}

fn unknown(member: &str) -> Refusal {
    let message = format!("Member {member} is not a member of the share group.");
    Refusal::new(ResponseError::UnknownMemberId, message)
}

/// Every partition of every existing topic in `names`.
fn assignment(names: &BTreeSet<String>, topics: &dyn Topics) -> Partitions {
    let mut out = Partitions::new();
    for name in names {
        if let Some((id, count)) = topics.topic(name) {
            out.insert(id, (0..count as i32).collect());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::consumer_group::TopicsView;
    use super::*;
    use uuid::Uuid;

    fn beat(member: &str, epoch: i32, topics: Option<&[&str]>) -> ShareBeat {
        ShareBeat {
            member_id: member.to_string(),
            epoch,
            rack_id: None,
            topic_names: topics.map(|t| t.iter().map(|s| s.to_string()).collect()),
            client_id: "test".to_string(),
            client_host: String::new(),
        }
    }

    #[test]
    fn every_member_gets_every_partition_and_follows_the_group_epoch() {
        let id = Uuid::from_u128(1);
        let mut topics = TopicsView::new();
        topics.insert("t".to_string(), (id, 2));
        let mut g = ShareGroup::default();
        let mut actions = Vec::new();
        let t = Duration::from_secs(45);
        let a = g.heartbeat(
            beat("a", 0, Some(&["t", "missing"])),
            &topics,
            t,
            &mut actions,
        );
        let all: Partitions = [(id, [0, 1].into_iter().collect())].into_iter().collect();
        assert_eq!(a.unwrap().assignment, Some(all.clone()));
        let b = g
            .heartbeat(beat("b", 0, Some(&["t"])), &topics, t, &mut actions)
            .unwrap();
        assert_eq!((b.epoch, b.assignment), (2, Some(all.clone())));
        // "a" is at epoch 1; nothing changed for it but the group's epoch.
        let a = g
            .heartbeat(beat("a", 1, None), &topics, t, &mut actions)
            .unwrap();
        assert_eq!((a.epoch, a.assignment), (2, Some(all)));
        let a = g
            .heartbeat(beat("a", 2, None), &topics, t, &mut actions)
            .unwrap();
        assert_eq!((a.epoch, a.assignment), (2, None));
        // A grown topic is handed out at the next heartbeat.
        topics.insert("t".to_string(), (id, 3));
        let a = g
            .heartbeat(beat("a", 2, None), &topics, t, &mut actions)
            .unwrap();
        assert_eq!(a.epoch, 3);
        assert_eq!(a.assignment.unwrap()[&id].len(), 3);
        let stale = g.heartbeat(beat("b", 1, None), &topics, t, &mut actions);
        assert_eq!(stale.unwrap_err().error, ResponseError::FencedMemberEpoch);
        let left = g
            .heartbeat(beat("b", LEAVE, None), &topics, t, &mut actions)
            .unwrap();
        assert_eq!(left.epoch, LEAVE);
        let gone = g.heartbeat(beat("b", 2, None), &topics, t, &mut actions);
        assert_eq!(gone.unwrap_err().error, ResponseError::UnknownMemberId);
        assert_eq!(g.state(), "Stable");
        let joined = g.heartbeat(beat("c", 0, None), &topics, t, &mut actions);
        assert_eq!(joined.unwrap_err().error, ResponseError::InvalidRequest);
    }
}
