//! A connection's authentication on a SASL listener: which requests it
//! admits before, during and after, as Kafka's `SaslServerAuthenticator`
//! admits them.
//!
//! Before a client has authenticated, only ApiVersions (the front's own),
//! then one SaslHandshake naming a mechanism, then the SaslAuthenticate
//! requests carrying its tokens are served; any other request closes the
//! connection unanswered. After a SaslHandshake v0 the tokens come bare,
//! each in a size-prefixed frame of its own outside Kafka's request
//! framing, and go back the same way (librdkafka 2.0 requires that the
//! handshake's v0 be served, though it then sends v1). A handshake naming a mechanism not served, and
//! a failed exchange, are answered and the connection is closed after the
//! answer. Once authenticated, the connection is served as a plaintext
//! one.
//!
//! Where logins last a while (`Credentials::session_lifetime`, Kafka's
//! `connections.max.reauth.ms`, KIP-368), the SaslAuthenticate that logs
//! a client in tells it how long, and the client authenticates again on
//! the same connection before then: a SaslHandshake naming the same
//! mechanism, then its tokens, which must log in the same user. A
//! connection whose login has run out is closed at its next request
//! other than a SaslHandshake, as Kafka closes it. Without a lifetime, a
//! SaslHandshake or SaslAuthenticate after the login is answered
//! ILLEGAL_SASL_STATE.

use super::sasl::{Credentials, Exchange, Mechanism, Step};
use super::service::Principal;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;
use std::time::Instant;

/// The versions of the SASL APIs a SASL listener serves.
pub(crate) const SASL_APIS: [(ApiKey, i16, i16); 2] = [
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
];

/// Where a connection stands.
pub(crate) struct Authenticating {
    credentials: Arc<dyn Credentials>,
    stage: Stage,
    /// Set when a re-authentication completes, until taken.
    reauthenticated: bool,
}

enum Stage {
    /// Waiting for a SaslHandshake.
    Handshake,
    /// A mechanism chosen; waiting for its tokens, in SaslAuthenticate
    /// requests or (`bare`, after a handshake v0) in frames of their own;
    /// `again`: a re-authentication, which must log in that principal.
    Tokens {
        exchange: Exchange,
        bare: bool,
        again: Option<Principal>,
    },
    /// Authenticated as `principal` by `mechanism`, until `until` (for
    /// the connection's life without one).
    Authenticated {
        principal: Principal,
        mechanism: Mechanism,
        until: Option<Instant>,
    },
    /// A re-authentication that named another mechanism than the login's:
    /// its first token is refused with this message, as Kafka refuses it.
    OtherMechanism(String),
}

/// What the front does with a request.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// The service answers it: the connection is authenticated and the
    /// request is not one of SASL's.
    Serve,
    /// Answered here; the connection is closed after the answer when
    /// `close` is set (a refused mechanism or exchange).
    Answer {
        /// The response (boxed: the other verdicts are small).
        response: Box<ResponseKind>,
        /// Whether the connection ends after it.
        close: bool,
    },
    /// Not admitted at this stage: the connection is closed unanswered,
    /// for the reason given.
    Close(String),
}

impl Authenticating {
    /// A connection that has not authenticated yet.
    pub(crate) fn new(credentials: Arc<dyn Credentials>) -> Self {
        Authenticating {
            credentials,
            stage: Stage::Handshake,
            reauthenticated: false,
        }
    }

    /// Who the connection authenticated as, once it has.
    pub(crate) fn principal(&self) -> Option<&Principal> {
        match &self.stage {
            Stage::Authenticated { principal, .. } => Some(principal),
            _ => None,
        }
    }

    /// Whether a re-authentication completed since the last call.
    pub(crate) fn take_reauthenticated(&mut self) -> bool {
        std::mem::take(&mut self.reauthenticated)
    }

    /// Ends an exchange that logged `user` in by `mechanism`: the stage
    /// after it and the session's lifetime to tell the client, or why it
    /// is refused (a re-authentication as someone else).
    fn logged_in(&mut self, user: &str, mechanism: Mechanism) -> Result<i64, String> {
        let Stage::Tokens { again, .. } = &self.stage else {
            return Err("no authentication under way".into());
        };
        if let Some(before) = again {
            if before.name() != user {
                return Err(format!(
                    "Cannot change principals during re-authentication from User.{}: User.{user}",
                    before.name()
                ));
            }
            self.reauthenticated = true;
        }
        let lifetime = self.credentials.session_lifetime();
        tracing::debug!(user, again = self.reauthenticated, "authenticated");
        self.stage = Stage::Authenticated {
            principal: Principal::user(user),
            mechanism,
            until: lifetime.map(|l| Instant::now() + l),
        };
        Ok(lifetime.map_or(0, |l| i64::try_from(l.as_millis()).unwrap_or(i64::MAX)))
    }

