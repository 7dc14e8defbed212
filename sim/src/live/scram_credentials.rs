//! Users' SCRAM credentials as admin clients manage them
//! (AlterUserScramCredentials, DescribeUserScramCredentials), with the
//! rules of Kafka's controller (`ScramControlManager`) and the answers of
//! its brokers (`ScramImage::describe`).
//!
//! A credential is kept as Kafka keeps one: the salt, the iteration count,
//! and the stored and server keys derived from the salted password the
//! admin client sent (the password itself never reaches the broker). With
//! SASL on the listeners (`--sasl-user`), SCRAM-SHA-256 and SCRAM-SHA-512
//! authenticate against them, so a user created here can connect at once.

use super::service::BrokerService;
use crate::wire::sasl::{random_salt, Mechanism, ScramSecret};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use std::collections::BTreeMap;

/// The mechanisms Kafka defines, by their wire number: SCRAM-SHA-256 (1)
/// and SCRAM-SHA-512 (2). Both need at least 4,096 iterations.
const MECHANISMS: [i8; 2] = [1, 2];
const MIN_ITERATIONS: i32 = 4096;
/// Kafka's upper bound for any mechanism.
const MAX_ITERATIONS: i32 = 16384;

/// Each user's credentials: mechanism (Kafka's wire number) to secret.
#[derive(Debug, Default)]
pub struct ScramCredentials {
    users: Mutex<BTreeMap<String, BTreeMap<i8, ScramSecret>>>,
}

/// The iterations of the credentials made from a password given on the
/// command line (the least Kafka accepts, as `kafka-storage format
/// --add-scram` uses by default).
const SEEDED_ITERATIONS: i32 = MIN_ITERATIONS;

/// A change asked for one user.
enum Change {
    Delete(i8),
    /// The mechanism, iterations, salt and salted password.
    Upsert(i8, i32, Vec<u8>, Vec<u8>),
}

impl ScramCredentials {
    /// Applies the request's deletions and upsertions that pass Kafka's
    /// checks, all at once, and answers each user: a user named twice in
    /// the request (in either list) is refused DUPLICATE_RESOURCE and
    /// changes nothing; an empty name UNACCEPTABLE_CREDENTIAL; a mechanism
    /// other than the two UNSUPPORTED_SASL_MECHANISM; iterations outside
    /// 4,096..=16,384 UNACCEPTABLE_CREDENTIAL; deleting a credential that
    /// does not exist RESOURCE_NOT_FOUND.
    pub fn alter(
        &self,
        r: &AlterUserScramCredentialsRequest,
    ) -> Vec<AlterUserScramCredentialsResult> {
        let mut users = self.users.lock();
        // In request order: each user's change, or why it was refused.
        let mut asked: Vec<(String, Result<Change, Refusal>)> = Vec::new();
        let deletions = r
            .deletions
            .iter()
            .map(|d| (&d.name, Change::Delete(d.mechanism)));
        let upsertions = (r.upsertions.iter()).map(|u| {
            let change = Change::Upsert(
                u.mechanism,
                u.iterations,
                u.salt.to_vec(),
                u.salted_password.to_vec(),
            );
            (&u.name, change)
        });
        for (name, change) in deletions.chain(upsertions) {
            let name = name.to_string();
            match asked.iter_mut().find(|(n, _)| *n == name) {
                // Once refused, a user stays refused for the first reason.
                Some((_, Err(_))) => {}
                Some((_, slot)) => *slot = Err(Refusal::DUPLICATE),
                None => {
                    let checked = check(&users, &name, change);
                    asked.push((name, checked));
                }
            }
        }
        let mut results = Vec::with_capacity(asked.len());
        // As Kafka lists them: deletions, then upsertions, then refusals
        // (a stable sort keeps the request's order within each).
        asked.sort_by_key(|(_, outcome)| match outcome {
            Ok(Change::Delete(_)) => 0,
            Ok(Change::Upsert(..)) => 1,
            Err(_) => 2,
        });
        for (name, outcome) in asked {
            let mut result = AlterUserScramCredentialsResult::default();
            result.error_message = None;
            match outcome {
                Ok(Change::Delete(mechanism)) => {
                    // It exists: the check made sure.
                    if let Some(credentials) = users.get_mut(&name) {
                        credentials.remove(&mechanism);
                        if credentials.is_empty() {
                            users.remove(&name);
                        }
                    }
                }
                Ok(Change::Upsert(number, iterations, salt, salted)) => {
                    // The check let only the two mechanisms and positive
                    // iteration counts through.
                    if let Some(mechanism) = Mechanism::scram_of(number) {
                        let secret =
                            ScramSecret::from_salted(mechanism, &salt, &salted, iterations as u32);
                        (users.entry(name.clone()).or_default()).insert(number, secret);
                    }
                }
                Err(refusal) => {
                    result.error_code = refusal.error.code();
                    result.error_message = Some(StrBytes::from_static_str(refusal.message));
                }
            }
            result.user = StrBytes::from_string(name);
            results.push(result);
        }
        results
    }

