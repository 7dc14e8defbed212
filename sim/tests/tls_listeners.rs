//! Listeners over TLS (Kafka's SSL security protocol): rskafka with
//! rustls as its TLS produces with acks=all and long-polls through them;
//! a client certificate is the principal the authorizer checks; failed
//! handshakes close their connections and are counted; a crashed broker's
//! TLS connections end at once; the broker's identity and the CA it
//! trusts come from PKCS #12 stores written by keytool and OpenSSL. Real clients over TLS (librdkafka,
//! confluent-kafka, SASL_SSL) are in `real_clients.rs`.

mod pki;

use broker_sim::config::Fault;
use broker_sim::live::{Authorization, LiveConfig};
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::tls::ClientAuth;
use broker_sim::wire::Limits;
use pki::{Authority, Pem};
use rcgen::DnType;
use rskafka::client::partition::{Compression, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::Record;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

fn start(pki: &Authority, auth: ClientAuth, live: LiveConfig) -> Server {
    start_with_rules(pki, auth, "DEFAULT", live)
}

/// As [`start`], with Kafka's `ssl.principal.mapping.rules`.
fn start_with_rules(pki: &Authority, auth: ClientAuth, rules: &str, live: LiveConfig) -> Server {
    serve(pki.broker_tls(auth, rules), live)
}

/// A served cluster behind `tls`.
fn serve(tls: broker_sim::wire::tls::Tls, live: LiveConfig) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live,
        topics: Vec::new(),
        limits: Limits::default(),
        tls: Some(tls),
    })
    .expect("the server starts")
}

/// A rustls client trusting `trusted`'s CA, showing `identity` if any.
fn client_config(trusted: &Authority, identity: Option<&Pem>) -> Arc<ClientConfig> {
    client_config_trusting(&trusted.ca_der, identity)
}

/// A rustls client trusting the CA certificate `ca_der`, showing
/// `identity` if any.
fn client_config_trusting(ca_der: &[u8], identity: Option<&Pem>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from(ca_der.to_vec())).unwrap();
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
    Arc::new(match identity {
        Some(pem) => {
            let chain = pki::der_certificates(&pem.cert)
                .into_iter()
                .map(CertificateDer::from)
                .collect();
            let key = PrivateKeyDer::from_pem_file(&pem.key).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    })
}

/// Runs the client side on a runtime of its own (the server has one).
fn client_side<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(work)
}

async fn connect_to(
    server: &Server,
    tls: Arc<ClientConfig>,
) -> Result<Client, rskafka::client::error::Error> {
    let brokers = server.addrs().iter().map(|a| a.to_string()).collect();
    ClientBuilder::new(brokers).tls_config(tls).build().await
}

/// A TLS handshake with `addr` as a client configured by `config`, then a
/// read: `Err` once the server has closed the connection or refused the
/// handshake. (In TLS 1.3 the server checks the client's certificate
/// after the client has finished: its refusal comes with the first read.)
async fn handshake(addr: std::net::SocketAddr, config: Arc<ClientConfig>) -> std::io::Result<()> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = ServerName::IpAddress(addr.ip().into());
    let mut stream = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await?;
    let mut byte = [0u8; 1];
    match stream.read(&mut byte).await {
        Ok(0) => Err(std::io::Error::other("closed")),
        Ok(_) => Ok(()),
        Err(e) => Err(e),
    }
}

fn record(value: &[u8]) -> Record {
    Record {
        key: None,
        value: Some(value.to_vec()),
        headers: BTreeMap::new(),
        timestamp: chrono::Utc::now(),
    }
}