    /// Whether the next frame is a bare token rather than a request.
    pub(crate) fn expects_bare_token(&self) -> bool {
        matches!(self.stage, Stage::Tokens { bare: true, .. })
    }

    /// The answer to a bare token: the server's next token, to be sent
    /// size-prefixed, or why the connection closes (a failed exchange is
    /// not answered in this mode).
    pub(crate) fn bare_token(&mut self, token: &[u8]) -> Result<Vec<u8>, String> {
        let Stage::Tokens { exchange, .. } = &mut self.stage else {
            return Err("a bare token outside an authentication".into());
        };
        let mechanism = exchange.mechanism();
        match exchange.step(token, self.credentials.as_ref()) {
            Step::Continue(token) => Ok(token),
            Step::Done { token, user } => match self.logged_in(&user, mechanism) {
                Ok(_) => Ok(token),
                Err(why) => Err(format!("authentication failed: {why}")),
            },
            Step::Failed(message) => Err(format!("authentication failed: {message}")),
        }
    }

    /// What to do with `request` (of `api`, at `version`), ApiVersions
    /// aside.
    pub(crate) fn admit(&mut self, api: ApiKey, version: i16, request: &RequestKind) -> Verdict {
        match (&mut self.stage, request) {
            // Authenticating again: the same mechanism only.
            (
                Stage::Authenticated {
                    principal,
                    mechanism,
                    until: Some(_),
                },
                RequestKind::SaslHandshake(r),
            ) => {
                let mut response = SaslHandshakeResponse::default();
                response.mechanisms = mechanisms();
                match Mechanism::named(&r.mechanism) {
                    Some(asked) if asked == *mechanism => {
                        self.stage = Stage::Tokens {
                            exchange: Exchange::new(asked),
                            bare: version == 0,
                            again: Some(principal.clone()),
                        };
                    }
                    Some(asked) => {
                        self.stage = Stage::OtherMechanism(format!(
                            "SASL mechanism '{}' requested by client is not supported for \
                             re-authentication of mechanism '{}'",
                            asked.name(),
                            mechanism.name()
                        ));
                    }
                    None => {
                        response.error_code = ResponseError::UnsupportedSaslMechanism.code();
                        return answer(ResponseKind::SaslHandshake(response), true);
                    }
                }
                answer(ResponseKind::SaslHandshake(response), false)
            }
            (Stage::Authenticated { .. }, RequestKind::SaslHandshake(_)) => {
                let mut r = SaslHandshakeResponse::default();
                r.error_code = ResponseError::IllegalSaslState.code();
                r.mechanisms = mechanisms();
                answer(ResponseKind::SaslHandshake(r), false)
            }
            (Stage::Authenticated { .. }, RequestKind::SaslAuthenticate(_)) => answer(
                authenticate_error(
                    ResponseError::IllegalSaslState,
                    "SaslAuthenticate request received after successful authentication",
                ),
                false,
            ),
            (
                Stage::Authenticated {
                    until: Some(until), ..
                },
                _,
            ) if Instant::now() >= *until => Verdict::Close(format!(
                "{api:?} after the session expired, the client not having authenticated again"
            )),
            (Stage::Authenticated { .. }, _) => Verdict::Serve,
            (Stage::Handshake, RequestKind::SaslHandshake(r)) => {
                let mut response = SaslHandshakeResponse::default();
                response.mechanisms = mechanisms();
                match Mechanism::named(&r.mechanism) {
                    Some(mechanism) => {
                        self.stage = Stage::Tokens {
                            exchange: Exchange::new(mechanism),
                            bare: version == 0,
                            again: None,
                        };
                        answer(ResponseKind::SaslHandshake(response), false)
                    }
                    None => {
                        response.error_code = ResponseError::UnsupportedSaslMechanism.code();
                        answer(ResponseKind::SaslHandshake(response), true)
                    }
                }
            }
            (
                Stage::Tokens {
                    exchange,
                    bare: false,
                    ..
                },
                RequestKind::SaslAuthenticate(r),
            ) => {
                let mechanism = exchange.mechanism();
                match exchange.step(&r.auth_bytes, self.credentials.as_ref()) {
                    Step::Continue(token) => answer(authenticated(token, 0), false),
                    Step::Done { token, user } => match self.logged_in(&user, mechanism) {
                        Ok(lifetime) => answer(authenticated(token, lifetime), false),
                        Err(why) => answer(
                            authenticate_error(ResponseError::SaslAuthenticationFailed, &why),
                            true,
                        ),
                    },
                    Step::Failed(message) => answer(
                        authenticate_error(ResponseError::SaslAuthenticationFailed, &message),
                        true,
                    ),
                }
            }
            (Stage::OtherMechanism(why), RequestKind::SaslAuthenticate(_)) => answer(
                authenticate_error(ResponseError::SaslAuthenticationFailed, why),
                true,
            ),
            (Stage::OtherMechanism(_), _) => {
                Verdict::Close(format!("{api:?} during a refused re-authentication"))
            }
            (Stage::Handshake, _) => {
                Verdict::Close(format!("{api:?} before a SaslHandshake on a SASL listener"))
            }
            (Stage::Tokens { exchange, .. }, _) => Verdict::Close(format!(
                "{api:?} during a {} authentication",
                exchange.mechanism().name()
            )),
        }
    }
}

