//! A blocking Kafka client on the `kafka-protocol` crate's codecs, for
//! tests and load generators: it sends requests and reads responses over
//! one TCP connection, with as many requests in flight as the caller wants;
//! with builders of the record batches, produces, commits and quotas they
//! send.
//! It trusts the server (it panics on a response it cannot decode): it is
//! a test tool, not a production client.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, ApiKey, GroupId, OffsetCommitRequest, ProduceRequest, RequestHeader,
    ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
/// rustls' client configuration, which [`AsyncClient::connect_tls`] takes.
pub use tokio_rustls::rustls::ClientConfig as TlsClientConfig;

/// One connection.
pub struct Client {
    /// The socket.
    pub stream: TcpStream,
    next: i32,
}

impl Client {
    /// Connects, with a 60 s read timeout.
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Client { stream, next: 1 }
    }

    /// Connects to a SASL listener and authenticates by PLAIN as `user`
    /// (SaslHandshake v1, SaslAuthenticate v2); the error code and message
    /// of a refusal.
    pub fn connect_plain(
        addr: SocketAddr,
        user: &str,
        password: &str,
    ) -> Result<Client, (i16, String)> {
        use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
        let mut client = Client::connect(addr);
        let mut handshake = SaslHandshakeRequest::default();
        handshake.mechanism = StrBytes::from_static_str("PLAIN");
        let answer = client.call(&handshake, 1);
        if answer.error_code != 0 {
            return Err((answer.error_code, String::new()));
        }
        let mut token = SaslAuthenticateRequest::default();
        token.auth_bytes = Bytes::from(format!("\0{user}\0{password}"));
        let answer = client.call(&token, 2);
        if answer.error_code != 0 {
            let message = answer.error_message.map(|m| m.to_string());
            return Err((answer.error_code, message.unwrap_or_default()));
        }
        Ok(client)
    }

    /// Sends `request` at `version`; returns its correlation id.
    pub fn send<R: Request>(&mut self, request: &R, version: i16) -> i32 {
        let id = self.next;
        self.next += 1;
        self.stream
            .write_all(&encode_request(request, version, id))
            .unwrap();
        id
    }

    /// Reads one response frame; `None` if the connection was closed.
    pub fn read_frame(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).ok()?;
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut body).ok()?;
        Some(Bytes::from(body))
    }

    /// Reads the next response, as `R`'s response at `version`, with its
    /// correlation id.
    pub fn recv<R: Request>(&mut self, version: i16) -> (i32, R::Response) {
        decode_response::<R>(self.read_frame().expect("a response"), version)
    }

    /// Sends `request` and reads its response.
    pub fn call<R: Request>(&mut self, request: &R, version: i16) -> R::Response {
        let id = self.send(request, version);
        let (got, response) = self.recv::<R>(version);
        assert_eq!(got, id, "responses in request order");
        response
    }

    /// Writes `bytes` as they are.
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Whether the server closed the connection (reads end) within 10 s.
    pub fn closed_by_server(&mut self) -> bool {
        self.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut buf = [0u8; 64];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }
}

/// A request frame: size, header (client id "wire-test"), body.
pub fn encode_request<R: Request>(request: &R, version: i16, correlation_id: i32) -> BytesMut {
    let api = ApiKey::try_from(R::KEY).unwrap();
    let mut header = RequestHeader::default();
    header.request_api_key = R::KEY;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = Some(StrBytes::from_static_str("wire-test"));
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&[0; 4]);
    header
        .encode(&mut buf, api.request_header_version(version))
        .unwrap();
    request.encode(&mut buf, version).unwrap();
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    buf
}

/// A response frame's correlation id and body, as `R`'s response.
pub fn decode_response<R: Request>(mut frame: Bytes, version: i16) -> (i32, R::Response) {
    let api = ApiKey::try_from(R::KEY).unwrap();
    let header = ResponseHeader::decode(&mut frame, api.response_header_version(version)).unwrap();
    let body = R::Response::decode(&mut frame, version).unwrap();
    (header.correlation_id, body)
}

/// The same client on tokio, for load generators that run many
/// connections on few threads; over TCP, or TLS on it.
pub struct AsyncClient {
    stream: Transport,
    next: i32,
}