#[test]
fn over_tls_acks_all_produces_are_stored_and_a_long_poll_waits_in_the_purgatory() {
    let pki = Authority::new("test CA");
    let server = start(&pki, ClientAuth::None, LiveConfig::default());
    client_side(async {
        let client = connect_to(&server, client_config(&pki, None))
            .await
            .unwrap();
        let controller = client.controller_client().unwrap();
        controller.create_topic("tls", 1, 3, 5_000).await.unwrap();
        let p = client
            .partition_client("tls", 0, UnknownTopicHandling::Retry)
            .await
            .unwrap();
        for i in 0..100 {
            let offsets = p
                .produce(
                    vec![record(format!("v{i}").as_bytes())],
                    Compression::NoCompression,
                )
                .await
                .unwrap();
            assert_eq!(offsets, vec![i]);
        }
        let (records, high_watermark) = p.fetch_records(0, 1..10_000_000, 1_000).await.unwrap();
        assert_eq!(high_watermark, 100);
        let values: Vec<_> = records.iter().map(|r| r.record.value.clone()).collect();
        let sent: Vec<_> = (0..100)
            .map(|i| Some(format!("v{i}").into_bytes()))
            .collect();
        assert_eq!(values, sent);

        // A long poll at the end, woken by the next produce.
        let waiter = Arc::new(
            client
                .partition_client("tls", 0, UnknownTopicHandling::Retry)
                .await
                .unwrap(),
        );
        let waiting = tokio::spawn({
            let waiter = Arc::clone(&waiter);
            async move {
                let t = Instant::now();
                let (records, _) = waiter
                    .fetch_records(100, 1..1_000_000, 10_000)
                    .await
                    .unwrap();
                (records.len(), t.elapsed())
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        p.produce(vec![record(b"wake")], Compression::NoCompression)
            .await
            .unwrap();
        let (woken, after) = waiting.await.unwrap();
        assert_eq!(woken, 1);
        assert!(
            after >= Duration::from_millis(300) && after < Duration::from_secs(5),
            "woken after {after:?}"
        );
    });
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert!(report.count("parked in the purgatory").unwrap() > 0);
    assert_eq!(report.count("TLS handshakes failed").unwrap(), 0);
}

#[test]
fn a_client_certificate_is_the_principal_the_acls_are_checked_against() {
    let pki = Authority::new("test CA");
    // Written last name first, as Kafka names it.
    let alice = "CN=alice,OU=payments,O=Acme";
    let live = LiveConfig {
        authorization: Some(Authorization {
            super_users: [format!("User:{alice}")].into(),
            allow_everyone_if_no_acl_found: false,
        }),
        ..LiveConfig::default()
    };
    // Requested: a client without a certificate is served, as anonymous.
    let server = start(&pki, ClientAuth::Requested, live);
    let alice_pem = pki.client(
        "alice",
        &[
            (DnType::OrganizationName, "Acme"),
            (DnType::OrganizationalUnitName, "payments"),
            (DnType::CommonName, "alice"),
        ],
    );
    let bob_pem = pki.client("bob", &[(DnType::CommonName, "bob")]);
    client_side(async {
        let alice = connect_to(&server, client_config(&pki, Some(&alice_pem)))
            .await
            .unwrap();
        alice
            .controller_client()
            .unwrap()
            .create_topic("ledger", 1, 3, 5_000)
            .await
            .unwrap();
        let p = alice
            .partition_client("ledger", 0, UnknownTopicHandling::Retry)
            .await
            .unwrap();
        p.produce(vec![record(b"credit")], Compression::NoCompression)
            .await
            .unwrap();

        for (who, identity) in [("bob", Some(&bob_pem)), ("anonymous", None)] {
            let client = connect_to(&server, client_config(&pki, identity))
                .await
                .unwrap();
            // Neither may see the topic: its metadata is refused.
            let denied = tokio::time::timeout(
                Duration::from_secs(10),
                client.partition_client("ledger", 0, UnknownTopicHandling::Error),
            )
            .await
            .expect("answered");
            let e = denied.err().unwrap_or_else(|| panic!("{who} was let in"));
            assert!(
                format!("{e:?}").contains("TopicAuthorizationFailed"),
                "{who}: {e:?}"
            );
        }
    });
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert!(report.count("ACL checks denied").unwrap() > 0);
}

#[test]
fn mapping_rules_name_the_principal_and_a_subject_none_applies_to_is_refused() {
    let pki = Authority::new("test CA");
    let live = LiveConfig {
        authorization: Some(Authorization {
            super_users: ["User:connect".to_string()].into(),
            allow_everyone_if_no_acl_found: false,
        }),
        ..LiveConfig::default()
    };
    // Service users by their common name, in lower case; people in the
    // Acme organisation whole; nobody else.
    let rules = "RULE:^CN=([^,]+),OU=ServiceUsers,O=Acme$/$1/L, RULE:^.*,O=Acme$/$0/";
    let server = start_with_rules(&pki, ClientAuth::Required, rules, live);
    let connect = pki.client(
        "connect",
        &[
            (DnType::OrganizationName, "Acme"),
            (DnType::OrganizationalUnitName, "ServiceUsers"),
            (DnType::CommonName, "Connect"),
        ],
    );
    let carol = pki.client(
        "carol",
        &[
            (DnType::OrganizationName, "Acme"),
            (DnType::CommonName, "carol"),
        ],
    );
    let outsider = pki.client("outsider", &[(DnType::CommonName, "outsider")]);
    client_side(async {
        // `User:connect` is the super user: the first rule named it.
        let client = connect_to(&server, client_config(&pki, Some(&connect)))
            .await
            .unwrap();
        client
            .controller_client()
            .unwrap()
            .create_topic("mapped", 1, 3, 5_000)
            .await
            .unwrap();
        // `User:CN=carol,O=Acme` (the second rule): served, but not let in.
        let client = connect_to(&server, client_config(&pki, Some(&carol)))
            .await
            .unwrap();
        let Err(denied) = client
            .partition_client("mapped", 0, UnknownTopicHandling::Error)
            .await
        else {
            panic!("carol is let in");
        };
        assert!(
            format!("{denied:?}").contains("TopicAuthorizationFailed"),
            "{denied:?}"
        );
        // No rule applies to the outsider: its connection is closed once
        // its certificate is seen.
        let addr = server.addrs()[0];
        let config = client_config(&pki, Some(&outsider));
        let refused = tokio::time::timeout(Duration::from_secs(10), handshake(addr, config)).await;
        assert!(matches!(refused, Ok(Err(_))), "{refused:?}");
    });
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert!(report.count("TLS handshakes failed").unwrap() >= 1);
    assert!(report.count("ACL checks denied").unwrap() >= 1);
}

#[test]
fn a_failed_handshake_closes_its_connection_and_is_counted() {
    let pki = Authority::new("test CA");
    let stranger = Authority::new("another CA");
    let server = start(&pki, ClientAuth::Required, LiveConfig::default());
    let addr = server.addrs()[0];
    // A plaintext client: its first frame is not a TLS record, and the
    // connection ends (with a TLS alert at most) instead of an answer.
    let mut plain = std::net::TcpStream::connect(addr).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // ApiVersions v0, correlation id 1, no client id.
    plain
        .write_all(&[0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff])
        .unwrap();
    let mut answer = Vec::new();
    plain
        .read_to_end(&mut answer)
        .expect("closed, not timed out");
    assert!(answer.is_empty() || answer[0] == 0x15, "{answer:?}");

    let certificate = pki.client("ok", &[(DnType::CommonName, "ok")]);
    let foreign = stranger.client("foreign", &[(DnType::CommonName, "foreign")]);
    client_side(async {
        // Without a certificate where one is required; with one from a CA
        // the broker does not trust; trusting another CA than the
        // broker's.
        for (what, config) in [
            ("no certificate", client_config(&pki, None)),
            ("a foreign certificate", client_config(&pki, Some(&foreign))),
            ("a foreign CA", client_config(&stranger, Some(&certificate))),
        ] {
            let done = tokio::time::timeout(Duration::from_secs(10), handshake(addr, config)).await;
            assert!(matches!(done, Ok(Err(_))), "{what}: {done:?}");
        }
        // The broker's own CA and a certificate it issued: served.
        let client = connect_to(&server, client_config(&pki, Some(&certificate)))
            .await
            .unwrap();
        assert!(client.list_topics().await.is_ok());
    });
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert_eq!(report.count("TLS handshakes failed").unwrap(), 4);
}

#[test]
fn a_crashed_brokers_tls_connections_end_at_once() {
    let pki = Authority::new("test CA");
    let crash_at = Duration::from_millis(1500);
    let live = LiveConfig {
        faults: vec![Fault::Crash {
            broker: 0,
            at: crash_at,
        }],
        ..LiveConfig::default()
    };
    let server = start(&pki, ClientAuth::None, live);
    let started = Instant::now();
    let addr = server.addrs()[0];
    let config = client_config(&pki, None);
    let ended = client_side(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = ServerName::IpAddress(addr.ip().into());
        let mut stream = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .expect("the handshake");
        // Nothing is sent: the connection idles until the crash ends it.
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut byte)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "the connection ended: {read:?}"
        );
        started.elapsed()
    });
    assert!(
        ended >= crash_at && ended < crash_at + Duration::from_secs(3),
        "ended {ended:?} after the start, the crash at {crash_at:?}"
    );
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "the crashed broker's listener is closed"
    );
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