fn answer(response: ResponseKind, close: bool) -> Verdict {
    Verdict::Answer {
        response: Box::new(response),
        close,
    }
}

/// The mechanisms served, as a handshake lists them.
fn mechanisms() -> Vec<StrBytes> {
    (Mechanism::ALL.iter())
        .map(|m| StrBytes::from_static_str(m.name()))
        .collect()
}

/// A step's answer, with the session's lifetime in ms once the client
/// has logged in (0: it does not run out).
fn authenticated(token: Vec<u8>, lifetime_ms: i64) -> ResponseKind {
    let mut r = SaslAuthenticateResponse::default();
    r.auth_bytes = Bytes::from(token);
    // Null, as Kafka sends it (the codec's default is empty).
    r.error_message = None;
    r.session_lifetime_ms = lifetime_ms;
    ResponseKind::SaslAuthenticate(r)
}

fn authenticate_error(error: ResponseError, message: &str) -> ResponseKind {
    let mut r = SaslAuthenticateResponse::default();
    r.error_code = error.code();
    r.error_message = Some(StrBytes::from_string(message.to_string()));
    ResponseKind::SaslAuthenticate(r)
}

#[cfg(test)]
mod tests {
    use super::super::sasl::ScramSecret;
    use super::*;
    use kafka_protocol::messages::{
        MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
    };

    struct Alice;

    impl Credentials for Alice {
        fn plain(&self, user: &str, password: &str) -> bool {
            (user, password) == ("alice", "secret")
        }

        fn scram(&self, _: Mechanism, _: &str) -> Option<ScramSecret> {
            None
        }
    }

    /// Alice and Bob, whose logins last `0` (a PLAIN server whose
    /// sessions run out).
    struct Expiring(std::time::Duration);

    impl Credentials for Expiring {
        fn plain(&self, user: &str, password: &str) -> bool {
            matches!((user, password), ("alice", "secret") | ("bob", "bobs"))
        }

        fn scram(&self, _: Mechanism, _: &str) -> Option<ScramSecret> {
            None
        }

        fn session_lifetime(&self) -> Option<std::time::Duration> {
            Some(self.0)
        }
    }

    fn lifetime(v: &Verdict) -> i64 {
        match v {
            Verdict::Answer { response, .. } => match response.as_ref() {
                ResponseKind::SaslAuthenticate(r) => r.session_lifetime_ms,
                _ => -1,
            },
            _ => -1,
        }
    }

