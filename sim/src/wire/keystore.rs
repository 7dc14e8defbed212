//! Where the listeners' TLS material comes from, in the forms Kafka's
//! brokers are given it: the broker's key and certificate chain as PEM
//! files (Kafka's `ssl.keystore.type=PEM`, the key optionally encrypted as
//! PKCS #8 under `ssl.key.password`) or as a PKCS #12 file (`PKCS12`, what
//! Java's `keytool` and `openssl pkcs12 -export` write); the CA
//! certificates that client certificates must lead to as a PEM file or a
//! PKCS #12 trust store.
//!
//! Java's older JKS format is not read: `keytool -importkeystore
//! -srckeystore broker.jks -destkeystore broker.p12 -deststoretype pkcs12`
//! converts a JKS store, and [`Keystore::read`] says so when given one.

use super::tls::TlsError;
use pkcs8::der::Decode;
use pkcs8::EncryptedPrivateKeyInfoRef;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::fmt;
use std::path::{Path, PathBuf};

/// A password for a key or a store. Its `Debug` hides it, so that a
/// configuration can be logged whole.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    /// The password `text`.
    pub fn new(text: impl Into<String>) -> Password {
        Password(text.into())
    }

    fn text(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(hidden)")
    }
}

impl std::str::FromStr for Password {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Password, Self::Err> {
        Ok(Password::new(s))
    }
}

/// The broker's private key and certificate chain.
#[derive(Debug, Clone)]
pub enum Keystore {
    /// PEM files (Kafka's `ssl.keystore.type=PEM`).
    Pem {
        /// The broker's certificate, then the CA certificates that lead to
        /// its root.
        certificate_chain: PathBuf,
        /// The certificate's private key: PKCS #8, PKCS #1 or SEC 1, or,
        /// with `key_password`, encrypted PKCS #8 (`ENCRYPTED PRIVATE
        /// KEY`, as `openssl pkcs8 -topk8` writes it).
        private_key: PathBuf,
        /// The encrypted key's password (Kafka's `ssl.key.password`).
        key_password: Option<Password>,
    },
    /// A PKCS #12 file holding one private key and its certificate chain
    /// (Kafka's `ssl.keystore.type=PKCS12`), its key and certificates
    /// under the one `password` (Kafka's `ssl.keystore.password`;
    /// `keytool` and OpenSSL write PKCS #12 files with one password).
    Pkcs12 {
        /// The file.
        path: PathBuf,
        /// Its password.
        password: Password,
    },
}

/// The CA certificates that client certificates must lead to (Kafka's
/// trust store).
#[derive(Debug, Clone)]
pub enum Truststore {
    /// A PEM file of certificates (Kafka's `ssl.truststore.type=PEM`).
    Pem(PathBuf),
    /// A PKCS #12 file (`ssl.truststore.type=PKCS12`): every certificate in
    /// it is trusted but a private key's own, whether `keytool` marked it
    /// as a trusted entry or OpenSSL wrote it without that mark.
    Pkcs12 {
        /// The file.
        path: PathBuf,
        /// Its password (Kafka's `ssl.truststore.password`).
        password: Password,
    },
}

/// The certificates and key that make up a listener's identity.
pub(crate) type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

impl Keystore {
    /// The certificate chain, the broker's own certificate first, and its
    /// private key.
    ///
    /// # Errors
    /// [`TlsError::File`] for a file that cannot be read, is not of its
    /// kind, holds no key or certificate, or does not open with the
    /// password given (or needs one that was not given).
    pub(crate) fn read(&self) -> Result<Identity, TlsError> {
        match self {
            Keystore::Pem {
                certificate_chain,
                private_key,
                key_password,
            } => {
                let chain = pem_certificates(certificate_chain, "a PEM certificate chain")?;
                let key = pem_key(private_key, key_password.as_ref())?;
                Ok((chain, key))
            }
            Keystore::Pkcs12 { path, password } => pkcs12_identity(path, password),
        }
    }
}