#[test]
fn keystores_written_by_keytool_and_openssl_serve_a_client_they_authenticate() {
    use broker_sim::wire::keystore::{Keystore, Password, Truststore};
    use broker_sim::wire::tls::{Tls, TlsConfig};
    // Made by `tests/keystores/make.sh`: the broker's key and chain in
    // keytool's PKCS #12, the CA in OpenSSL's trust store, a client
    // certificate that CA issued.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/keystores");
    let subject = "CN=client-1,OU=payments,O=Acme";
    let tls = Tls::load(&TlsConfig {
        keystore: Keystore::Pkcs12 {
            path: dir.join("broker-keytool.p12"),
            password: Password::new("store-secret"),
        },
        client_auth: ClientAuth::Required,
        truststore: Some(Truststore::Pkcs12 {
            path: dir.join("truststore-openssl.p12"),
            password: Password::new("trust-secret"),
        }),
        principal_rules: "DEFAULT".parse().unwrap(),
    })
    .expect("TLS is set up from the stores");
    let live = LiveConfig {
        authorization: Some(Authorization {
            super_users: [format!("User:{subject}")].into(),
            allow_everyone_if_no_acl_found: false,
        }),
        ..LiveConfig::default()
    };
    let server = serve(tls, live);
    let ca = pki::der_certificates(&dir.join("ca.pem")).remove(0);
    let client_pem = Pem {
        cert: dir.join("client.pem"),
        key: dir.join("client.key"),
    };
    client_side(async {
        // Only the super user, named by its certificate, may create a
        // topic when ACLs are checked.
        let client = connect_to(&server, client_config_trusting(&ca, Some(&client_pem)))
            .await
            .unwrap();
        client
            .controller_client()
            .unwrap()
            .create_topic("stores", 1, 3, 5_000)
            .await
            .unwrap();
        let p = client
            .partition_client("stores", 0, UnknownTopicHandling::Retry)
            .await
            .unwrap();
        for i in 0..20 {
            let offsets = p
                .produce(vec![record(&[i])], Compression::NoCompression)
                .await
                .unwrap();
            assert_eq!(offsets, vec![i64::from(i)]);
        }
        let (records, high_watermark) = p.fetch_records(0, 1..1_000_000, 1_000).await.unwrap();
        assert_eq!(high_watermark, 20);
        assert_eq!(records.len(), 20);
        // Without a certificate the handshake fails: one is required.
        let addr = server.addrs()[0];
        let refused = tokio::time::timeout(
            Duration::from_secs(10),
            handshake(addr, client_config_trusting(&ca, None)),
        )
        .await;
        assert!(matches!(refused, Ok(Err(_))), "{refused:?}");
    });
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert_eq!(report.count("TLS handshakes failed").unwrap(), 1);
    assert_eq!(report.count("ACL checks denied").unwrap(), 0);
}
