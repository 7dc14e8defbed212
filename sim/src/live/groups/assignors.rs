//! The server-side assignors of the consumer group protocol (KIP-848):
//! given each member's subscribed topics, which partitions each member
//! should own. Kafka's names: `uniform` (the default) and `range`.

use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// Partitions by topic id.
pub type Partitions = BTreeMap<Uuid, BTreeSet<i32>>;

/// The assignors a member may ask for, the default first.
pub const ASSIGNORS: [&str; 2] = ["uniform", "range"];

/// What an assignor is given: each member's subscribed topic ids, and each
/// subscribed topic's partition count.
pub struct Spec<'a> {
    pub members: &'a BTreeMap<String, BTreeSet<Uuid>>,
    pub topics: &'a BTreeMap<Uuid, u32>,
}

/// Runs the assignor called `name` (the default for an unknown name).
pub fn assign(
    name: &str,
    spec: &Spec<'_>,
    previous: &BTreeMap<String, Partitions>,
) -> BTreeMap<String, Partitions> {
    match name {
        "range" => range(spec),
        _ => uniform(spec, previous),
    }
}

/// Every subscribed partition to one of its topic's subscribers, the
/// counts as even as the subscriptions allow, and each partition left
/// where `previous` had it when that keeps them even (sticky: a member
/// joining or leaving moves only the partitions it must).
pub fn uniform(
    spec: &Spec<'_>,
    previous: &BTreeMap<String, Partitions>,
) -> BTreeMap<String, Partitions> {
    let subscribes = |member: &str, topic: &Uuid| spec.members[member].contains(topic);
    let exists = |topic: &Uuid, p: i32| {
        spec.topics
            .get(topic)
            .is_some_and(|&n| p >= 0 && (p as u32) < n)
    };
    let mut owner: BTreeMap<(Uuid, i32), &str> = BTreeMap::new();
    let mut count: BTreeMap<&str, usize> = spec.members.keys().map(|m| (m.as_str(), 0)).collect();
    // What each member had and may keep.
    for (member, had) in previous {
        let Some((member, _)) = spec.members.get_key_value(member) else {
            continue;
        };
        for (topic, partitions) in had {
            for &p in partitions {
                if subscribes(member, topic)
                    && exists(topic, p)
                    && !owner.contains_key(&(*topic, p))
                {
                    owner.insert((*topic, p), member);
                    *count.get_mut(member.as_str()).expect("a member") += 1;
                }
            }
        }
    }
    let subscribers = |topic: Uuid| {
        spec.members
            .iter()
            .filter(move |(_, topics)| topics.contains(&topic))
            .map(|(m, _)| m.as_str())
    };
    // The rest, each to its least loaded subscriber.
    for (topic, &n) in spec.topics {
        for p in 0..n as i32 {
            if owner.contains_key(&(*topic, p)) {
                continue;
            }
            let least = subscribers(*topic).min_by_key(|m| (count[m], *m));
            if let Some(m) = least {
                owner.insert((*topic, p), m);
                *count.get_mut(m).expect("a member") += 1;
            }
        }
    }
    // Then partitions move from the most loaded to a less loaded
    // subscriber while that narrows the gap by two or more. Each move
    // lowers the sum of the squared counts, so this ends.
    loop {
        let mut moved = false;
        let partitions: Vec<((Uuid, i32), &str)> = owner.iter().map(|(k, v)| (*k, *v)).collect();
        for ((topic, p), from) in partitions {
            let to = subscribers(topic).min_by_key(|m| (count[m], *m));
            if let Some(to) = to {
                if count[to] + 1 < count[from] {
                    owner.insert((topic, p), to);
                    *count.get_mut(from).expect("a member") -= 1;
                    *count.get_mut(to).expect("a member") += 1;
                    moved = true;
                }
            }
        }
        if !moved {
            break;
        }
    }
    let mut out: BTreeMap<String, Partitions> = spec
        .members
        .keys()
        .map(|m| (m.clone(), Partitions::new()))
        .collect();
    for ((topic, p), member) in owner {
        let member = out.get_mut(member).expect("a member");
        member.entry(topic).or_default().insert(p);
    }
    out
}

