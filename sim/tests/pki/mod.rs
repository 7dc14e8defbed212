//! A certificate authority for the TLS tests: its certificate, a broker
//! certificate for `localhost` and 127.0.0.1, and client certificates,
//! each written as PEM into a directory of the test's own, removed when
//! the authority is dropped.

#![allow(dead_code)] // each test file uses part of it

use broker_sim::wire::keystore::{Keystore, Truststore};
use broker_sim::wire::tls::{ClientAuth, Tls, TlsConfig};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A certificate and its key, as PEM files.
#[derive(Debug, Clone)]
pub struct Pem {
    pub cert: PathBuf,
    pub key: PathBuf,
}

pub struct Authority {
    dir: PathBuf,
    issuer: Issuer<'static, KeyPair>,
    /// The authority's own certificate.
    pub ca: PathBuf,
    /// Its DER, for a rustls client's roots.
    pub ca_der: Vec<u8>,
}

impl Authority {
    /// A new authority named `name` (its certificate's common name).
    pub fn new(name: &str) -> Authority {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "broker-sim-pki-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("a directory for the certificates");
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = names(&[(DnType::CommonName, name)]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, cert.pem()).unwrap();
        Authority {
            dir,
            issuer: Issuer::new(params, key),
            ca,
            ca_der: cert.der().to_vec(),
        }
    }

    /// The broker's certificate: for `localhost` and 127.0.0.1.
    pub fn broker(&self) -> Pem {
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.distinguished_name = names(&[(DnType::CommonName, "broker")]);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue("broker", params)
    }

    /// The listeners' TLS with [`Self::broker`]'s certificate, asking
    /// clients for theirs as `client_auth` says (checked against this
    /// authority), their principals named by Kafka's mapping `rules`.
    pub fn broker_tls(&self, client_auth: ClientAuth, rules: &str) -> Tls {
        let broker = self.broker();
        Tls::load(&TlsConfig {
            keystore: Keystore::Pem {
                certificate_chain: broker.cert,
                private_key: broker.key,
                key_password: None,
            },
            client_auth,
            truststore: (client_auth != ClientAuth::None).then(|| Truststore::Pem(self.ca.clone())),
            principal_rules: rules.parse().expect("the rules read"),
        })
        .expect("TLS is set up")
    }

    /// A client's certificate with the subject `subject`, in the order
    /// given (the most significant name first).
    pub fn client(&self, file: &str, subject: &[(DnType, &str)]) -> Pem {
        let mut params = CertificateParams::default();
        params.distinguished_name = names(subject);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(file, params)
    }

    /// A file in the authority's directory.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// The directory: `ca.pem`, and `NAME.pem` and `NAME.key` for each
    /// certificate issued as NAME.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn issue(&self, file: &str, params: CertificateParams) -> Pem {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let pem = Pem {
            cert: self.dir.join(format!("{file}.pem")),
            key: self.dir.join(format!("{file}.key")),
        };
        std::fs::write(&pem.cert, cert.pem()).unwrap();
        std::fs::write(&pem.key, key.serialize_pem()).unwrap();
        pem
    }
}

impl Drop for Authority {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn names(subject: &[(DnType, &str)]) -> DistinguishedName {
    let mut names = DistinguishedName::new();
    for (kind, value) in subject {
        names.push(kind.clone(), *value);
    }
    names
}

/// The PEM file at `path` read as DER blocks (a rustls client's chain).
pub fn der_certificates(path: &Path) -> Vec<Vec<u8>> {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::CertificateDer;
    CertificateDer::pem_file_iter(path)
        .unwrap()
        .map(|c| c.unwrap().to_vec())
        .collect()
}
