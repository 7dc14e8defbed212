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
//! one, and a further SaslHandshake or SaslAuthenticate is answered
//! ILLEGAL_SASL_STATE (sessions do not expire here, so no client
//! authenticates again).

use super::sasl::{Credentials, Exchange, Mechanism, Step};
use super::service::Principal;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;

/// The versions of the SASL APIs a SASL listener serves.
pub(crate) const SASL_APIS: [(ApiKey, i16, i16); 2] = [
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
];

/// Where a connection stands.
pub(crate) struct Authenticating {
    credentials: Arc<dyn Credentials>,
    stage: Stage,
}

enum Stage {
    /// Waiting for a SaslHandshake.
    Handshake,
    /// A mechanism chosen; waiting for its tokens, in SaslAuthenticate
    /// requests or (`bare`, after a handshake v0) in frames of their own.
    Tokens { exchange: Exchange, bare: bool },
    /// Authenticated as this user.
    Authenticated(Principal),
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
        }
    }

    /// Who the connection authenticated as, once it has.
    pub(crate) fn principal(&self) -> Option<&Principal> {
        match &self.stage {
            Stage::Authenticated(principal) => Some(principal),
            _ => None,
        }
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
        match exchange.step(token, self.credentials.as_ref()) {
            Step::Continue(token) => Ok(token),
            Step::Done { token, user } => {
                self.stage = Stage::Authenticated(logged_in(&user));
                Ok(token)
            }
            Step::Failed(message) => Err(format!("authentication failed: {message}")),
        }
    }

    /// What to do with `request` (of `api`, at `version`), ApiVersions
    /// aside.
    pub(crate) fn admit(&mut self, api: ApiKey, version: i16, request: &RequestKind) -> Verdict {
        match (&mut self.stage, request) {
            (Stage::Authenticated(_), RequestKind::SaslHandshake(_)) => {
                let mut r = SaslHandshakeResponse::default();
                r.error_code = ResponseError::IllegalSaslState.code();
                r.mechanisms = mechanisms();
                answer(ResponseKind::SaslHandshake(r), false)
            }
            (Stage::Authenticated(_), RequestKind::SaslAuthenticate(_)) => answer(
                authenticate_error(
                    ResponseError::IllegalSaslState,
                    "SaslAuthenticate request received after successful authentication",
                ),
                false,
            ),
            (Stage::Authenticated(_), _) => Verdict::Serve,
            (Stage::Handshake, RequestKind::SaslHandshake(r)) => {
                let mut response = SaslHandshakeResponse::default();
                response.mechanisms = mechanisms();
                match Mechanism::named(&r.mechanism) {
                    Some(mechanism) => {
                        self.stage = Stage::Tokens {
                            exchange: Exchange::new(mechanism),
                            bare: version == 0,
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
                },
                RequestKind::SaslAuthenticate(r),
            ) => match exchange.step(&r.auth_bytes, self.credentials.as_ref()) {
                Step::Continue(token) => answer(authenticated(token), false),
                Step::Done { token, user } => {
                    self.stage = Stage::Authenticated(logged_in(&user));
                    answer(authenticated(token), false)
                }
                Step::Failed(message) => answer(
                    authenticate_error(ResponseError::SaslAuthenticationFailed, &message),
                    true,
                ),
            },
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

/// The principal of `user`, who has just logged in.
fn logged_in(user: &str) -> Principal {
    tracing::debug!(user, "authenticated");
    Principal::user(user)
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

fn authenticated(token: Vec<u8>) -> ResponseKind {
    let mut r = SaslAuthenticateResponse::default();
    r.auth_bytes = Bytes::from(token);
    // Null, as Kafka sends it (the codec's default is empty).
    r.error_message = None;
    // No session expires: clients need not authenticate again.
    r.session_lifetime_ms = 0;
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