    /// Describes the users named, or every user with a credential if none
    /// are: each one's mechanisms and iterations, RESOURCE_NOT_FOUND for a
    /// user without any, DUPLICATE_RESOURCE for one named twice.
    pub fn describe(
        &self,
        r: &DescribeUserScramCredentialsRequest,
    ) -> Vec<DescribeUserScramCredentialsResult> {
        let users = self.users.lock();
        // Each user once, in the order asked, with whether it was named
        // more than once.
        let mut asked: Vec<(String, bool)> = Vec::new();
        match r.users.as_deref() {
            None | Some([]) => asked.extend(users.keys().map(|u| (u.clone(), false))),
            Some(named) => {
                for user in named {
                    let name = user.name.to_string();
                    match asked.iter_mut().find(|(n, _)| *n == name) {
                        Some((_, twice)) => *twice = true,
                        None => asked.push((name, false)),
                    }
                }
            }
        }
        asked
            .into_iter()
            .map(|(name, twice)| {
                let mut result = DescribeUserScramCredentialsResult::default();
                result.error_message = None;
                let found = users.get(&name);
                if twice {
                    result.error_code = ResponseError::DuplicateResource.code();
                    result.error_message = Some(StrBytes::from_string(format!(
                        "Cannot describe SCRAM credentials for the same user twice in a single request: {name}"
                    )));
                } else if let Some(credentials) = found {
                    result.credential_infos = credentials
                        .iter()
                        .map(|(&mechanism, secret)| {
                            let mut info = CredentialInfo::default();
                            info.mechanism = mechanism;
                            info.iterations = secret.iterations as i32;
                            info
                        })
                        .collect();
                } else {
                    result.error_code = ResponseError::ResourceNotFound.code();
                    result.error_message = Some(StrBytes::from_string(format!(
                        "Attempt to describe a user credential that does not exist: {name}"
                    )));
                }
                result.user = StrBytes::from_string(name);
                result
            })
            .collect()
    }

    /// `user`'s credential for a SCRAM `mechanism`, if it has one.
    pub fn secret(&self, mechanism: Mechanism, user: &str) -> Option<ScramSecret> {
        let number = mechanism.scram_number()?;
        self.users.lock().get(user)?.get(&number).cloned()
    }

    /// The credentials of the users given passwords on the command line.
    pub fn seeded(users: &BTreeMap<String, String>) -> Self {
        let store = ScramCredentials::default();
        for (user, password) in users {
            store.seed(user, password);
        }
        store
    }

    /// Gives `user` both SCRAM credentials for `password`, each with a
    /// salt of its own, as `kafka-storage format --add-scram` does before
    /// a cluster first starts.
    pub fn seed(&self, user: &str, password: &str) {
        let mut users = self.users.lock();
        let credentials = users.entry(user.to_string()).or_default();
        for number in MECHANISMS {
            let mechanism = Mechanism::scram_of(number).expect("the two SCRAM mechanisms");
            let iterations = SEEDED_ITERATIONS as u32;
            let secret =
                ScramSecret::from_password(mechanism, password, &random_salt(), iterations);
            credentials.insert(number, secret);
        }
    }
}

/// Why a user's change was refused: the error and Kafka's message.
struct Refusal {
    error: ResponseError,
    message: &'static str,
}

impl Refusal {
    const DUPLICATE: Refusal = Refusal {
        error: ResponseError::DuplicateResource,
        message: "A user credential cannot be altered twice in the same request",
    };
}

