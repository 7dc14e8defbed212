//! `broker-sim --serve`: the served cluster behind one wire listener per
//! broker, until a signal or a duration; then every parked request is
//! answered, the connections flush, and the checks are reported.

use crate::advertised::{self, Advertised};
use crate::live::{BrokerService, LiveCluster, LiveConfig};
use crate::wire::tls::Tls;
use crate::wire::{self, Limits, Listener, WireStats};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What `--serve` was asked for.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Broker 0's address; broker `i` listens on its port + `i` (port 0:
    /// each picks a free one).
    pub listen: SocketAddr,
    /// Where clients are told to connect, if not where the brokers
    /// listen (Kafka's `advertised.listeners`).
    pub advertise: Option<Advertised>,
    /// The cluster.
    pub live: LiveConfig,
    /// Topics created ahead, with their partition counts.
    pub topics: Vec<(String, u32)>,
    /// Connection limits.
    pub limits: Limits,
    /// TLS on every listener (`SSL`, or `SASL_SSL` with SASL users), or
    /// plaintext.
    pub tls: Option<Tls>,
}

/// A running server.
pub struct Server {
    runtime: Runtime,
    addrs: Vec<SocketAddr>,
    cluster: Arc<LiveCluster>,
    stats: Arc<WireStats>,
    stop: watch::Sender<bool>,
    listeners: Vec<JoinHandle<()>>,
    started: Instant,
}

/// What a server run counted and found.
#[derive(Debug)]
pub struct ServeReport {
    /// Wall time served.
    pub wall: Duration,
    /// (what, count) lines from the front and the cluster.
    pub counts: Vec<(String, u64)>,
    /// Broken invariants, one line each.
    pub violations: Vec<String>,
    /// Whether the connections had flushed their responses in time.
    pub drained: bool,
}

/// How long the stop waits for connections to write what they owe.
const DRAIN: Duration = Duration::from_secs(5);

