//! TLS on the listeners: Kafka's `SSL` security protocol, and `SASL_SSL`
//! where the listeners also serve SASL. The broker's certificate chain and
//! key come from a [`Keystore`] (PEM files, the key encrypted or not, or a
//! PKCS #12 file); client certificates are asked for as Kafka's
//! `ssl.client.auth` says, and checked against the CA certificates of a
//! [`Truststore`]. A client that shows a certificate on an
//! `SSL` listener is the principal `User:` and the certificate's subject,
//! written as Kafka's default principal builder writes it (the RFC 2253
//! form of Java's `X500Principal.getName()`, see [`subject_name`]), or
//! the name Kafka's `ssl.principal.mapping.rules` make of it
//! ([`PrincipalRules`]); one that shows none is `User:ANONYMOUS`. On a `SASL_SSL` listener the
//! principal is the one SASL authenticated, as in Kafka.
//!
//! rustls with the *ring* provider does the protocol: TLS 1.2 and 1.3, with
//! rustls' default cipher suites (the AEAD ones that current OpenSSL,
//! which librdkafka and Python use, offers by default).

use super::keystore::{Keystore, Truststore};
use super::principal_rules::PrincipalRules;
use super::service::Principal;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Whether the listeners ask clients for a certificate (Kafka's
/// `ssl.client.auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// None is asked for (Kafka's default): every client is anonymous on
    /// an `SSL` listener.
    #[default]
    None,
    /// One is asked for; a client that shows none is still served, as
    /// `User:ANONYMOUS`.
    Requested,
    /// One is needed: the handshake fails without it.
    Required,
}

impl ClientAuth {
    /// Kafka's names for the values, in its order.
    pub const NAMES: [&'static str; 3] = ["none", "requested", "required"];
}

impl std::str::FromStr for ClientAuth {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(ClientAuth::None),
            "requested" => Ok(ClientAuth::Requested),
            "required" => Ok(ClientAuth::Required),
            _ => Err(format!(
                "{s:?}: not a client authentication; one of {}",
                ClientAuth::NAMES.join(", ")
            )),
        }
    }
}

impl fmt::Display for ClientAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = match self {
            ClientAuth::None => 0,
            ClientAuth::Requested => 1,
            ClientAuth::Required => 2,
        };
        f.write_str(ClientAuth::NAMES[i])
    }
}

/// How the listeners' TLS is set up.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    /// The broker's private key and certificate chain.
    pub keystore: Keystore,
    /// Whether clients are asked for a certificate.
    pub client_auth: ClientAuth,
    /// The CA certificates client certificates must lead to; needed
    /// unless `client_auth` is [`ClientAuth::None`].
    pub truststore: Option<Truststore>,
    /// How a client certificate's subject becomes its principal's name
    /// (Kafka's `ssl.principal.mapping.rules`).
    pub principal_rules: PrincipalRules,
}

/// Why the listeners' TLS could not be set up.
#[derive(Debug)]
pub enum TlsError {
    /// A file could not be read, is not of the kind wanted or holds
    /// nothing of it, or does not open with the password given.
    File {
        /// Which file.
        path: PathBuf,
        /// What was wanted of it.
        wanted: &'static str,
        /// What went wrong.
        why: String,
    },
    /// Client certificates are asked for without a CA file to check them.
    NoClientCa(ClientAuth),
    /// A trust store for client certificates, which are not asked for.
    ClientCaUnused,
    /// rustls refused the setup: a key that does not match the
    /// certificate, a CA certificate it cannot use.
    Refused(String),
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::File { path, wanted, why } => {
                write!(f, "{}: {why} (wanted {wanted})", path.display())
            }
            TlsError::NoClientCa(auth) => write!(
                f,
                "client authentication {auth} needs the CA certificates that client \
                 certificates must lead to"
            ),
            TlsError::ClientCaUnused => f.write_str(
                "a trust store for client certificates is given, but none are asked \
                 for: say whether they are requested or required",
            ),
            TlsError::Refused(why) => write!(f, "TLS cannot be set up: {why}"),
        }
    }
}

impl std::error::Error for TlsError {}

