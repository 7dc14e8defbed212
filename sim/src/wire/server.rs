//! Listeners and connections. Each connection reads requests as they come
//! (several may be in flight) and writes the responses back in request
//! order. Kafka also processes one connection's requests in the order they
//! were sent, so pipelined produces are appended, and commits applied, in
//! that order: here each request runs until it first waits (or is answered)
//! before the next frame is read, and only a request that waits, parked in
//! a purgatory, moves to a task of its own. A parked request is a suspended
//! task awaiting its handle: it holds no thread, and the requests behind it
//! go on. (Kafka instead reads nothing more from the connection until the
//! parked one is answered.) A client a quota throttles is read no further
//! until its throttle time is over, as Kafka mutes its channel: a call
//! says so on the connection's `Throttle`, and the wait is the service's
//! (`Service::wait_throttle`). A connection the service does not admit
//! (`Service::admit`: its address past its connection rate) is held for
//! the time it says and closed unread. Over TLS, a connection's first
//! bytes are its handshake (`tls.rs`), and its requests are read once it
//! is done.
//!
//! Two signals end connections. A stop is orderly: nothing more is read,
//! and each connection writes the answers it owes before it closes. A
//! listener's service going down (a crashed broker) is abrupt: the
//! listener closes, so connecting is refused, and each connection is shut
//! at once in both directions; the answers still owed are dropped
//! unwritten. When the service comes back (the broker restarts), the
//! listener binds its address again.

use super::authenticating::{Authenticating, Verdict, SASL_APIS};
use super::frame::{read_frame, FrameError};
use super::service::{
    api_versions, decode_request, encode_response, Answer, BadRequest, Principal, Service, Throttle,
};
use super::tls::Tls;
use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ResponseKind};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

/// Bounds on what one connection may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest request frame accepted (Kafka's `socket.request.max.bytes`).
    pub max_request_bytes: usize,
    /// Requests read ahead of the response being written, per connection;
    /// past that the connection is not read until responses go out, so a
    /// client that stops reading cannot make the broker buffer without end.
    pub in_flight: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_bytes: super::DEFAULT_MAX_REQUEST_BYTES,
            in_flight: 64,
        }
    }
}

/// What the front counted, over every connection of a listener.
#[derive(Debug, Default)]
pub struct WireStats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Request frames read.
    pub requests: AtomicU64,
    /// Responses written.
    pub responses: AtomicU64,
    /// Responses whose connection had gone (the request was still answered
    /// inside; the bytes were dropped).
    pub dropped_responses: AtomicU64,
    /// Connections closed for a bad frame, an unknown API or version, or a
    /// request that does not decode.
    pub refused: AtomicU64,
    /// Requests for an API version that is not implemented.
    pub unsupported_versions: AtomicU64,
    /// SASL authentications refused (a mechanism not served, or an
    /// exchange that failed), each closing its connection.
    pub failed_authentications: AtomicU64,
    /// TLS handshakes that failed or ran out of time (a client that does
    /// not trust the broker's certificate, shows none where one is
    /// required, or does not speak TLS), each closing its connection.
    pub failed_handshakes: AtomicU64,
    /// Clients that authenticated again on their connection, their
    /// session running out (KIP-368).
    pub reauthentications: AtomicU64,
    /// Responses the service built that did not encode (a bug: reported
    /// as a violation by the server).
    pub unencodable: AtomicU64,
}

/// Tells the listeners and connections to stop, when the value turns true.
pub type Stop = watch::Receiver<bool>;

/// A bound listener for one broker.
pub struct Listener {
    /// The socket.
    pub listener: TcpListener,
    /// Where it listens (the port chosen, for port 0).
    pub addr: SocketAddr,
}

impl Listener {
    /// Binds `addr`.
    pub async fn bind(addr: SocketAddr) -> std::io::Result<Listener> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        Ok(Listener { listener, addr })
    }
}

/// A broker's lives: how many times it has crashed or restarted, odd
/// while it is down. A connection belongs to the life it was accepted in,
/// and ends with it: a counter rather than a flag, so that a crash and a
/// restart in quick succession still end it.
pub type Lives = watch::Receiver<u64>;

/// Whether the broker is down in `life`.
fn is_down(life: u64) -> bool {
    life % 2 == 1
}