    #[test]
    fn a_session_that_runs_out_is_renewed_by_the_same_user_and_mechanism() {
        let mut a = Authenticating::new(Arc::new(Expiring(std::time::Duration::from_secs(60))));
        a.admit(ApiKey::SaslHandshake, 1, &handshake("PLAIN"));
        let login = a.admit(ApiKey::SaslAuthenticate, 2, &token(b"\0alice\0secret"));
        assert_eq!(lifetime(&login), 60_000);
        assert!(!a.take_reauthenticated());
        // Authenticating again: nothing else is served until it is done.
        assert_eq!(
            code(&a.admit(ApiKey::SaslHandshake, 1, &handshake("PLAIN"))),
            Some((0, false))
        );
        assert!(matches!(
            a.admit(ApiKey::Metadata, 12, &metadata()),
            Verdict::Close(_)
        ));
        let mut a = Authenticating::new(Arc::new(Expiring(std::time::Duration::from_secs(60))));
        a.admit(ApiKey::SaslHandshake, 1, &handshake("PLAIN"));
        a.admit(ApiKey::SaslAuthenticate, 2, &token(b"\0alice\0secret"));
        a.admit(ApiKey::SaslHandshake, 1, &handshake("PLAIN"));
        let again = a.admit(ApiKey::SaslAuthenticate, 2, &token(b"\0alice\0secret"));
        assert_eq!((code(&again), lifetime(&again)), (Some((0, false)), 60_000));
        assert!(a.take_reauthenticated());
        assert!(matches!(
            a.admit(ApiKey::Metadata, 12, &metadata()),
            Verdict::Serve
        ));

        // Someone else, or another mechanism, is refused and the
        // connection closed.
        a.admit(ApiKey::SaslHandshake, 1, &handshake("PLAIN"));
        let bob = a.admit(ApiKey::SaslAuthenticate, 2, &token(b"\0bob\0bobs"));
        let failed = ResponseError::SaslAuthenticationFailed.code();
        assert_eq!(code(&bob), Some((failed, true)));
        let mut a = Authenticating::new(Arc::new(Expiring(std::time::Duration::from_secs(60))));
        a.admit(ApiKey::SaslHandshake, 1, &handshake("PLAIN"));
        a.admit(ApiKey::SaslAuthenticate, 2, &token(b"\0alice\0secret"));
        let other = a.admit(ApiKey::SaslHandshake, 1, &handshake("SCRAM-SHA-256"));
        assert_eq!(code(&other), Some((0, false)));
        let refused = a.admit(ApiKey::SaslAuthenticate, 2, &token(b"n,,n=alice,r=abc"));
        assert_eq!(code(&refused), Some((failed, true)));
    }

    #[test]
    fn a_session_run_out_closes_its_connection_at_the_next_request() {
        let mut a = Authenticating::new(Arc::new(Expiring(std::time::Duration::ZERO)));
        a.admit(ApiKey::SaslHandshake, 1, &handshake("PLAIN"));
        a.admit(ApiKey::SaslAuthenticate, 2, &token(b"\0alice\0secret"));
        assert!(matches!(
            a.admit(ApiKey::Metadata, 12, &metadata()),
            Verdict::Close(_)
        ));
        // Authenticating again is still allowed.
        assert_eq!(
            code(&a.admit(ApiKey::SaslHandshake, 1, &handshake("PLAIN"))),
            Some((0, false))
        );
    }

    fn handshake(mechanism: &'static str) -> RequestKind {
        let mut r = SaslHandshakeRequest::default();
        r.mechanism = StrBytes::from_static_str(mechanism);
        RequestKind::SaslHandshake(r)
    }

    fn token(bytes: &'static [u8]) -> RequestKind {
        let mut r = SaslAuthenticateRequest::default();
        r.auth_bytes = Bytes::from_static(bytes);
        RequestKind::SaslAuthenticate(r)
    }

    fn metadata() -> RequestKind {
        RequestKind::Metadata(MetadataRequest::default())
    }

    fn code(v: &Verdict) -> Option<(i16, bool)> {
        let Verdict::Answer { response, close } = v else {
            return None;
        };
        match response.as_ref() {
            ResponseKind::SaslHandshake(r) => Some((r.error_code, *close)),
            ResponseKind::SaslAuthenticate(r) => Some((r.error_code, *close)),
            _ => None,
        }
    }