/// Kafka's checks of one change, against the credentials before the
/// request.
fn check(
    users: &BTreeMap<String, BTreeMap<i8, ScramSecret>>,
    name: &str,
    change: Change,
) -> Result<Change, Refusal> {
    let refused = |error, message| Err(Refusal { error, message });
    let mechanism = match change {
        Change::Delete(m) | Change::Upsert(m, ..) => m,
    };
    if name.is_empty() {
        return refused(
            ResponseError::UnacceptableCredential,
            "Username must not be empty",
        );
    }
    if !MECHANISMS.contains(&mechanism) {
        return refused(
            ResponseError::UnsupportedSaslMechanism,
            "Unknown SCRAM mechanism",
        );
    }
    match change {
        Change::Upsert(_, iterations, ..) if iterations < MIN_ITERATIONS => {
            refused(ResponseError::UnacceptableCredential, "Too few iterations")
        }
        Change::Upsert(_, iterations, ..) if iterations > MAX_ITERATIONS => {
            refused(ResponseError::UnacceptableCredential, "Too many iterations")
        }
        Change::Delete(m) if !users.get(name).is_some_and(|c| c.contains_key(&m)) => refused(
            ResponseError::ResourceNotFound,
            "Attempt to delete a user credential that does not exist",
        ),
        change => Ok(change),
    }
}

impl BrokerService {
    pub(crate) fn alter_user_scram_credentials(
        &self,
        r: AlterUserScramCredentialsRequest,
    ) -> AlterUserScramCredentialsResponse {
        let mut response = AlterUserScramCredentialsResponse::default();
        response.results = self.cluster.scram.alter(&r);
        response
    }