/// Returns once the broker's life is no longer `life`; never if the
/// sender is gone first.
async fn life_ends(lives: &mut Lives, life: u64) {
    if lives.wait_for(|now| *now != life).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Returns once the broker is up: true, or false if the sender is gone.
async fn comes_up(lives: &mut Lives) -> bool {
    lives.wait_for(|now| !is_down(*now)).await.is_ok()
}

/// Accepts connections until `stop`, then waits for each connection to
/// finish: each writes the responses of the requests it had read (the
/// service answers every parked request on its own shutdown). While the
/// broker is down (`lives`) the listener is closed and its connections
/// are shut at once (see the module docs); when it restarts, the listener
/// binds its address again. With `tls`, each connection begins with a TLS
/// handshake (see [`Tls`]).
pub async fn serve<S: Service>(
    listener: Listener,
    service: Arc<S>,
    limits: Limits,
    tls: Option<Tls>,
    stats: Arc<WireStats>,
    mut stop: Stop,
    mut lives: Lives,
) {
    let addr = listener.addr;
    let mut bound = Some(listener);
    let mut connections = JoinSet::new();
    'lives: loop {
        let life = *lives.borrow_and_update();
        if !is_down(life) {
            let listener = match bound.take() {
                Some(listener) => listener,
                None => match rebind(addr, &mut stop, &mut lives, life).await {
                    Some(listener) => listener,
                    None if *stop.borrow() => break 'lives,
                    None => continue 'lives,
                },
            };
            let mut failing = AcceptFailures::default();
            loop {
                tokio::select! {
                    accepted = listener.listener.accept() => match accepted {
                        Ok((stream, peer)) => {
                            stats.connections.fetch_add(1, Ordering::Relaxed);
                            let hold = service.admit(peer.ip());
                            if hold.is_zero() {
                                let _ = stream.set_nodelay(true);
                                let signals = (stop.clone(), lives.clone(), life);
                                connections.spawn(connection(stream, tls.clone(), Arc::clone(&service), limits, Arc::clone(&stats), signals));
                            } else {
                                // Refused: closed unread once the hold is
                                // over (or at a stop), as Kafka does.
                                let wait = Arc::clone(&service).wait_throttle(hold);
                                let mut stop = stop.clone();
                                connections.spawn(async move {
                                    tokio::select! {
                                        _ = wait => {}
                                        _ = stop.changed() => {}
                                    }
                                    drop(stream);
                                });
                            }
                        }
                        Err(e) => {
                            failing.note(&e, listener.addr);
                            // Out of file descriptors, accept fails at once for as
                            // long as the connection waits in the backlog: without
                            // a pause this loop would spin a core (and log a line
                            // per turn) until one closes.
                            tokio::time::sleep(ACCEPT_PAUSE).await;
                        }
                    },
                    // Reap finished connections as we go, so the set stays small.
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                    _ = stop.changed() => break 'lives,
                    _ = life_ends(&mut lives, life) => break,
                }
            }
            // Down: connecting is refused until the broker restarts.
            drop(listener);
        }
        // Down, until the next life or a stop.
        loop {
            tokio::select! {
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                _ = stop.changed() => break 'lives,
                up = comes_up(&mut lives) => {
                    if up {
                        continue 'lives;
                    }
                    // Nobody can restart it: wait for the stop.
                    let _ = stop.changed().await;
                    break 'lives;
                }
            }
        }
    }
    drop(bound);
    while connections.join_next().await.is_some() {}
}

/// Binds `addr` again for a restarted broker in `life`, retrying while
/// the address is taken (by another process since the crash, or still
/// held by the system); `None` once stopped, or down again first.
async fn rebind(
    addr: SocketAddr,
    stop: &mut Stop,
    lives: &mut Lives,
    life: u64,
) -> Option<Listener> {
    let mut failing = AcceptFailures::default();
    loop {
        match Listener::bind(addr).await {
            Ok(listener) => return Some(listener),
            Err(e) => failing.note(&e, addr),
        }
        tokio::select! {
            _ = tokio::time::sleep(ACCEPT_PAUSE) => {}
            _ = stop.changed() => return None,
            _ = life_ends(lives, life) => return None,
        }
    }
}

/// How long the listener waits after a failed accept.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Failed accepts, logged at most once a second with how many there were.
#[derive(Default)]
struct AcceptFailures {
    last_logged: Option<Instant>,
    since: u64,
}