enum Transport {
    Plain(tokio::net::TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>),
}

impl AsyncClient {
    /// Connects.
    pub async fn connect(addr: SocketAddr) -> AsyncClient {
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).unwrap();
        AsyncClient {
            stream: Transport::Plain(stream),
            next: 1,
        }
    }

    /// Connects over TLS as `config` says, the server named by its IP
    /// address (its certificate must carry it).
    pub async fn connect_tls(
        addr: SocketAddr,
        config: std::sync::Arc<TlsClientConfig>,
    ) -> AsyncClient {
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).unwrap();
        let name = rustls_pki_types::ServerName::IpAddress(addr.ip().into());
        let stream = tokio_rustls::TlsConnector::from(config)
            .connect(name, stream)
            .await
            .expect("the TLS handshake");
        AsyncClient {
            stream: Transport::Tls(Box::new(stream)),
            next: 1,
        }
    }

    /// Sends `request` without waiting for its response; its correlation
    /// id.
    pub async fn send<R: Request>(&mut self, request: &R, version: i16) -> i32 {
        use tokio::io::AsyncWriteExt;
        let id = self.next;
        self.next += 1;
        let frame = encode_request(request, version, id);
        match &mut self.stream {
            Transport::Plain(s) => s.write_all(&frame).await,
            Transport::Tls(s) => s.write_all(&frame).await,
        }
        .unwrap();
        id
    }

    /// Sends `request` and reads its response.
    pub async fn call<R: Request>(&mut self, request: &R, version: i16) -> R::Response {
        let id = self.send(request, version).await;
        let body = match &mut self.stream {
            Transport::Plain(s) => read_frame_from(s).await,
            Transport::Tls(s) => read_frame_from(s.as_mut()).await,
        };
        let (got, response) = decode_response::<R>(body, version);
        assert_eq!(got, id, "responses in request order");
        response
    }
}

/// A TLS client configuration trusting the CA certificates of the PEM
/// file `ca`, for [`AsyncClient::connect_tls`].
///
/// # Panics
/// If the file cannot be read or holds no certificate rustls takes.
pub fn tls_client_config(ca: &std::path::Path) -> std::sync::Arc<TlsClientConfig> {
    use rustls_pki_types::pem::PemObject;
    use tokio_rustls::rustls;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_file_iter(ca).expect("the CA file") {
        roots
            .add(cert.expect("a PEM certificate"))
            .expect("a CA certificate");
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS 1.2 and 1.3")
    .with_root_certificates(roots)
    .with_no_client_auth();
    std::sync::Arc::new(config)
}

/// One size-prefixed frame from `stream`.
async fn read_frame_from(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> Bytes {
    use tokio::io::AsyncReadExt;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).await.unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut body).await.unwrap();
    Bytes::from(body)
}

/// A produce of one batch per (partition, batch) to `topic`, with `acks`
/// and `timeout_ms`.
pub fn produce_request(
    topic: &str,
    parts: &[(i32, Bytes)],
    acks: i16,
    timeout_ms: i32,
) -> ProduceRequest {
    let mut t = TopicProduceData::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.partition_data = parts
        .iter()
        .map(|(index, records)| {
            let mut p = PartitionProduceData::default();
            p.index = *index;
            p.records = Some(records.clone());
            p
        })
        .collect();
    let mut r = ProduceRequest::default();
    r.acks = acks;
    r.timeout_ms = timeout_ms;
    r.topic_data = vec![t];
    r
}

/// An OffsetCommit of each (topic, partition, offset) for `group`, by
/// `member` of `generation` (-1 and an empty member: outside any
/// generation), with no metadata.
pub fn commit_request(
    group: &str,
    generation: i32,
    member: &str,
    offsets: &[(&str, i32, i64)],
) -> OffsetCommitRequest {
    let mut r = OffsetCommitRequest::default();
    r.group_id = GroupId(StrBytes::from_string(group.to_string()));
    r.generation_id_or_member_epoch = generation;
    r.member_id = StrBytes::from_string(member.to_string());
    r.topics = offsets
        .iter()
        .map(|&(topic, partition, offset)| {
            let mut p = OffsetCommitRequestPartition::default();
            p.partition_index = partition;
            p.committed_offset = offset;
            let mut t = OffsetCommitRequestTopic::default();
            t.name = TopicName(StrBytes::from_string(topic.to_string()));
            t.partitions = vec![p];
            t
        })
        .collect();
    r
}