    #[test]
    fn only_sasl_is_served_until_the_client_authenticates() {
        let mut a = Authenticating::new(Arc::new(Alice));
        assert!(matches!(
            a.admit(ApiKey::Metadata, 12, &metadata()),
            Verdict::Close(_)
        ));
        let mut a = Authenticating::new(Arc::new(Alice));
        assert!(matches!(
            a.admit(ApiKey::SaslAuthenticate, 1, &token(b"\0alice\0secret")),
            Verdict::Close(_)
        ));
        let mut a = Authenticating::new(Arc::new(Alice));
        assert_eq!(
            code(&a.admit(ApiKey::SaslHandshake, 1, &handshake("PLAIN"))),
            Some((0, false))
        );
        assert!(matches!(
            a.admit(ApiKey::Metadata, 12, &metadata()),
            Verdict::Close(_)
        ));
        let mut a = Authenticating::new(Arc::new(Alice));
        a.admit(ApiKey::SaslHandshake, 1, &handshake("PLAIN"));
        assert!(matches!(
            a.admit(ApiKey::SaslHandshake, 1, &handshake("PLAIN")),
            Verdict::Close(_)
        ));
    }

    #[test]
    fn an_authenticated_connection_is_served_and_sasl_is_then_refused() {
        let mut a = Authenticating::new(Arc::new(Alice));
        a.admit(ApiKey::SaslHandshake, 1, &handshake("PLAIN"));
        assert_eq!(a.principal(), None);
        assert_eq!(
            code(&a.admit(ApiKey::SaslAuthenticate, 1, &token(b"\0alice\0secret"))),
            Some((0, false))
        );
        assert_eq!(a.principal(), Some(&Principal::user("alice")));
        assert!(matches!(
            a.admit(ApiKey::Metadata, 12, &metadata()),
            Verdict::Serve
        ));
        let illegal = ResponseError::IllegalSaslState.code();
        assert_eq!(
            code(&a.admit(ApiKey::SaslHandshake, 1, &handshake("PLAIN"))),
            Some((illegal, false))
        );
        assert_eq!(
            code(&a.admit(ApiKey::SaslAuthenticate, 1, &token(b"\0alice\0secret"))),
            Some((illegal, false))
        );
    }

    #[test]
    fn after_a_handshake_v0_tokens_come_bare() {
        let mut a = Authenticating::new(Arc::new(Alice));
        assert!(!a.expects_bare_token());
        assert_eq!(
            code(&a.admit(ApiKey::SaslHandshake, 0, &handshake("PLAIN"))),
            Some((0, false))
        );
        assert!(a.expects_bare_token());
        assert_eq!(a.bare_token(b"\0alice\0secret"), Ok(vec![]));
        assert!(!a.expects_bare_token());
        assert_eq!(a.principal(), Some(&Principal::user("alice")));

        let mut a = Authenticating::new(Arc::new(Alice));
        a.admit(ApiKey::SaslHandshake, 0, &handshake("PLAIN"));
        assert!(a.bare_token(b"\0alice\0guess").is_err());
        assert_eq!(a.principal(), None);
        // A SaslAuthenticate is not what a v0 handshake leads to.
        let mut a = Authenticating::new(Arc::new(Alice));
        a.admit(ApiKey::SaslHandshake, 0, &handshake("PLAIN"));
        assert!(matches!(
            a.admit(ApiKey::SaslAuthenticate, 1, &token(b"\0alice\0secret")),
            Verdict::Close(_)
        ));
    }

    #[test]
    fn an_unknown_mechanism_or_a_wrong_password_ends_the_connection() {
        let mut a = Authenticating::new(Arc::new(Alice));
        assert_eq!(
            code(&a.admit(ApiKey::SaslHandshake, 1, &handshake("GSSAPI"))),
            Some((ResponseError::UnsupportedSaslMechanism.code(), true))
        );
        let mut a = Authenticating::new(Arc::new(Alice));
        a.admit(ApiKey::SaslHandshake, 1, &handshake("PLAIN"));
        assert_eq!(
            code(&a.admit(ApiKey::SaslAuthenticate, 1, &token(b"\0alice\0guess"))),
            Some((ResponseError::SaslAuthenticationFailed.code(), true))
        );
        assert_eq!(a.principal(), None);
        let mut a = Authenticating::new(Arc::new(Alice));
        a.admit(ApiKey::SaslHandshake, 1, &handshake("SCRAM-SHA-256"));
        assert_eq!(
            code(&a.admit(ApiKey::SaslAuthenticate, 1, &token(b"n,,n=alice,r=abc"))),
            Some((ResponseError::SaslAuthenticationFailed.code(), true))
        );
    }
}