impl AcceptFailures {
    fn note(&mut self, e: &std::io::Error, addr: SocketAddr) {
        self.since += 1;
        if self
            .last_logged
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(1))
        {
            tracing::warn!(%addr, error = %e, failures = self.since, "accept failed; retrying every 100 ms");
            self.last_logged = Some(Instant::now());
            self.since = 0;
        }
    }
}

/// How long the answer to a failed authentication is held before the
/// connection closes (Kafka's `connection.failed.authentication.delay.ms`
/// default).
const FAILED_AUTHENTICATION_DELAY: Duration = Duration::from_millis(100);

/// A response on its way: `Ok(None)` for a request that gets none, `Err`
/// for one that could not be encoded (the connection is closed, as the
/// client would otherwise wait for it for ever).
type Pending = oneshot::Receiver<Result<Option<Bytes>, String>>;

/// How long a client has to complete its TLS handshake. A Kafka broker
/// lets an idle connection be for `connections.max.idle.ms` (10 minutes);
/// a handshake not done in this time is a client that will not do it.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves one accepted connection: over TLS first if `tls`.
async fn connection<S: Service>(
    stream: TcpStream,
    tls: Option<Tls>,
    service: Arc<S>,
    limits: Limits,
    stats: Arc<WireStats>,
    (mut stop, mut lives, life): (Stop, Lives, u64),
) {
    // For the log line of a refused request: which client, which broker.
    let unknown = SocketAddr::from(([0, 0, 0, 0], 0));
    let ends = Ends {
        peer: stream.peer_addr().unwrap_or(unknown),
        local: stream.local_addr().unwrap_or(unknown),
    };
    let Some(tls) = tls else {
        let (reader, writer) = stream.into_split();
        let shut = |reader: &tokio::net::tcp::OwnedReadHalf| {
            let _ = socket2::SockRef::from(reader.as_ref()).shutdown(std::net::Shutdown::Both);
        };
        let signals = (stop, lives, life);
        return requests(
            reader, writer, shut, None, ends, service, limits, stats, signals,
        )
        .await;
    };
    // The TLS stream's halves cannot reach the socket: a second handle on
    // it shuts it at a crash.
    let socket = match socket2::SockRef::from(&stream).try_clone() {
        Ok(socket) => socket,
        Err(e) => {
            tracing::warn!(peer = %ends.peer, local = %ends.local, error = %e, "connection closed: its socket cannot be shared");
            return;
        }
    };
    let handshake = tokio::select! {
        done = tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)) => done,
        _ = stop.changed() => return,
        _ = life_ends(&mut lives, life) => return,
    };
    let (stream, principal) = match handshake {
        Ok(Ok(done)) => done,
        failed => {
            stats.failed_handshakes.fetch_add(1, Ordering::Relaxed);
            let why = match failed {
                Ok(Err(e)) => e.to_string(),
                _ => format!("not done within {HANDSHAKE_TIMEOUT:?}"),
            };
            tracing::warn!(peer = %ends.peer, local = %ends.local, why, "connection closed: the TLS handshake failed");
            return;
        }
    };
    let (reader, writer) = tokio::io::split(stream);
    let shut = move |_: &_| {
        let _ = socket.shutdown(std::net::Shutdown::Both);
    };
    let signals = (stop, lives, life);
    requests(
        reader, writer, shut, principal, ends, service, limits, stats, signals,
    )
    .await;
}

/// A connection's two ends, for the log lines about it.
#[derive(Clone, Copy)]
struct Ends {
    peer: SocketAddr,
    local: SocketAddr,
}