impl Truststore {
    /// The trusted certificates: at least one.
    ///
    /// # Errors
    /// [`TlsError::File`] for a file that cannot be read, is not of its
    /// kind, holds no certificate, or does not open with the password.
    pub(crate) fn read(&self) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        match self {
            Truststore::Pem(path) => pem_certificates(path, "PEM CA certificates"),
            Truststore::Pkcs12 { path, password } => {
                let wanted = "a PKCS #12 trust store";
                let archive = pkcs12(path, password, wanted)?;
                let trusted: Vec<CertificateDer<'static>> = archive
                    .certs
                    .into_iter()
                    .filter(|c| {
                        let id = c.local_key_id.as_deref();
                        id.is_none()
                            || archive
                                .keys
                                .iter()
                                .all(|k| k.local_key_id.as_ref().map(|k| k.0.as_slice()) != id)
                    })
                    .map(|c| CertificateDer::from(c.cert.as_der().to_vec()))
                    .collect();
                if trusted.is_empty() {
                    return Err(file_error(
                        path,
                        wanted,
                        "no certificate in it but a private key's own".into(),
                    ));
                }
                Ok(trusted)
            }
        }
    }
}

fn file_error(path: &Path, wanted: &'static str, why: String) -> TlsError {
    TlsError::File {
        path: path.to_owned(),
        wanted,
        why,
    }
}

/// Every certificate in the PEM file at `path`: at least one.
fn pem_certificates(
    path: &Path,
    wanted: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let failed = |why: String| file_error(path, wanted, why);
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|e| failed(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(e.to_string()))?;
    if certificates.is_empty() {
        return Err(failed("no CERTIFICATE block in it".into()));
    }
    Ok(certificates)
}

const ENCRYPTED_BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
const ENCRYPTED_END: &str = "-----END ENCRYPTED PRIVATE KEY-----";

/// The private key in the PEM file at `path`, decrypted with `password`
/// if one is given, in which case the key must be encrypted PKCS #8.
fn pem_key(path: &Path, password: Option<&Password>) -> Result<PrivateKeyDer<'static>, TlsError> {
    let text =
        std::fs::read(path).map_err(|e| file_error(path, "a PEM private key", e.to_string()))?;
    let encrypted = std::str::from_utf8(&text).ok().and_then(|t| {
        let start = t.find(ENCRYPTED_BEGIN)?;
        let end = t[start..].find(ENCRYPTED_END)? + start + ENCRYPTED_END.len();
        Some(&t[start..end])
    });
    match (encrypted, password) {
        (None, None) => PrivateKeyDer::from_pem_slice(&text)
            .map_err(|e| file_error(path, "a PEM private key", e.to_string())),
        (Some(_), None) => Err(file_error(
            path,
            "a PEM private key",
            "the key is encrypted and no password was given for it".into(),
        )),
        (None, Some(_)) => Err(file_error(
            path,
            "an encrypted PEM private key (PKCS #8, ENCRYPTED PRIVATE KEY)",
            "a password is given, but there is no ENCRYPTED PRIVATE KEY block in it".into(),
        )),
        (Some(block), Some(password)) => {
            let wanted = "an encrypted PEM private key (PKCS #8, ENCRYPTED PRIVATE KEY)";
            let (_, der) = pkcs8::der::pem::decode_vec(block.as_bytes())
                .map_err(|e| file_error(path, wanted, e.to_string()))?;
            let info = EncryptedPrivateKeyInfoRef::from_der(&der)
                .map_err(|e| file_error(path, wanted, e.to_string()))?;
            let key = info.decrypt(password.text()).map_err(|e| {
                file_error(
                    path,
                    wanted,
                    format!("it does not decrypt with the password given ({e})"),
                )
            })?;
            Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
                key.as_bytes().to_vec(),
            )))
        }
    }
}