impl Server {
    /// Starts the cluster and binds its listeners.
    pub fn start(opts: ServeOptions) -> Result<Server, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("wire")
            .build()
            .map_err(|e| format!("cannot start the network runtime: {e}"))?;
        for (name, partitions) in &opts.topics {
            if !crate::live::valid_topic_name(name) {
                return Err(format!("--topic {name}: not a valid topic name"));
            }
            if *partitions == 0 {
                return Err(format!("--topic {name}: needs at least one partition"));
            }
        }
        if opts.listen.ip().is_unspecified() && opts.advertise.is_none() {
            // As Kafka refuses 0.0.0.0 in its advertised listeners: the
            // clients would be told to connect there.
            return Err(format!(
                "--listen {}: clients cannot connect to {}; say where they should \
                 with --advertise HOST[:PORT] (Kafka's advertised.listeners)",
                opts.listen,
                opts.listen.ip()
            ));
        }
        let brokers = opts.live.brokers;
        let listeners: Vec<Listener> = runtime.block_on(async {
            let mut bound = Vec::new();
            for i in 0..brokers {
                let mut addr = opts.listen;
                if addr.port() != 0 {
                    let port = u16::try_from(u32::from(addr.port()) + i)
                        .map_err(|_| format!("broker {i}'s port is above 65535"))?;
                    addr.set_port(port);
                }
                let l = Listener::bind(addr)
                    .await
                    .map_err(|e| format!("cannot listen on {addr} for broker {i}: {e}"))?;
                bound.push(l);
            }
            Ok::<_, String>(bound)
        })?;
        let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.addr).collect();
        let cluster = LiveCluster::start(opts.live.clone());
        cluster.set_endpoints(advertised::endpoints(&addrs, opts.advertise.as_ref())?);
        for (name, partitions) in &opts.topics {
            cluster.create_topic(name, *partitions);
        }
        let stats = Arc::new(WireStats::default());
        let (stop, stopped) = watch::channel(false);
        let listeners = listeners
            .into_iter()
            .enumerate()
            .map(|(id, l)| {
                let service = Arc::new(BrokerService {
                    cluster: Arc::clone(&cluster),
                    id: id as u32,
                });
                runtime.spawn(wire::serve(
                    l,
                    service,
                    opts.limits,
                    opts.tls.clone(),
                    Arc::clone(&stats),
                    stopped.clone(),
                    cluster.brokers[id].lives(),
                ))
            })
            .collect();
        Ok(Server {
            runtime,
            addrs,
            cluster,
            stats,
            stop,
            listeners,
            started: Instant::now(),
        })
    }

    /// Where clients are told each broker is, by id: its host and port.
    pub fn advertised(&self) -> Vec<(String, i32)> {
        self.cluster.endpoints()
    }

    /// Where each broker listens, by id.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The served cluster.
    pub fn cluster(&self) -> &Arc<LiveCluster> {
        &self.cluster
    }

    /// Blocks until SIGINT or SIGTERM, or `duration` if given.
    pub fn wait(&self, duration: Option<Duration>) {
        self.runtime.block_on(async {
            let limit = async {
                match duration {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            #[cfg(unix)]
            let term = async {
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(mut s) => {
                        s.recv().await;
                    }
                    Err(_) => std::future::pending().await,
                }
            };
            #[cfg(not(unix))]
            let term = std::future::pending::<()>();
            tokio::select! {
                _ = limit => {}
                _ = tokio::signal::ctrl_c() => {}
                _ = term => {}
            }
        });
    }

    /// Stops accepting and reading, answers every parked request (Kafka
    /// error codes on the wire), lets the connections write what they owe,
    /// and reports.
    pub fn stop(self) -> ServeReport {
        let _ = self.stop.send(true);
        self.cluster.shutdown();
        let listeners = self.listeners;
        let drained = self.runtime.block_on(async {
            tokio::time::timeout(DRAIN, async {
                for l in listeners {
                    let _ = l.await;
                }
            })
            .await
            .is_ok()
        });
        self.runtime.shutdown_timeout(Duration::from_secs(1));
        let s = &self.stats;
        let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        let mut counts = vec![
            ("connections".to_string(), get(&s.connections)),
            ("wire requests".to_string(), get(&s.requests)),
            ("wire responses".to_string(), get(&s.responses)),
            (
                "responses to closed connections".to_string(),
                get(&s.dropped_responses),
            ),
            ("connections refused a request".to_string(), get(&s.refused)),
            (
                "authentications failed".to_string(),
                get(&s.failed_authentications),
            ),
            ("re-authentications".to_string(), get(&s.reauthentications)),
            (
                "TLS handshakes failed".to_string(),
                get(&s.failed_handshakes),
            ),
        ];
        if let Some(authorizer) = &self.cluster.authorizer {
            let (allowed, denied) = authorizer.decisions();
            counts.push(("ACL checks allowed".to_string(), allowed));
            counts.push(("ACL checks denied".to_string(), denied));
        }
        counts.extend(self.cluster.checks.summary());
        let mut violations = self.cluster.checks.violations(self.cluster.pending());
        if get(&s.unencodable) > 0 {
            violations.push(format!("{} responses did not encode", get(&s.unencodable)));
        }
        if self.cluster.watched() > 0 {
            violations.push(format!(
                "{} watch entries left in the purgatories",
                self.cluster.watched()
            ));
        }
        ServeReport {
            wall: self.started.elapsed(),
            counts,
            violations,
            drained,
        }
    }
}

impl ServeReport {
    /// The count of the first line whose name starts with `what` (the
    /// names as the human report prints them), if there is one.
    pub fn count(&self, what: &str) -> Option<u64> {
        self.counts
            .iter()
            .find(|(name, _)| name.starts_with(what))
            .map(|&(_, n)| n)
    }

    /// The human report.
    pub fn human(&self) -> String {
        let mut out = format!(
            "broker-sim --serve: {:.1} s served\n",
            self.wall.as_secs_f64()
        );
        // The labels' column as wide as the longest.
        let width = self.counts.iter().map(|(what, _)| what.chars().count());
        let width = width.max().unwrap_or(0);
        for (what, n) in &self.counts {
            out += &format!("  {what:<width$} {n:>12}\n");
        }
        if !self.drained {
            out += "  (some connections did not take their responses within 5 s of the stop)\n";
        }
        if self.violations.is_empty() {
            out += "PASS: every parked request answered exactly once, every check held\n";
        } else {
            out += &format!("FAIL ({} checks broken)\n", self.violations.len());
            for v in &self.violations {
                out += &format!("  - {v}\n");
            }
        }
        out
    }
}
