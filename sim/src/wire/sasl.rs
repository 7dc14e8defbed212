//! The server's side of SASL authentication on a listener, as Kafka's
//! `SASL_PLAINTEXT` listeners run it: the mechanisms PLAIN (RFC 4616) and
//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677).
//!
//! A client names its mechanism with SaslHandshake, then sends its tokens
//! in SaslAuthenticate requests; each [`Exchange::step`] reads one token
//! and answers the next. The front (`server.rs`) serves nothing else on
//! the connection until an exchange succeeds, and closes it after one
//! fails. Who may authenticate is a [`Credentials`]' to say: PLAIN
//! checks a user's password, SCRAM asks for the user's [`ScramSecret`]
//! (the salt, iteration count, stored key and server key Kafka keeps; the
//! password itself is never needed). Delegation tokens (SCRAM's
//! `tokenauth` extension) and channel binding are refused.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

/// A SASL mechanism served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mechanism {
    /// The user name and password sent as they are.
    Plain,
    /// SCRAM with SHA-256.
    ScramSha256,
    /// SCRAM with SHA-512.
    ScramSha512,
}

impl Mechanism {
    /// Every mechanism served, in the order listed to clients.
    pub const ALL: [Mechanism; 3] = [
        Mechanism::Plain,
        Mechanism::ScramSha256,
        Mechanism::ScramSha512,
    ];