/// The private key of the PKCS #12 file at `path` and its chain: its own
/// certificate, then the file's certificates that lead to a root, as far
/// as the file holds them.
fn pkcs12_identity(path: &Path, password: &Password) -> Result<Identity, TlsError> {
    let wanted = "a PKCS #12 keystore with a private key";
    let archive = pkcs12(path, password, wanted)?;
    let failed = |why: &str| file_error(path, wanted, why.to_owned());
    let mut keys = archive.keys.into_iter();
    let key = keys.next().ok_or_else(|| failed("no private key in it"))?;
    if keys.next().is_some() {
        return Err(failed(
            "more than one private key in it; keep the broker's alone",
        ));
    }
    let mut certs = archive.certs;
    // The key's own certificate is the one bearing its local
    // key id, or, for a file without ids, the first.
    let key_id = key.local_key_id.as_ref().map(|id| id.0.as_slice());
    let own = certs
        .iter()
        .position(|c| key_id.is_some() && c.local_key_id.as_deref() == key_id)
        .or_else(|| (!certs.is_empty()).then_some(0))
        .ok_or_else(|| failed("no certificate for its private key"))?;
    let leaf = certs.remove(own).cert;
    // Then the chain to the root, as far as the file holds it.
    let mut chain = vec![CertificateDer::from(leaf.as_der().to_vec())];
    let mut issuer = leaf.issuer().to_owned();
    let mut subject = leaf.subject().to_owned();
    while issuer != subject {
        let Some(next) = certs.iter().position(|c| c.cert.subject() == issuer) else {
            break;
        };
        let next = certs.remove(next).cert;
        chain.push(CertificateDer::from(next.as_der().to_vec()));
        issuer = next.issuer().to_owned();
        subject = next.subject().to_owned();
    }
    let key = PrivatePkcs8KeyDer::from(key.key.as_der().to_vec());
    Ok((chain, PrivateKeyDer::Pkcs8(key)))
}

/// The Java keystore format's first four bytes.
const JKS_MAGIC: [u8; 4] = [0xfe, 0xed, 0xfe, 0xed];

/// The decrypted contents of the PKCS #12 file at `path`.
fn pkcs12(
    path: &Path,
    password: &Password,
    wanted: &'static str,
) -> Result<p12_keystore::Pkcs12Archive, TlsError> {
    let data = std::fs::read(path).map_err(|e| file_error(path, wanted, e.to_string()))?;
    if data.starts_with(&JKS_MAGIC) {
        return Err(file_error(
            path,
            wanted,
            "a Java keystore (JKS), which is not read; convert it with `keytool \
             -importkeystore -srckeystore FILE.jks -destkeystore FILE.p12 \
             -deststoretype pkcs12`"
                .into(),
        ));
    }
    p12_keystore::Pkcs12Archive::from_pkcs12(&data, password.text()).map_err(|e| {
        let why = match e {
            p12_keystore::error::Error::MacError(_) => {
                "the password is wrong, or the file is damaged (its integrity check failed)"
                    .to_owned()
            }
            e => format!("it does not read as PKCS #12 with the password given: {e}"),
        };
        file_error(path, wanted, why)
    })
}

#[cfg(test)]
mod tests {
    //! Against files written by OpenSSL and keytool (`tests/keystores`,
    //! made by its `make.sh`).
    use super::*;

    fn file(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/keystores")
            .join(name)
    }

    fn pem(key: &str, password: Option<&str>) -> Keystore {
        Keystore::Pem {
            certificate_chain: file("broker.pem"),
            private_key: file(key),
            key_password: password.map(Password::new),
        }
    }

    fn pkcs12(name: &str, password: &str) -> Keystore {
        Keystore::Pkcs12 {
            path: file(name),
            password: Password::new(password),
        }
    }