/// Each topic's partitions in ranges over its subscribers in member id
/// order, the first ones one partition more when they do not divide
/// evenly: members subscribed to the same topics get the same partition
/// numbers of each (co-partitioning).
pub fn range(spec: &Spec<'_>) -> BTreeMap<String, Partitions> {
    let mut out: BTreeMap<String, Partitions> = spec
        .members
        .keys()
        .map(|m| (m.clone(), Partitions::new()))
        .collect();
    for (topic, &n) in spec.topics {
        let subscribers: Vec<&String> = spec
            .members
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(m, _)| m)
            .collect();
        if subscribers.is_empty() {
            continue;
        }
        let (each, extra) = (
            n as usize / subscribers.len(),
            n as usize % subscribers.len(),
        );
        let mut next = 0;
        for (i, member) in subscribers.into_iter().enumerate() {
            let take = each + usize::from(i < extra);
            let partitions = (next..next + take)
                .map(|p| p as i32)
                .collect::<BTreeSet<_>>();
            next += take;
            if !partitions.is_empty() {
                out.get_mut(member)
                    .expect("a member")
                    .insert(*topic, partitions);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn members(subs: &[(&str, &[u128])]) -> BTreeMap<String, BTreeSet<Uuid>> {
        subs.iter()
            .map(|(m, t)| (m.to_string(), t.iter().map(|&n| topic(n)).collect()))
            .collect()
    }

    fn sizes(a: &BTreeMap<String, Partitions>) -> Vec<usize> {
        a.values()
            .map(|p| p.values().map(BTreeSet::len).sum())
            .collect()
    }

    /// Every subscribed partition is assigned exactly once, and only to a
    /// subscriber of its topic.
    fn each_once(spec: &Spec<'_>, a: &BTreeMap<String, Partitions>) {
        let mut seen = BTreeSet::new();
        for (m, parts) in a {
            for (t, ps) in parts {
                assert!(spec.members[m].contains(t), "{m} is not subscribed to {t}");
                for &p in ps {
                    assert!(seen.insert((*t, p)), "{t}-{p} twice");
                }
            }
        }
        let subscribed: BTreeSet<&Uuid> = spec.members.values().flatten().collect();
        let expected: usize = spec
            .topics
            .iter()
            .filter(|(t, _)| subscribed.contains(t))
            .map(|(_, &n)| n as usize)
            .sum();
        assert_eq!(seen.len(), expected);
    }

    #[test]
    fn uniform_balances_and_moves_only_what_a_new_member_needs() {
        let topics = BTreeMap::from([(topic(1), 5), (topic(2), 4)]);
        let two = members(&[("a", &[1, 2]), ("b", &[1, 2])]);
        let spec = Spec {
            members: &two,
            topics: &topics,
        };
        let first = uniform(&spec, &BTreeMap::new());
        each_once(&spec, &first);
        assert_eq!(sizes(&first), vec![5, 4]);
        let three = members(&[("a", &[1, 2]), ("b", &[1, 2]), ("c", &[1, 2])]);
        let spec = Spec {
            members: &three,
            topics: &topics,
        };
        let second = uniform(&spec, &first);
        each_once(&spec, &second);
        assert_eq!(sizes(&second), vec![3, 3, 3]);
        // a and b only gave partitions up.
        for m in ["a", "b"] {
            for (t, ps) in &second[m] {
                assert!(
                    ps.is_subset(&first[m][t]),
                    "{m} was given a partition it did not have"
                );
            }
        }
    }

    #[test]
    fn uniform_gives_each_partition_to_a_subscriber_of_its_topic() {
        let topics = BTreeMap::from([(topic(1), 6), (topic(2), 2), (topic(3), 1)]);
        let subs = members(&[("a", &[1]), ("b", &[1, 2]), ("c", &[2]), ("d", &[])]);
        let spec = Spec {
            members: &subs,
            topics: &topics,
        };
        let a = uniform(&spec, &BTreeMap::new());
        each_once(&spec, &a);
        // Topic 3 has no subscriber; d has no topic; b takes topic 1's
        // partitions that a cannot, so that c gets all of topic 2.
        assert!(a["d"].is_empty());
        assert_eq!(sizes(&a), vec![3, 3, 2, 0]);
    }

    #[test]
    fn uniform_forgets_deleted_topics_and_partitions() {
        let topics = BTreeMap::from([(topic(1), 2)]);
        let subs = members(&[("a", &[1])]);
        let previous = BTreeMap::from([(
            "a".to_string(),
            Partitions::from([
                (topic(1), BTreeSet::from([0, 1, 2])),
                (topic(9), BTreeSet::from([0])),
            ]),
        )]);
        let spec = Spec {
            members: &subs,
            topics: &topics,
        };
        let a = uniform(&spec, &previous);
        assert_eq!(
            a["a"],
            Partitions::from([(topic(1), BTreeSet::from([0, 1]))])
        );
    }

    #[test]
    fn range_splits_each_topic_in_member_order() {
        let topics = BTreeMap::from([(topic(1), 5), (topic(2), 5)]);
        let subs = members(&[("a", &[1, 2]), ("b", &[1, 2])]);
        let spec = Spec {
            members: &subs,
            topics: &topics,
        };
        let a = range(&spec);
        each_once(&spec, &a);
        let first = BTreeSet::from([0, 1, 2]);
        assert_eq!(a["a"][&topic(1)], first);
        assert_eq!(a["a"][&topic(2)], first);
        assert_eq!(a["b"][&topic(2)], BTreeSet::from([3, 4]));
    }
}
