//! The consumer group protocol's state machine, heartbeat by heartbeat,
//! with no purgatory: the timers it asks for are read off its actions.

use super::assignors::Partitions;
use super::consumer_group::{
    Beat, ConsumerGroup, MemberState, TopicRegex, TopicsView, LEAVE, LEAVE_STATIC,
};
use super::group::Action;
use super::ops::MemberTimer;
use kafka_protocol::error::ResponseError;
use std::collections::BTreeSet;
use std::time::Duration;
use uuid::Uuid;

const SESSION: Duration = Duration::from_secs(45);

fn topic() -> Uuid {
    Uuid::from_u128(7)
}

fn topics(partitions: u32) -> TopicsView {
    TopicsView::from([("orders".to_string(), (topic(), partitions))])
}

fn owned(ps: &[i32]) -> Partitions {
    if ps.is_empty() {
        return Partitions::new();
    }
    Partitions::from([(topic(), ps.iter().copied().collect::<BTreeSet<_>>())])
}

fn of(a: &Partitions) -> Vec<i32> {
    a.get(&topic())
        .map(|ps| ps.iter().copied().collect())
        .unwrap_or_default()
}

fn join(member: &str) -> Beat {
    Beat {
        member_id: member.to_string(),
        epoch: 0,
        instance_id: None,
        rack_id: None,
        rebalance_timeout: Some(Duration::from_secs(30)),
        topic_names: Some(vec!["orders".to_string()]),
        topic_regex: None,
        assignor: None,
        owned: Some(Partitions::new()),
        client_id: "test".to_string(),
        client_host: String::new(),
    }
}

/// A heartbeat that changes nothing but says what the member owns.
fn beat(member: &str, epoch: i32, own: &[i32]) -> Beat {
    Beat {
        epoch,
        rebalance_timeout: None,
        topic_names: None,
        owned: Some(owned(own)),
        ..join(member)
    }
}

struct Run {
    group: ConsumerGroup,
    topics: TopicsView,
    actions: Vec<Action>,
}

impl Run {
    fn new(partitions: u32) -> Run {
        Run {
            group: ConsumerGroup::default(),
            topics: topics(partitions),
            actions: Vec::new(),
        }
    }

    /// Sends `b`; the answer's (epoch, assignment if sent), checking that
    /// no partition is ever owned twice.
    fn send(&mut self, b: Beat) -> Result<(i32, Option<Vec<i32>>), ResponseError> {
        let answer = self
            .group
            .heartbeat(b, &self.topics, SESSION, &mut self.actions);
        assert!(
            !self.group.owned_twice(),
            "a partition owned by two members"
        );
        answer
            .map(|a| (a.epoch, a.assignment.as_ref().map(of)))
            .map_err(|r| r.error)
    }

    fn revocations(&self) -> usize {
        self.actions
            .iter()
            .filter(|a| {
                matches!(
                    a,
                    Action::StartConsumerTimer {
                        timer: MemberTimer::Revocation { .. },
                        ..
                    }
                )
            })
            .count()
    }
}

#[test]
fn a_partition_moves_only_after_its_owner_has_given_it_up() {
    let mut run = Run::new(4);
    assert_eq!(run.send(join("a")), Ok((1, Some(vec![0, 1, 2, 3]))));
    assert_eq!(run.group.state(), "Stable");
    // b joins at epoch 2 and waits: a still owns everything.
    assert_eq!(run.send(join("b")), Ok((2, Some(vec![]))));
    assert_eq!(
        run.group.members["b"].state,
        MemberState::UnreleasedPartitions
    );
    assert_eq!(run.group.state(), "Reconciling");
    // a is told to keep half; its epoch waits until it has let go, and
    // its rebalance timeout starts.
    let (epoch, kept) = run.send(beat("a", 1, &[0, 1, 2, 3])).unwrap();
    assert_eq!(epoch, 1);
    let kept = kept.expect("a changed assignment is sent");
    assert_eq!(kept.len(), 2);
    assert_eq!(run.revocations(), 1);
    // b's heartbeat meanwhile gains nothing.
    assert_eq!(run.send(beat("b", 2, &[])), Ok((2, None)));
    // a says it still owns them all: nothing moves.
    assert_eq!(run.send(beat("a", 1, &[0, 1, 2, 3])), Ok((1, None)));
    // a lets go and reaches epoch 2; then b gets the rest.
    assert_eq!(run.send(beat("a", 1, &kept)), Ok((2, None)));
    let (epoch, gained) = run.send(beat("b", 2, &[])).unwrap();
    assert_eq!(epoch, 2);
    let mut all = gained.unwrap();
    all.extend(&kept);
    all.sort();
    assert_eq!(all, vec![0, 1, 2, 3]);
    assert_eq!(run.group.state(), "Stable");
}