/// Reads and serves a connection's requests, and writes their responses
/// in order, until the client closes it, a stop, or the end of the
/// broker's life (when `shut` ends it both ways at once). `verified` is
/// the principal of the client's TLS certificate, if it showed one.
#[allow(clippy::too_many_arguments)]
async fn requests<S, R, W>(
    mut reader: R,
    mut writer: W,
    shut: impl FnOnce(&R),
    verified: Option<Principal>,
    Ends { peer, local }: Ends,
    service: Arc<S>,
    limits: Limits,
    stats: Arc<WireStats>,
    (mut stop, mut lives, life): (Stop, Lives, u64),
) where
    S: Service,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (queue, mut responses) = mpsc::channel::<Pending>(limits.in_flight.max(1));
    let write_stats = Arc::clone(&stats);
    let gone = lives.clone();
    let writing = tokio::spawn(async move {
        let mut broken = false;
        while let Some(pending) = responses.recv().await {
            // A handler that died sends nothing: the order cannot be kept,
            // so the connection ends.
            let Ok(response) = pending.await else { break };
            let bytes = match response {
                Ok(Some(bytes)) => bytes,
                Ok(None) => continue,
                Err(e) => {
                    tracing::error!(error = %e, "a response does not encode: closing the connection");
                    write_stats.unencodable.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            };
            // Read at each write, not only when the reader sees it: the
            // service ends the life before it answers what was parked, so
            // none of those answers goes out.
            broken |= *gone.borrow() != life;
            if broken || writer.write_all(&bytes).await.is_err() {
                // Keep draining, so every handler finishes; drop the bytes.
                broken = true;
                write_stats
                    .dropped_responses
                    .fetch_add(1, Ordering::Relaxed);
            } else {
                write_stats.responses.fetch_add(1, Ordering::Relaxed);
            }
        }
        let _ = writer.shutdown().await;
    });
    let mut apis = service.apis();
    // On a SASL listener, nothing but SASL is served until the client has
    // authenticated.
    let mut authenticating = service.credentials().map(|credentials| {
        apis.extend(SASL_APIS);
        Authenticating::new(credentials)
    });
    // Set once an answer is the connection's last (a failed
    // authentication): the loop ends once it is queued.
    let mut last = false;
    // Set by the calls when a quota throttles the client: nothing more is
    // read from it until then.
    let throttle = Throttle::default();
    loop {
        if let Some(time) = throttle.take() {
            let wait = Arc::clone(&service).wait_throttle(time);
            tokio::select! {
                _ = wait => {}
                _ = stop.changed() => break,
                _ = life_ends(&mut lives, life) => break,
            }
        }
        let frame = tokio::select! {
            frame = read_frame(&mut reader, limits.max_request_bytes) => frame,
            _ = stop.changed() => break,
            _ = life_ends(&mut lives, life) => break,
        };
        let frame = match frame {
            Ok(frame) => frame,
            Err(FrameError::Closed) => break,
            Err(e) => {
                stats.refused.fetch_add(1, Ordering::Relaxed);
                match (&e, e.foreign_protocol()) {
                    (_, Some(protocol)) => tracing::warn!(
                        %peer,
                        %local,
                        protocol,
                        "connection closed: the peer speaks another protocol than Kafka's"
                    ),
                    (FrameError::BadSize(size), None) => tracing::warn!(
                        %peer,
                        %local,
                        size,
                        max = limits.max_request_bytes,
                        "connection closed: a request's size is out of bounds"
                    ),
                    _ => tracing::debug!(error = ?e, "connection closed inside a frame"),
                }
                break;
            }
        };
        stats.requests.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let bare = authenticating.as_mut().filter(|a| a.expects_bare_token());
        if let Some(authenticating) = bare {
            match authenticating.bare_token(&frame) {
                Ok(token) => {
                    if authenticating.take_reauthenticated() {
                        stats.reauthentications.fetch_add(1, Ordering::Relaxed);
                    }
                    let mut bytes = Vec::with_capacity(4 + token.len());
                    bytes.extend_from_slice(&(token.len() as u32).to_be_bytes());
                    bytes.extend_from_slice(&token);
                    let _ = tx.send(Ok(Some(Bytes::from(bytes))));
                }
                Err(why) => {
                    stats.failed_authentications.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%peer, %local, "connection closed: {why}");
                    break;
                }
            }
        } else {
            match decode_request(frame, &apis) {
                Ok((header, request)) => {
                    let api = ApiKey::try_from(header.request_api_key).expect("decoded above");
                    let (version, correlation_id) =
                        (header.request_api_version, header.correlation_id);
                    let verdict = match &mut authenticating {
                        Some(a) if api != ApiKey::ApiVersions => a.admit(api, version, &request),
                        _ => Verdict::Serve,
                    };
                    if api == ApiKey::ApiVersions {
                        let body = ResponseKind::ApiVersions(api_versions(
                            &apis,
                            Some(version),
                            service.features(),
                        ));
                        let _ =
                            tx.send(encode_response(api, version, correlation_id, &body).map(Some));
                    } else if let Verdict::Close(why) = verdict {
                        stats.refused.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(%peer, %local, "connection closed: {why}");
                        break;
                    } else if let Verdict::Answer { response, close } = verdict {
                        if authenticating
                            .as_mut()
                            .is_some_and(|a| a.take_reauthenticated())
                        {
                            stats.reauthentications.fetch_add(1, Ordering::Relaxed);
                        }
                        let bytes =
                            encode_response(api, version, correlation_id, &response).map(Some);
                        if close {
                            stats.failed_authentications.fetch_add(1, Ordering::Relaxed);
                            // Held before the connection closes, as Kafka holds
                            // a failed authentication's answer
                            // (`connection.failed.authentication.delay.ms`), to
                            // slow down a client guessing passwords.
                            last = true;
                            tokio::spawn(async move {
                                tokio::time::sleep(FAILED_AUTHENTICATION_DELAY).await;
                                let _ = tx.send(bytes);
                            });
                        } else {
                            let _ = tx.send(bytes);
                        }
                    } else {
                        // A client too old to throttle itself gets its answer
                        // once its throttle time is over (`Answer::hold`).
                        let encode = move |answer: Answer| {
                            let bytes = answer
                                .response
                                .map(|body| encode_response(api, version, correlation_id, &body))
                                .transpose();
                            (bytes, Some(answer.hold).filter(|t| !t.is_zero()))
                        };
                        // Up to its first wait here, in the order sent; a
                        // request that waits is finished on a task of its own
                        // (whose poll replaces this task's waker with its own).
                        let principal = (authenticating.as_ref())
                            .and_then(|a| a.principal())
                            .or(verified.as_ref())
                            .cloned()
                            .unwrap_or_default()
                            .from_host(peer.ip());
                        let call =
                            Arc::clone(&service).call(header, request, principal, throttle.clone());
                        let mut call = Box::pin(call);
                        let polled =
                            std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
                        let service = Arc::clone(&service);
                        match polled {
                            Poll::Ready(answer) => match encode(answer) {
                                (bytes, None) => {
                                    let _ = tx.send(bytes);
                                }
                                (bytes, Some(hold)) => {
                                    tokio::spawn(async move {
                                        service.wait_throttle(hold).await;
                                        let _ = tx.send(bytes);
                                    });
                                }
                            },
                            Poll::Pending => {
                                tokio::spawn(async move {
                                    let (bytes, hold) = encode(call.await);
                                    if let Some(hold) = hold {
                                        service.wait_throttle(hold).await;
                                    }
                                    let _ = tx.send(bytes);
                                });
                            }
                        }
                    }
                }
                Err(BadRequest::UnsupportedVersion {
                    api: ApiKey::ApiVersions,
                    correlation_id,
                    ..
                }) => {
                    // Answered at v0, so that any client can read which
                    // versions there are.
                    stats.unsupported_versions.fetch_add(1, Ordering::Relaxed);
                    let body = ResponseKind::ApiVersions(api_versions(&apis, None, None));
                    let _ = tx.send(
                        encode_response(ApiKey::ApiVersions, 0, correlation_id, &body).map(Some),
                    );
                }
                Err(bad) => {
                    if matches!(bad, BadRequest::UnsupportedVersion { .. }) {
                        stats.unsupported_versions.fetch_add(1, Ordering::Relaxed);
                    }
                    stats.refused.fetch_add(1, Ordering::Relaxed);
                    // As a Kafka broker does, and as loudly: the client only
                    // sees its connection end.
                    tracing::warn!(%peer, %local, "connection closed: {bad}");
                    break;
                }
            }
        }
        // Also while the writer is behind (a full queue): the end of the
        // life does not wait for it. The send first: it is ready at once
        // but for a full queue, and then `lives` is not looked at (a lock
        // and a waiter's registration) for every request.
        let queued = tokio::select! {
            biased;
            queued = queue.send(rx) => queued.is_ok(),
            _ = life_ends(&mut lives, life) => false,
        };
        if !queued || last {
            break;
        }
    }
    if *lives.borrow() != life {
        // Both ways at once, whatever the writer is waiting for: the peer
        // sees the connection end, as with a crashed broker.
        shut(&reader);
    }
    drop(queue);
    let _ = writing.await;
}