/// The listeners' TLS, ready to accept connections with.
#[derive(Clone)]
pub struct Tls {
    acceptor: TlsAcceptor,
    principal_rules: Arc<PrincipalRules>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("principal_rules", &self.principal_rules)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// Reads `config`'s files and sets up TLS 1.2 and 1.3 with them.
    ///
    /// # Errors
    /// A file that cannot be read, holds no certificate (or key), or does
    /// not open with its password; a key that does not match the
    /// certificate; client certificates asked for without a trust store,
    /// or a trust store with none asked for.
    pub fn load(config: &TlsConfig) -> Result<Tls, TlsError> {
        let (chain, key) = config.keystore.read()?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let refused = |e: rustls::Error| TlsError::Refused(e.to_string());
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(refused)?;
        let builder = match (config.client_auth, &config.truststore) {
            (ClientAuth::None, None) => builder.with_no_client_auth(),
            (ClientAuth::None, Some(_)) => return Err(TlsError::ClientCaUnused),
            (auth, None) => return Err(TlsError::NoClientCa(auth)),
            (auth, Some(truststore)) => {
                let mut roots = rustls::RootCertStore::empty();
                for ca in truststore.read()? {
                    roots.add(ca).map_err(refused)?;
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                );
                let verifier = if auth == ClientAuth::Requested {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| TlsError::Refused(e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let server = builder.with_single_cert(chain, key).map_err(refused)?;
        Ok(Tls {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            principal_rules: Arc::new(config.principal_rules.clone()),
        })
    }

    /// The server's side of the handshake on `stream`; then the stream and,
    /// if the client showed a certificate, its principal. A certificate
    /// whose subject does not read, or that no mapping rule applies to,
    /// fails the handshake.
    pub(crate) async fn accept(
        &self,
        stream: TcpStream,
    ) -> std::io::Result<(TlsStream<TcpStream>, Option<Principal>)> {
        let stream = self.acceptor.accept(stream).await?;
        let Some(cert) = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
        else {
            return Ok((stream, None));
        };
        let subject = subject_name(cert).map_err(std::io::Error::other)?;
        let name = self.principal_rules.name(&subject).ok_or_else(|| {
            std::io::Error::other(format!(
                "no principal mapping rule applies to {subject} (rules {})",
                self.principal_rules
            ))
        })?;
        Ok((stream, Some(Principal::user(&name))))
    }
}

/// The subject of the DER certificate `cert` as Java's
/// `X500Principal.getName()` writes it (RFC 2253), which is the name
/// Kafka's default principal builder gives a client certificate: the
/// relative names last first, joined by commas; in each, its attributes
/// joined by `+`, as `KEYWORD=value` for the keywords Java knows (CN, C, L,
/// ST, O, OU, STREET, DC, UID), the value's special characters escaped
/// with a backslash; any other attribute as its dotted OID, `=#` and the
/// hex of its value's DER encoding.
///
/// ```
/// # use broker_sim::wire::tls::subject_name;
/// let key = rcgen::KeyPair::generate().unwrap();
/// let mut params = rcgen::CertificateParams::default();
/// params.distinguished_name = rcgen::DistinguishedName::new();
/// params.distinguished_name.push(rcgen::DnType::OrganizationName, "Acme, Inc.");
/// params.distinguished_name.push(rcgen::DnType::CommonName, "client-1");
/// let cert = params.self_signed(&key).unwrap();
/// assert_eq!(subject_name(cert.der()).unwrap(), r"CN=client-1,O=Acme\, Inc.");
/// ```
///
/// # Errors
/// A certificate that does not parse.
pub fn subject_name(cert: &[u8]) -> Result<String, String> {
    use x509_parser::der_parser::asn1_rs::ToDer;
    let (_, cert) = x509_parser::parse_x509_certificate(cert)
        .map_err(|e| format!("not an X.509 certificate: {e}"))?;
    let rdns: Vec<String> = cert
        .subject()
        .iter()
        .map(|rdn| {
            let parts: Vec<String> = rdn
                .iter()
                .map(|attr| {
                    let oid = attr.attr_type().to_id_string();
                    match (keyword(&oid), attr.as_str()) {
                        (Some(keyword), Ok(value)) => format!("{keyword}={}", escaped(value)),
                        _ => {
                            let der = attr.attr_value().to_der_vec().unwrap_or_default();
                            let hex: String = der.iter().map(|b| format!("{b:02x}")).collect();
                            format!("{oid}=#{hex}")
                        }
                    }
                })
                .collect();
            parts.join("+")
        })
        .collect();
    Ok(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

/// The RFC 2253 keyword Java writes for an attribute type, by OID.
fn keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

/// `value` with RFC 2253's special characters escaped: any of `,+"\<>;`,
/// a `#` or a space first, a space last.
fn escaped(value: &str) -> String {
    let last = value.chars().count().saturating_sub(1);
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && matches!(c, '#' | ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate(names: &[(rcgen::DnType, &str)]) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (kind, value) in names {
            params.distinguished_name.push(kind.clone(), *value);
        }
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn a_subject_is_written_last_name_first_as_java_writes_it() {
        use rcgen::DnType::*;
        let cert = certificate(&[
            (CountryName, "NL"),
            (OrganizationName, "Acme"),
            (OrganizationalUnitName, "payments"),
            (CommonName, "svc-1"),
        ]);
        assert_eq!(
            subject_name(&cert).unwrap(),
            "CN=svc-1,OU=payments,O=Acme,C=NL"
        );
    }

    #[test]
    fn special_characters_are_escaped_and_unknown_attributes_are_hex() {
        use rcgen::DnType::*;
        let cert = certificate(&[
            (CustomDnType(vec![1, 2, 840, 113549, 1, 9, 1]), "a@b.c"),
            (CommonName, " x;y<z> "),
        ]);
        // rcgen writes a custom attribute as a UTF8String (tag 0x0c), here
        // of 5 bytes.
        assert_eq!(
            subject_name(&cert).unwrap(),
            r"CN=\ x\;y\<z\>\ ,1.2.840.113549.1.9.1=#0c056140622e63"
        );
    }

    #[test]
    fn what_is_not_a_certificate_is_refused() {
        assert!(subject_name(b"not DER").is_err());
    }

    #[test]
    fn client_auth_reads_kafkas_names_only() {
        for name in ClientAuth::NAMES {
            assert_eq!(name.parse::<ClientAuth>().unwrap().to_string(), name);
        }
        let e = "want".parse::<ClientAuth>().unwrap_err();
        assert!(e.contains("none, requested, required"), "{e}");
    }
}