    pub(crate) fn describe_user_scram_credentials(
        &self,
        r: DescribeUserScramCredentialsRequest,
    ) -> DescribeUserScramCredentialsResponse {
        let mut response = DescribeUserScramCredentialsResponse::default();
        response.error_message = None;
        response.results = self.cluster.scram.describe(&r);
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use std::collections::HashMap;

    fn s(v: &str) -> StrBytes {
        StrBytes::from_string(v.to_string())
    }

    fn upsert(name: &str, mechanism: i8, iterations: i32) -> ScramCredentialUpsertion {
        let mut u = ScramCredentialUpsertion::default();
        u.name = s(name);
        u.mechanism = mechanism;
        u.iterations = iterations;
        u.salt = bytes::Bytes::from_static(b"salt");
        u.salted_password = bytes::Bytes::from_static(&[7; 32]);
        u
    }

    fn delete(name: &str, mechanism: i8) -> ScramCredentialDeletion {
        let mut d = ScramCredentialDeletion::default();
        d.name = s(name);
        d.mechanism = mechanism;
        d
    }

    fn alter(
        store: &ScramCredentials,
        deletions: Vec<ScramCredentialDeletion>,
        upsertions: Vec<ScramCredentialUpsertion>,
    ) -> HashMap<String, i16> {
        let mut r = AlterUserScramCredentialsRequest::default();
        r.deletions = deletions;
        r.upsertions = upsertions;
        let results = store.alter(&r);
        let answered: HashMap<String, i16> = results
            .iter()
            .map(|x| (x.user.to_string(), x.error_code))
            .collect();
        assert_eq!(answered.len(), results.len(), "one result per user");
        answered
    }

    fn describe(store: &ScramCredentials, users: Option<&[&str]>) -> Vec<Described> {
        let mut r = DescribeUserScramCredentialsRequest::default();
        r.users = users.map(|names| {
            names
                .iter()
                .map(|n| {
                    let mut u = UserName::default();
                    u.name = s(n);
                    u
                })
                .collect()
        });
        store
            .describe(&r)
            .into_iter()
            .map(|x| {
                let infos = x
                    .credential_infos
                    .iter()
                    .map(|i| (i.mechanism, i.iterations))
                    .collect();
                (x.user.to_string(), x.error_code, infos)
            })
            .collect()
    }

    /// A user as described: its name, the error, its (mechanism,
    /// iterations).
    type Described = (String, i16, Vec<(i8, i32)>);

    const NOT_FOUND: i16 = 91;
    const DUPLICATE: i16 = 92;
    const UNACCEPTABLE: i16 = 93;
    const UNSUPPORTED_MECHANISM: i16 = 33;

    #[test]
    fn codes_are_kafkas() {
        assert_eq!(ResponseError::ResourceNotFound.code(), NOT_FOUND);
        assert_eq!(ResponseError::DuplicateResource.code(), DUPLICATE);
        assert_eq!(ResponseError::UnacceptableCredential.code(), UNACCEPTABLE);
        assert_eq!(
            ResponseError::UnsupportedSaslMechanism.code(),
            UNSUPPORTED_MECHANISM
        );
    }

    #[test]
    fn credentials_are_set_described_replaced_and_deleted() {
        let store = ScramCredentials::default();
        let set = alter(
            &store,
            vec![],
            vec![upsert("alice", 1, 8192), upsert("bob", 2, 4096)],
        );
        assert_eq!(set, HashMap::from([("alice".into(), 0), ("bob".into(), 0)]));
        let more = alter(&store, vec![], vec![upsert("alice", 2, 10000)]);
        assert_eq!(more["alice"], 0);
        assert_eq!(
            describe(&store, None),
            vec![
                ("alice".into(), 0, vec![(1, 8192), (2, 10000)]),
                ("bob".into(), 0, vec![(2, 4096)]),
            ]
        );
        // Replaced in place, then deleted one mechanism at a time.
        assert_eq!(
            alter(&store, vec![], vec![upsert("bob", 2, 5000)])["bob"],
            0
        );
        assert_eq!(alter(&store, vec![delete("alice", 1)], vec![])["alice"], 0);
        assert_eq!(
            describe(&store, Some(&["alice", "bob"])),
            vec![
                ("alice".into(), 0, vec![(2, 10000)]),
                ("bob".into(), 0, vec![(2, 5000)]),
            ]
        );
        assert_eq!(alter(&store, vec![delete("alice", 2)], vec![])["alice"], 0);
        // Gone entirely once its last credential is.
        assert_eq!(describe(&store, Some(&["alice"]))[0].1, NOT_FOUND);
        assert_eq!(describe(&store, None).len(), 1);
    }

    #[test]
    fn each_bad_change_is_refused_alone_and_the_others_apply() {
        let store = ScramCredentials::default();
        alter(&store, vec![], vec![upsert("twice", 1, 4096)]);
        let answered = alter(
            &store,
            vec![delete("ghost", 1), delete("twice", 1), delete("ghost2", 1)],
            vec![
                upsert("", 1, 4096),
                upsert("odd", 3, 4096),
                upsert("few", 1, 4095),
                upsert("many", 2, 16385),
                upsert("twice", 1, 8192),
                upsert("ghost2", 1, 4096),
                upsert("fine", 1, 16384),
            ],
        );
        assert_eq!(answered["ghost"], NOT_FOUND);
        // Named in both lists: refused, and nothing of it applies.
        assert_eq!(answered["twice"], DUPLICATE);
        // Refused already (nothing to delete): it keeps that answer, as in
        // Kafka, and its upsertion is not applied either.
        assert_eq!(answered["ghost2"], NOT_FOUND);
        assert_eq!(answered[""], UNACCEPTABLE);
        assert_eq!(answered["odd"], UNSUPPORTED_MECHANISM);
        assert_eq!(answered["few"], UNACCEPTABLE);
        assert_eq!(answered["many"], UNACCEPTABLE);
        assert_eq!(answered["fine"], 0);
        assert_eq!(
            describe(&store, None),
            vec![
                ("fine".into(), 0, vec![(1, 16384)]),
                ("twice".into(), 0, vec![(1, 4096)]),
            ]
        );
        // Twice in one list is a duplicate as well, even a valid change.
        let again = alter(
            &store,
            vec![],
            vec![upsert("fine", 1, 5000), upsert("fine", 2, 5000)],
        );
        assert_eq!(again["fine"], DUPLICATE);
        assert_eq!(describe(&store, Some(&["fine"]))[0].2, vec![(1, 16384)]);
    }

    #[test]
    fn a_user_named_twice_or_unknown_is_answered_so() {
        let store = ScramCredentials::default();
        alter(&store, vec![], vec![upsert("alice", 1, 4096)]);
        let described = describe(&store, Some(&["alice", "nobody", "alice"]));
        let codes: Vec<(String, i16)> = described.into_iter().map(|(u, e, _)| (u, e)).collect();
        assert_eq!(
            codes,
            vec![("alice".into(), DUPLICATE), ("nobody".into(), NOT_FOUND)]
        );
        // An empty list is every user, as a null one.
        assert_eq!(describe(&store, Some(&[])).len(), 1);
    }
}