    /// The plain PEM files' chain (the broker's certificate, then the
    /// CA's) and key, as PKCS #8 DER.
    fn expected() -> (Vec<Vec<u8>>, Vec<u8>) {
        let (chain, key) = pem("broker.key", None).read().unwrap();
        let PrivateKeyDer::Pkcs8(key) = key else {
            panic!("make.sh writes PKCS #8");
        };
        let chain: Vec<Vec<u8>> = chain.iter().map(|c| c.to_vec()).collect();
        assert_eq!(chain.len(), 2);
        (chain, key.secret_pkcs8_der().to_vec())
    }

    fn why(result: Result<impl fmt::Debug, TlsError>) -> String {
        match result {
            Err(TlsError::File { why, .. }) => why,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_form_of_the_broker_keystore_gives_the_same_chain_and_key() {
        let (chain, key) = expected();
        let stores = [
            pem("broker-aes.key", Some("key-secret")),
            pem("broker-des3.key", Some("key-secret")),
            pkcs12("broker-openssl.p12", "store-secret"),
            pkcs12("broker-legacy.p12", "store-secret"),
            pkcs12("broker-keytool.p12", "store-secret"),
        ];
        for store in stores {
            let (got_chain, got_key) = store.read().unwrap_or_else(|e| panic!("{store:?}: {e}"));
            let got_chain: Vec<Vec<u8>> = got_chain.iter().map(|c| c.to_vec()).collect();
            assert_eq!(got_chain, chain, "{store:?}");
            assert_eq!(got_key.secret_der(), key.as_slice(), "{store:?}");
        }
    }

    #[test]
    fn both_kinds_of_pkcs12_trust_store_give_the_ca() {
        let ca = Truststore::Pem(file("ca.pem")).read().unwrap();
        assert_eq!(ca.len(), 1);
        for name in ["truststore-keytool.p12", "truststore-openssl.p12"] {
            let store = Truststore::Pkcs12 {
                path: file(name),
                password: Password::new("trust-secret"),
            };
            assert_eq!(store.read().unwrap(), ca, "{name}");
        }
    }

    #[test]
    fn a_wrong_or_missing_password_says_so() {
        let wrong = why(pkcs12("broker-keytool.p12", "guess").read());
        assert!(wrong.contains("password is wrong"), "{wrong}");
        let wrong = why(pem("broker-aes.key", Some("guess")).read());
        assert!(
            wrong.contains("does not decrypt with the password"),
            "{wrong}"
        );
        let missing = why(pem("broker-aes.key", None).read());
        assert!(missing.contains("encrypted and no password"), "{missing}");
        let needless = why(pem("broker.key", Some("key-secret")).read());
        assert!(needless.contains("no ENCRYPTED PRIVATE KEY"), "{needless}");
        let trust = Truststore::Pkcs12 {
            path: file("truststore-openssl.p12"),
            password: Password::new("guess"),
        };
        assert!(why(trust.read()).contains("password is wrong"));
    }

    #[test]
    fn other_files_are_refused_with_the_reason() {
        let jks = why(pkcs12("broker.jks", "store-secret").read());
        assert!(
            jks.contains("JKS") && jks.contains("keytool -importkeystore"),
            "{jks}"
        );
        let pem_as_p12 = why(pkcs12("broker.pem", "store-secret").read());
        assert!(pem_as_p12.contains("PKCS #12"), "{pem_as_p12}");
        let trust_as_key = why(pkcs12("truststore-keytool.p12", "trust-secret").read());
        assert!(trust_as_key.contains("no private key"), "{trust_as_key}");
        let key_as_trust = Truststore::Pkcs12 {
            path: file("broker-keytool.p12"),
            password: Password::new("store-secret"),
        };
        // The key's own certificate is not trusted; its CA, in the file as
        // its chain, is.
        assert_eq!(key_as_trust.read().unwrap().len(), 1);
        let missing = why(pkcs12("no-such.p12", "x").read());
        assert!(!missing.is_empty());
    }

    #[test]
    fn a_password_is_not_shown() {
        let shown = format!("{:?}", pkcs12("broker-keytool.p12", "store-secret"));
        assert!(!shown.contains("store-secret"), "{shown}");
    }
}