#[test]
fn epochs_ahead_or_behind_are_fenced_but_a_lost_answer_is_forgiven() {
    let mut run = Run::new(2);
    run.send(join("a")).unwrap();
    assert_eq!(
        run.send(beat("a", 5, &[])),
        Err(ResponseError::FencedMemberEpoch)
    );
    assert_eq!(
        run.send(beat("nobody", 1, &[])),
        Err(ResponseError::UnknownMemberId)
    );
    // The join's answer was lost: the member joins again with epoch 0.
    assert_eq!(run.send(join("a")).map(|a| a.0), Ok(1));
    run.send(join("b")).unwrap();
    let kept = run.send(beat("a", 1, &[0, 1])).unwrap().1.unwrap();
    run.send(beat("a", 1, &kept)).unwrap();
    let a = &run.group.members["a"];
    assert_eq!((a.epoch, a.previous_epoch), (2, 1));
    // The previous epoch with a subset of its partitions passes ...
    assert!(run.send(beat("a", 1, &kept)).is_ok());
    // ... but not with partitions it no longer has.
    assert_eq!(
        run.send(beat("a", 1, &[0, 1])),
        Err(ResponseError::FencedMemberEpoch)
    );
}

#[test]
fn a_member_leaving_frees_its_partitions_at_a_new_epoch() {
    let mut run = Run::new(2);
    run.send(join("a")).unwrap();
    run.send(join("b")).unwrap();
    let kept = run.send(beat("a", 1, &[0, 1])).unwrap().1.unwrap();
    run.send(beat("a", 1, &kept)).unwrap();
    let gained = run.send(beat("b", 2, &[])).unwrap().1.unwrap();
    assert_eq!(run.group.state(), "Stable");
    assert_eq!(run.send(beat("b", LEAVE, &gained)), Ok((LEAVE, None)));
    assert!(!run.group.members.contains_key("b"));
    assert_eq!(run.group.epoch, 3);
    assert_eq!(run.send(beat("a", 2, &kept)), Ok((3, Some(vec![0, 1]))));
    assert_eq!(
        run.send(beat("b", LEAVE, &[])),
        Err(ResponseError::UnknownMemberId)
    );
}

#[test]
fn a_static_member_back_under_a_new_id_keeps_its_partitions() {
    let mut run = Run::new(2);
    let static_join = |id: &str| Beat {
        instance_id: Some("host-1".to_string()),
        ..join(id)
    };
    run.send(static_join("a1")).unwrap();
    // A second process with the same instance id is refused while the
    // first is there.
    assert_eq!(
        run.send(static_join("a2")),
        Err(ResponseError::UnreleasedInstanceId)
    );
    assert_eq!(
        run.send(Beat {
            instance_id: Some("host-1".to_string()),
            ..beat("a1", LEAVE_STATIC, &[0, 1])
        }),
        Ok((LEAVE_STATIC, None))
    );
    let epoch = run.group.epoch;
    assert_eq!(run.send(static_join("a2")), Ok((1, Some(vec![0, 1]))));
    assert_eq!(
        run.group.epoch, epoch,
        "no rebalance for a static member's return"
    );
    assert!(!run.group.members.contains_key("a1"));
}

#[test]
fn new_partitions_and_regex_subscriptions_are_taken_up() {
    let mut run = Run::new(2);
    run.send(Beat {
        topic_names: Some(vec![]),
        topic_regex: Some(TopicRegex::new("ord.*".to_string()).unwrap()),
        ..join("a")
    })
    .unwrap();
    assert_eq!(of(&run.group.members["a"].assigned), vec![0, 1]);
    run.topics = topics(3);
    assert_eq!(
        run.send(beat("a", 1, &[0, 1])),
        Ok((2, Some(vec![0, 1, 2])))
    );
    run.topics
        .insert("other".to_string(), (Uuid::from_u128(8), 1));
    assert_eq!(run.send(beat("a", 2, &[0, 1, 2])), Ok((2, None)));
}

#[test]
fn commits_come_from_members_at_their_epoch() {
    let mut run = Run::new(1);
    assert_eq!(run.group.validate_commit("", -1, false, 9), Ok(()));
    run.send(join("a")).unwrap();
    let stale = ResponseError::StaleMemberEpoch.code();
    assert_eq!(run.group.validate_commit("a", 1, false, 9), Ok(()));
    assert_eq!(run.group.validate_commit("a", 0, false, 9), Err(stale));
    assert_eq!(
        run.group.validate_commit("a", 1, false, 8),
        Err(ResponseError::UnsupportedVersion.code())
    );
    assert_eq!(
        run.group.validate_commit("x", 1, false, 9),
        Err(ResponseError::UnknownMemberId.code())
    );
    assert_eq!(run.group.validate_commit("", -1, true, 0), Ok(()));
    assert_eq!(run.group.validate_fetch(Some("a"), 0), Err(stale));
    assert_eq!(run.group.validate_fetch(None, -1), Ok(()));
}

#[test]
fn a_static_member_that_heartbeats_again_after_saying_it_was_leaving_is_back() {
    let mut run = Run::new(2);
    let with_instance = |b: Beat| Beat {
        instance_id: Some("host-1".to_string()),
        ..b
    };
    run.send(with_instance(join("a"))).unwrap();
    run.send(with_instance(beat("a", LEAVE_STATIC, &[0, 1])))
        .unwrap();
    assert!(run.group.members["a"].away);
    // It did not go after all: its session is its own again.
    assert_eq!(
        run.send(with_instance(beat("a", 1, &[0, 1]))),
        Ok((1, None))
    );
    assert!(!run.group.members["a"].away);
}