    /// The mechanism's name, as clients ask for it.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism named `name` (exactly, as Kafka matches it).
    pub fn named(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The SCRAM mechanism of Kafka's wire number in the SCRAM credential
    /// APIs (1: SHA-256, 2: SHA-512).
    pub fn scram_of(number: i8) -> Option<Mechanism> {
        Mechanism::ALL
            .into_iter()
            .find(|m| m.scram_number() == Some(number))
    }

    /// Kafka's wire number of a SCRAM mechanism; `None` for PLAIN.
    pub fn scram_number(self) -> Option<i8> {
        match self {
            Mechanism::Plain => None,
            Mechanism::ScramSha256 => Some(1),
            Mechanism::ScramSha512 => Some(2),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // An HMAC takes a key of any length: `new_from_slice` cannot fail.
        match self {
            Mechanism::ScramSha512 => {
                let mut mac = Hmac::<Sha512>::new_from_slice(key).expect("any key length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            _ => {
                let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
        }
    }

    /// `password` salted with `salt` over `iterations` (PBKDF2 with this
    /// mechanism's HMAC): what a client derives its keys from.
    fn salted_password(self, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        let password = password.as_bytes();
        match self {
            Mechanism::ScramSha512 => {
                let mut out = [0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out.to_vec()
            }
            _ => {
                let mut out = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out.to_vec()
            }
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::ScramSha512 => Sha512::digest(data).to_vec(),
            _ => Sha256::digest(data).to_vec(),
        }
    }
}

/// A user's SCRAM credential for one mechanism, as Kafka keeps it: what
/// the server needs to check a client's proof and prove itself in turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramSecret {
    /// The salt the password was salted with.
    pub salt: Vec<u8>,
    /// The PBKDF2 iterations it was salted with.
    pub iterations: u32,
    /// H(HMAC(salted password, "Client Key")).
    pub stored_key: Vec<u8>,
    /// HMAC(salted password, "Server Key").
    pub server_key: Vec<u8>,
}

impl ScramSecret {
    /// The secret of a salted password, as an admin client sends one in
    /// AlterUserScramCredentials (it salts the password itself).
    pub fn from_salted(
        mechanism: Mechanism,
        salt: &[u8],
        salted_password: &[u8],
        iterations: u32,
    ) -> Self {
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        ScramSecret {
            salt: salt.to_vec(),
            iterations,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
        }
    }

    /// The secret of `password` salted with `salt` over `iterations`.
    pub fn from_password(
        mechanism: Mechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Self {
        let salted = mechanism.salted_password(password, salt, iterations);
        Self::from_salted(mechanism, salt, &salted, iterations)
    }
}

/// Who may authenticate.
pub trait Credentials: Send + Sync {
    /// Whether `password` is `user`'s PLAIN password.
    fn plain(&self, user: &str, password: &str) -> bool;

    /// `user`'s credential for a SCRAM `mechanism`, if it has one.
    fn scram(&self, mechanism: Mechanism, user: &str) -> Option<ScramSecret>;

    /// How long a login lasts on its connection before the client must
    /// authenticate again there (Kafka's `connections.max.reauth.ms`,
    /// KIP-368); `None`, the default: for the connection's life.
    fn session_lifetime(&self) -> Option<std::time::Duration> {
        None
    }
}

/// What a step of an exchange leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The token to send back; the client sends another.
    Continue(Vec<u8>),
    /// Authenticated as `user`; the last token to send back (empty for
    /// PLAIN).
    Done {
        /// The server's last token.
        token: Vec<u8>,
        /// The user authenticated (the principal's name).
        user: String,
    },
    /// Refused, with the message the client is given; the connection is
    /// then closed.
    Failed(String),
}

/// One connection's exchange of tokens.
#[derive(Debug)]
pub struct Exchange {
    mechanism: Mechanism,
    state: State,
}

#[derive(Debug)]
enum State {
    /// Waiting for the client's first token.
    First,
    /// SCRAM: the server's first message sent; waiting for the client's
    /// proof.
    Proof {
        user: String,
        gs2_header: String,
        nonce: String,
        /// client-first-message-bare "," server-first-message.
        said: String,
        secret: ScramSecret,
    },
    /// Finished, either way: no more tokens are read.
    Over,
}

impl Exchange {
    /// An exchange by `mechanism`.
    pub fn new(mechanism: Mechanism) -> Self {
        Exchange {
            mechanism,
            state: State::First,
        }
    }

    /// The mechanism this exchange runs.
    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// Reads the client's next token and says what to answer. SCRAM's
    /// server nonce is random.
    pub fn step(&mut self, token: &[u8], credentials: &dyn Credentials) -> Step {
        self.step_with_nonce(token, credentials, &random_nonce)
    }

    fn step_with_nonce(
        &mut self,
        token: &[u8],
        credentials: &dyn Credentials,
        nonce: &dyn Fn() -> String,
    ) -> Step {
        let state = std::mem::replace(&mut self.state, State::Over);
        let step = match (self.mechanism, state) {
            (_, State::Over) => Err("the authentication is already over".to_string()),
            (Mechanism::Plain, State::First) => plain(token, credentials),
            (mechanism, State::First) => {
                scram_first(mechanism, token, credentials, nonce).map(|(reply, next)| {
                    self.state = next;
                    Step::Continue(reply)
                })
            }
            (mechanism, proof @ State::Proof { .. }) => scram_final(mechanism, token, proof),
        };
        step.unwrap_or_else(|reason| Step::Failed(self.told(reason)))
    }

    /// What a client refused for `reason` is told. As Kafka's brokers do,
    /// PLAIN says why, and SCRAM says only that the credentials were
    /// invalid (but for an authorization id that is not the user), so that
    /// a client learns nothing of which users exist; the reason is logged.
    fn told(&self, reason: String) -> String {
        if self.mechanism == Mechanism::Plain || reason == AUTHZID_REFUSED {
            return reason;
        }
        tracing::debug!(mechanism = self.mechanism.name(), reason, "SCRAM refused");
        scram_refused(self.mechanism)
    }
}

/// Kafka's message for an authorization id other than the user.
const AUTHZID_REFUSED: &str =
    "Authentication failed: Client requested an authorization id that is different from username";

/// Kafka's message for a refused PLAIN user or password.
const PLAIN_REFUSED: &str = "Authentication failed: Invalid username or password";

/// PLAIN: `[authzid] NUL authcid NUL password`.
fn plain(token: &[u8], credentials: &dyn Credentials) -> Result<Step, String> {
    let text = std::str::from_utf8(token).map_err(|_| "Invalid SASL/PLAIN response")?;
    let parts: Vec<&str> = text.split('\0').collect();
    let [authzid, user, password] = parts[..] else {
        return Err(format!(
            "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
            parts.len()
        ));
    };
    if user.is_empty() {
        return Err("Authentication failed: username not specified".into());
    }
    if password.is_empty() {
        return Err("Authentication failed: password not specified".into());
    }
    // The password first, then the authorization id, in Kafka's order.
    if !credentials.plain(user, password) {
        return Err(PLAIN_REFUSED.into());
    }
    if !authzid.is_empty() && authzid != user {
        return Err(AUTHZID_REFUSED.into());
    }
    Ok(Step::Done {
        token: Vec::new(),
        user: user.to_string(),
    })
}

/// Kafka's message for a refused SCRAM user or proof.
fn scram_refused(mechanism: Mechanism) -> String {
    format!(
        "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
        mechanism.name()
    )
}

/// SCRAM's client-first-message: `gs2-header client-first-message-bare`.
fn scram_first(
    mechanism: Mechanism,
    token: &[u8],
    credentials: &dyn Credentials,
    nonce: &dyn Fn() -> String,
) -> Result<(Vec<u8>, State), String> {
    let text = std::str::from_utf8(token).map_err(|_| "Invalid SCRAM client first message")?;
    let invalid = || format!("Invalid SCRAM client first message: {text:?}");
    // gs2-header: a channel-binding flag, an optional authzid, then the
    // bare message.
    let (flag, rest) = text.split_once(',').ok_or_else(invalid)?;
    let (authzid, bare) = rest.split_once(',').ok_or_else(invalid)?;
    match flag {
        "n" | "y" => {}
        _ if flag.starts_with("p=") => return Err("Channel binding is not supported".into()),
        _ => return Err(invalid()),
    }
    let mut attributes = bare.split(',');
    let user = attributes
        .next()
        .and_then(|a| a.strip_prefix("n="))
        .ok_or_else(invalid)?;
    let user = unescape(user).ok_or_else(invalid)?;
    let client_nonce = attributes
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .filter(|n| !n.is_empty())
        .ok_or_else(invalid)?;
    if !authzid.is_empty()
        && unescape(authzid.strip_prefix("a=").ok_or_else(invalid)?) != Some(user.clone())
    {
        return Err(AUTHZID_REFUSED.into());
    }
    // Extensions: delegation tokens are not served; the others are ignored.
    if attributes.any(|a| a == "tokenauth=true") {
        return Err(scram_refused(mechanism));
    }
    let secret = credentials
        .scram(mechanism, &user)
        .ok_or_else(|| scram_refused(mechanism))?;
    let nonce = format!("{client_nonce}{}", nonce());
    let server_first = format!(
        "r={nonce},s={},i={}",
        BASE64.encode(&secret.salt),
        secret.iterations
    );
    let gs2_header = format!("{flag},{authzid},");
    let said = format!("{bare},{server_first}");
    Ok((
        server_first.into_bytes(),
        State::Proof {
            user,
            gs2_header,
            nonce,
            said,
            secret,
        },
    ))
}

/// SCRAM's client-final-message: `c=...,r=...[,extensions],p=proof`.
fn scram_final(mechanism: Mechanism, token: &[u8], proof: State) -> Result<Step, String> {
    let State::Proof {
        user,
        gs2_header,
        nonce,
        said,
        secret,
    } = proof
    else {
        return Err("no SCRAM exchange under way".into());
    };
    let text = std::str::from_utf8(token).map_err(|_| "Invalid SCRAM client final message")?;
    let invalid = || "Invalid SCRAM client final message".to_string();
    let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(invalid)?;
    let mut attributes = without_proof.split(',');
    let binding = attributes
        .next()
        .and_then(|a| a.strip_prefix("c="))
        .ok_or_else(invalid)?;
    if BASE64.decode(binding).ok().as_deref() != Some(gs2_header.as_bytes()) {
        return Err("Invalid channel binding".into());
    }
    let sent_nonce = attributes
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .ok_or_else(invalid)?;
    // Kafka takes a nonce that ends with the server's, not only one equal
    // to it: librdkafka (2.0 at least) sends its own nonce again in front.
    // The proof covers the nonce sent either way.
    if !sent_nonce.ends_with(&nonce) {
        return Err("Invalid client nonce in the final client message.".into());
    }
    let proof = BASE64.decode(proof).map_err(|_| invalid())?;
    let auth_message = format!("{said},{without_proof}");
    let signature = mechanism.hmac(&secret.stored_key, auth_message.as_bytes());
    if proof.len() != signature.len() {
        return Err(scram_refused(mechanism));
    }
    let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
    let computed = mechanism.hash(&client_key);
    if !bool::from(computed.ct_eq(&secret.stored_key)) {
        return Err(scram_refused(mechanism));
    }
    let server_signature = mechanism.hmac(&secret.server_key, auth_message.as_bytes());
    Ok(Step::Done {
        token: format!("v={}", BASE64.encode(server_signature)).into_bytes(),
        user,
    })
}

/// A SCRAM `saslname`, with `=2C` and `=3D` read back as `,` and `=`;
/// `None` for any other `=`.
fn unescape(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3)? {
            "=2C" => out.push(','),
            "=3D" => out.push('='),
            _ => return None,
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// The server's part of a SCRAM nonce: 32 random printable characters.
fn random_nonce() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
    .chars()
    .take(32)
    .collect()
}

/// A random salt for a password the server salts itself.
pub fn random_salt() -> Vec<u8> {
    let mut salt = uuid::Uuid::new_v4().as_bytes().to_vec();
    salt.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    salt
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One user, "user", with password "pencil" for every mechanism, at
    /// RFC 7677's salt and iterations.
    struct Pencil;

    const SALT: &str = "W22ZaJ0SNY7soEsUEjb6gQ==";

    impl Credentials for Pencil {
        fn plain(&self, user: &str, password: &str) -> bool {
            user == "user" && password == "pencil"
        }

        fn scram(&self, mechanism: Mechanism, user: &str) -> Option<ScramSecret> {
            let salt = BASE64.decode(SALT).unwrap();
            (user == "user").then(|| ScramSecret::from_password(mechanism, "pencil", &salt, 4096))
        }
    }

    fn fixed(nonce: &'static str) -> impl Fn() -> String {
        move || nonce.to_string()
    }

    #[test]
    fn rfc_7677_exchange_succeeds_with_its_server_signature() {
        // RFC 7677, section 3: the client's nonce, then the server's part.
        let mut e = Exchange::new(Mechanism::ScramSha256);
        let first = e.step_with_nonce(
            b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
            &Pencil,
            &fixed("%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"),
        );
        assert_eq!(
            first,
            Step::Continue(
                format!("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s={SALT},i=4096")
                    .into_bytes()
            )
        );
        let last = e.step(
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
              p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            &Pencil,
        );
        assert_eq!(
            last,
            Step::Done {
                token: b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".to_vec(),
                user: "user".into(),
            }
        );
        // Over: a further token is refused.
        assert!(matches!(e.step(b"x", &Pencil), Step::Failed(_)));
    }

    /// The client's side of SCRAM, as RFC 5802 computes it.
    fn client_final(
        mechanism: Mechanism,
        password: &str,
        server_first: &str,
        bare: &str,
    ) -> String {
        client_final_sending(mechanism, password, server_first, bare, "")
    }

    /// As [`client_final`], with `prefix` sent in front of the nonce.
    fn client_final_sending(
        mechanism: Mechanism,
        password: &str,
        server_first: &str,
        bare: &str,
        prefix: &str,
    ) -> String {
        let fields: Vec<&str> = server_first.split(',').collect();
        let nonce = fields[0].strip_prefix("r=").unwrap();
        let salt = BASE64
            .decode(fields[1].strip_prefix("s=").unwrap())
            .unwrap();
        let iterations: u32 = fields[2].strip_prefix("i=").unwrap().parse().unwrap();
        let salted = mechanism.salted_password(password, &salt, iterations);
        let secret = ScramSecret::from_salted(mechanism, &salt, &salted, iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        let without_proof = format!("c=biws,r={prefix}{nonce}");
        let auth = format!("{bare},{server_first},{without_proof}");
        let signature = mechanism.hmac(&secret.stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        format!("{without_proof},p={}", BASE64.encode(proof))
    }

    fn scram_with(mechanism: Mechanism, user: &str, password: &str) -> Step {
        let mut e = Exchange::new(mechanism);
        let bare = format!("n={user},r=abcdef");
        let Step::Continue(server_first) = e.step(format!("n,,{bare}").as_bytes(), &Pencil) else {
            return Step::Failed("refused at the first message".into());
        };
        let server_first = String::from_utf8(server_first).unwrap();
        assert!(server_first.starts_with("r=abcdef") && server_first.len() > 40);
        e.step(
            client_final(mechanism, password, &server_first, &bare).as_bytes(),
            &Pencil,
        )
    }

    #[test]
    fn scram_sha_512_and_256_accept_the_password_and_refuse_another() {
        for mechanism in [Mechanism::ScramSha256, Mechanism::ScramSha512] {
            assert!(matches!(
                scram_with(mechanism, "user", "pencil"),
                Step::Done { ref user, .. } if user == "user"
            ));
            assert_eq!(
                scram_with(mechanism, "user", "pen"),
                Step::Failed(scram_refused(mechanism))
            );
            assert_eq!(
                scram_with(mechanism, "nobody", "pencil"),
                Step::Failed("refused at the first message".into())
            );
        }
    }

    #[test]
    fn scram_refuses_bad_messages_a_wrong_nonce_and_tokens() {
        // What the client is told, if refused.
        let refused =
            |first: &[u8]| match Exchange::new(Mechanism::ScramSha256).step(first, &Pencil) {
                Step::Failed(told) => Some(told),
                _ => None,
            };
        // Kafka tells a SCRAM client only that its credentials were
        // invalid, whatever the reason, but for an authorization id.
        let invalid = Some(scram_refused(Mechanism::ScramSha256));
        assert_eq!(refused(b""), invalid);
        assert_eq!(refused(b"n,,r=abc"), invalid);
        assert_eq!(refused(b"n,,n=user"), invalid);
        assert_eq!(refused(b"p=tls-unique,,n=user,r=abc"), invalid);
        assert_eq!(refused(b"n,,n=us=3Xer,r=abc"), invalid);
        assert_eq!(refused(b"n,,n=user,r=abc,tokenauth=true"), invalid);
        assert_eq!(refused(&[0xff, 0xfe]), invalid);
        assert_eq!(
            refused(b"n,a=other,n=user,r=abc"),
            Some(AUTHZID_REFUSED.into())
        );
        assert_eq!(refused(b"n,a=user,n=user,r=abc"), None);
        assert_eq!(refused(b"y,,n=user,r=abc,ext=1"), None);

        let mut e = Exchange::new(Mechanism::ScramSha256);
        assert!(matches!(
            e.step(b"n,,n=user,r=abc", &Pencil),
            Step::Continue(_)
        ));
        assert_eq!(
            e.step(b"c=biws,r=abcXYZ,p=AAAA", &Pencil),
            Step::Failed(scram_refused(Mechanism::ScramSha256))
        );
    }

    #[test]
    fn a_nonce_sent_with_the_clients_own_again_in_front_is_taken() {
        // As librdkafka 2.0 sends it, and Kafka takes it.
        let mut e = Exchange::new(Mechanism::ScramSha256);
        let bare = "n=user,r=abcdef";
        let Step::Continue(server_first) = e.step(format!("n,,{bare}").as_bytes(), &Pencil) else {
            panic!("refused at the first message");
        };
        let server_first = String::from_utf8(server_first).unwrap();
        let last = client_final_sending(
            Mechanism::ScramSha256,
            "pencil",
            &server_first,
            bare,
            "abcdef",
        );
        assert!(matches!(
            e.step(last.as_bytes(), &Pencil),
            Step::Done { .. }
        ));
    }

    #[test]
    fn plain_checks_the_password_and_the_authorization_id() {
        let step = |token: &[u8]| Exchange::new(Mechanism::Plain).step(token, &Pencil);
        assert_eq!(
            step(b"\0user\0pencil"),
            Step::Done {
                token: vec![],
                user: "user".into()
            }
        );
        assert!(matches!(step(b"user\0user\0pencil"), Step::Done { .. }));
        assert_eq!(step(b"\0user\0pen"), Step::Failed(PLAIN_REFUSED.into()));
        assert_eq!(
            step(b"other\0user\0pencil"),
            Step::Failed(AUTHZID_REFUSED.into())
        );
        // The password is checked before the authorization id, as in Kafka.
        assert_eq!(
            step(b"other\0user\0pen"),
            Step::Failed(PLAIN_REFUSED.into())
        );
        assert_eq!(
            step(b"\0user"),
            Step::Failed("Invalid SASL/PLAIN response: expected 3 tokens, got 2".into())
        );
        assert!(matches!(step(b"\0\0pencil"), Step::Failed(_)));
        assert!(matches!(step(b"\0user\0"), Step::Failed(_)));
    }

    #[test]
    fn names_are_unescaped_and_mechanisms_named() {
        assert_eq!(unescape("a=2Cb=3Dc").as_deref(), Some("a,b=c"));
        assert_eq!(unescape("a=2"), None);
        assert_eq!(
            Mechanism::named("SCRAM-SHA-512"),
            Some(Mechanism::ScramSha512)
        );
        assert_eq!(Mechanism::named("scram-sha-512"), None);
        assert_eq!(Mechanism::scram_of(1), Some(Mechanism::ScramSha256));
        assert_eq!(Mechanism::scram_of(3), None);
        for m in Mechanism::ALL {
            assert_eq!(
                m.scram_number().and_then(Mechanism::scram_of),
                (m != Mechanism::Plain).then_some(m)
            );
        }
    }
}