/// An AlterClientQuotas setting quota `key` to `value` for the entity
/// of `entity_type` named `name` (`None`: that type's default).
pub fn quota_request(
    entity_type: &str,
    name: Option<&str>,
    key: &str,
    value: f64,
) -> AlterClientQuotasRequest {
    use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
    let mut entity = EntityData::default();
    entity.entity_type = StrBytes::from_string(entity_type.to_string());
    entity.entity_name = name.map(|n| StrBytes::from_string(n.to_string()));
    let mut op = OpData::default();
    op.key = StrBytes::from_string(key.to_string());
    op.value = value;
    let mut entry = EntryData::default();
    entry.entity = vec![entity];
    entry.ops = vec![op];
    let mut r = AlterClientQuotasRequest::default();
    r.entries = vec![entry];
    r
}

/// A v2 record batch holding `values`, uncompressed, from a producer
/// without idempotence.
pub fn batch(values: &[&[u8]]) -> Bytes {
    idempotent_batch(values, -1, -1, -1)
}

/// A v2 record batch holding `values`, uncompressed, from idempotent
/// producer `producer_id` at `epoch`, its first record numbered
/// `first_seq` (-1 for all three: a producer without idempotence).
pub fn idempotent_batch(values: &[&[u8]], producer_id: i64, epoch: i16, first_seq: i32) -> Bytes {
    let timed: Vec<(i64, &[u8])> = values.iter().map(|v| (0, *v)).collect();
    encode_batch(&timed, (producer_id, epoch, first_seq), false, None)
}

/// As [`idempotent_batch`], in a transaction of the producer.
pub fn transactional_batch(
    values: &[&[u8]],
    producer_id: i64,
    epoch: i16,
    first_seq: i32,
) -> Bytes {
    let timed: Vec<(i64, &[u8])> = values.iter().map(|v| (0, *v)).collect();
    encode_batch(&timed, (producer_id, epoch, first_seq), true, None)
}

/// A v2 record batch, uncompressed, of (timestamp in ms, value) records.
pub fn timed_batch(records: &[(i64, &[u8])]) -> Bytes {
    encode_batch(records, (-1, -1, -1), false, None)
}

/// A v2 record batch holding `values`, uncompressed, each under `key`,
/// from a producer without idempotence.
pub fn keyed_batch(key: &[u8], values: &[&[u8]]) -> Bytes {
    let timed: Vec<(i64, &[u8])> = values.iter().map(|v| (0, *v)).collect();
    encode_batch(&timed, (-1, -1, -1), false, Some(key))
}

/// A batch of `timed` records from `producer` (its id, epoch and first
/// sequence number), in a transaction if `transactional`, each with `key`.
fn encode_batch(
    timed: &[(i64, &[u8])],
    producer: (i64, i16, i32),
    transactional: bool,
    key: Option<&[u8]>,
) -> Bytes {
    let (producer_id, producer_epoch, first_seq) = producer;
    let records: Vec<Record> = timed
        .iter()
        .enumerate()
        .map(|(i, (timestamp, v))| Record {
            transactional,
            control: false,
            partition_leader_epoch: 0,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The crate starts a new batch wherever offset less sequence
            // changes; a producer without idempotence (-1) counts up from
            // -1 too, so that its records stay one batch, as a real
            // client's do (the batch's base sequence is still -1).
            sequence: first_seq.wrapping_add(i as i32),
            timestamp: *timestamp,
            key: key.map(Bytes::copy_from_slice),
            value: Some(Bytes::copy_from_slice(v)),
            headers: Default::default(),
            delete_horizon: false,
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

/// The values and offsets of the records in `records`.
pub fn values(records: &Bytes) -> Vec<(i64, Vec<u8>)> {
    let mut buf = records.clone();
    let mut out = Vec::new();
    for set in RecordBatchDecoder::decode_all(&mut buf).unwrap() {
        for r in set.records {
            out.push((r.offset, r.value.map(|v| v.to_vec()).unwrap_or_default()));
        }
    }
    out
}
