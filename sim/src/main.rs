//! `broker-sim`: run a scenario, print the report, exit non-zero on a
//! violated invariant (1) or an impossible configuration (2).

use broker_sim::config::{ClockChoice, Config, Fault, TimerChoice};
use broker_sim::limits as l;
use broker_sim::live::{
    GroupConfig, LiveConfig, MigrationPolicy, DEFAULT_SHARE_GROUP_MAX_SIZE, UNLIMITED_GROUP_SIZE,
};
use broker_sim::random_faults::{as_flags, random_faults};
use broker_sim::scenario::{scenario, SCENARIOS};
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::keystore::{Keystore, Password, Truststore};
use broker_sim::wire::principal_rules::PrincipalRules;
use broker_sim::wire::tls::{ClientAuth, Tls, TlsConfig};
use broker_sim::wire::Limits;
use broker_sim::{report, run};
use clap::{Parser, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// jemalloc: under the purgatory's soak (operations allocated on one thread
/// and freed on another, for minutes), glibc's malloc grew the resident
/// size past 5% and mimalloc past 16%, while jemalloc stayed within 2%.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Clone, Copy, ValueEnum)]
enum TimerArg {
    Wheel,
    Delayqueue,
}

#[derive(Clone, Copy, ValueEnum)]
enum ClockArg {
    Sim,
    Real,
}

/// Simulates a Kafka-like cluster on the request purgatory and checks that
/// every request is answered exactly once and correctly.
#[derive(Parser)]
///
/// Exit status: 0 when every check passed, 1 when a check failed, 2 for a
/// configuration that cannot run, 3 when the run hit one of its own limits
/// (too many requests in flight, or a drain past every timeout).
#[command(version, about, allow_negative_numbers = true)]
struct Args {
    /// Scenario to run (see --list-scenarios).
    #[arg(long, default_value = "default")]
    scenario: String,
    /// Describe the scenarios and exit.
    #[arg(long)]
    list_scenarios: bool,
    /// Seed of every random draw: the same seed gives the same report.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Purgatory implementation.
    #[arg(long, value_enum, default_value = "wheel")]
    timer: TimerArg,
    /// Simulated time (deterministic, fast) or real time (threads, timer
    /// thread) [default: sim; --serve runs on real time].
    #[arg(long, value_enum)]
    clock: Option<ClockArg>,
    /// Serve the Kafka wire protocol: one listener per broker, for real
    /// Kafka clients, until SIGINT/SIGTERM or --duration-s.
    #[arg(long)]
    serve: bool,
    /// With --serve: broker 0's address; broker i listens on its port + i
    /// (port 0 picks free ports and prints them).
    #[arg(long, default_value = "127.0.0.1:9092", requires = "serve")]
    listen: std::net::SocketAddr,
    /// With --serve: where clients are told to connect to broker 0, as
    /// HOST or HOST:PORT (Kafka's advertised.listeners); broker i gets
    /// its port + i, or without a port the one it listens on. Needed when
    /// listening on 0.0.0.0, or behind a port mapping. By default the
    /// listen address.
    #[arg(long, value_name = "HOST[:PORT]", requires = "serve")]
    advertise: Option<broker_sim::advertised::Advertised>,
    /// With --serve: a topic to create ahead, as NAME:PARTITIONS (repeatable).
    #[arg(long = "topic", value_name = "NAME:PARTITIONS", value_parser = parse_topic, requires = "serve")]
    topics: Vec<(String, u32)>,
    /// With --serve: a user clients authenticate as, as NAME:PASSWORD
    /// (repeatable). With any, every listener is SASL_PLAINTEXT and serves
    /// nothing before a client authenticates: with PLAIN as one of these
    /// users, or with SCRAM-SHA-256 or SCRAM-SHA-512 as one of them or as
    /// a user an admin client gave a SCRAM credential.
    #[arg(long = "sasl-user", value_name = "NAME:PASSWORD", value_parser = parse_sasl_user, requires = "serve")]
    sasl_users: Vec<(String, String)>,
    /// With --sasl-user: how long a login lasts, in ms (Kafka's
    /// connections.max.reauth.ms): clients authenticate again on their
    /// connection before then (KIP-368), or it is closed at their next
    /// request. 0, the default: for the connection's life [0..=86400000].
    #[arg(long, default_value_t = 0, value_parser = |s: &str| l::SASL_REAUTH_MS.parse_u64(s), requires = "sasl_users")]
    sasl_reauth_ms: u64,
    /// With --serve: the broker's TLS certificate, then the CA
    /// certificates leading to its root, in a PEM file (Kafka's
    /// ssl.keystore.location with ssl.keystore.type=PEM). With it (or
    /// --tls-keystore) every listener is SSL, or SASL_SSL with --sasl-user.
    #[arg(long, value_name = "PEM", group = "tls", requires_all = ["serve", "tls_key"])]
    tls_cert: Option<PathBuf>,
    /// With --tls-cert: the certificate's private key, in a PEM file
    /// (PKCS #8, PKCS #1 or SEC 1; or encrypted PKCS #8 with
    /// --tls-key-password).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// With --tls-key: the password of its encrypted key (Kafka's
    /// ssl.key.password; PKCS #8, "ENCRYPTED PRIVATE KEY", as `openssl
    /// pkcs8 -topk8` writes it).
    #[arg(long, value_name = "PASSWORD", requires = "tls_key")]
    tls_key_password: Option<Password>,
    /// With --serve, instead of --tls-cert and --tls-key: the broker's
    /// key and certificate chain in a PKCS #12 file (Kafka's
    /// ssl.keystore.type=PKCS12, as keytool or `openssl pkcs12 -export`
    /// write it). With it every listener is SSL, or SASL_SSL.
    #[arg(long, value_name = "P12", group = "tls", requires_all = ["serve", "tls_keystore_password"])]
    tls_keystore: Option<PathBuf>,
    /// With --tls-keystore: its password (Kafka's ssl.keystore.password),
    /// which opens its key too.
    #[arg(long, value_name = "PASSWORD", requires = "tls_keystore")]
    tls_keystore_password: Option<Password>,
    /// With --tls-cert or --tls-keystore: whether clients are asked for a
    /// certificate (Kafka's ssl.client.auth): none, requested (a client
    /// that shows none is User:ANONYMOUS) or required. A client's
    /// certificate makes it the principal User:SUBJECT, its subject
    /// written as Kafka writes it (CN=name,OU=unit,O=org), on an SSL
    /// listener.
    #[arg(long, value_name = "AUTH", default_value = "none", value_parser = |s: &str| s.parse::<ClientAuth>(), requires = "tls")]
    tls_client_auth: ClientAuth,
    /// With --tls-client-auth requested or required: the CA certificates
    /// that client certificates must lead to, in a PEM file (Kafka's
    /// ssl.truststore.location with ssl.truststore.type=PEM).
    #[arg(
        long,
        value_name = "PEM",
        requires = "tls",
        conflicts_with = "tls_truststore"
    )]
    tls_client_ca: Option<PathBuf>,
    /// With --tls-client-auth requested or required, instead of
    /// --tls-client-ca: those CA certificates in a PKCS #12 trust store
    /// (Kafka's ssl.truststore.type=PKCS12).
    #[arg(long, value_name = "P12", requires_all = ["tls", "tls_truststore_password"])]
    tls_truststore: Option<PathBuf>,
    /// With --tls-truststore: its password (Kafka's
    /// ssl.truststore.password).
    #[arg(long, value_name = "PASSWORD", requires = "tls_truststore")]
    tls_truststore_password: Option<Password>,
    /// With --tls-cert or --tls-keystore: how a client certificate's subject becomes
    /// its principal's name (Kafka's ssl.principal.mapping.rules): rules
    /// separated by commas, the first that applies naming it. DEFAULT
    /// gives the subject whole; RULE:pattern/replacement/ applies to a
    /// subject the pattern matches whole, replacing it ($1 a group; /L or
    /// /U after it for lower or upper case). A client no rule applies to
    /// is refused.
    #[arg(long, value_name = "RULES", default_value = "DEFAULT", value_parser = |s: &str| s.parse::<PrincipalRules>(), requires = "tls")]
    tls_principal_mapping_rules: PrincipalRules,
    /// With --serve: check every request against ACLs, as Kafka's
    /// standard authorizer does. ACLs are added with CreateAcls (an admin
    /// client, as a super user); what no ACL allows is denied. Without it
    /// every client may do everything and the ACL APIs are refused
    /// SECURITY_DISABLED.
    #[arg(long, requires = "serve")]
    authorizer: bool,
    /// With --authorizer: a principal that may do everything, as Kafka's
    /// `super.users` (`User:NAME`, or NAME; repeatable). On a plaintext
    /// listener every client is `User:ANONYMOUS`.
    #[arg(long = "super-user", value_name = "NAME", value_parser = parse_super_user, requires = "authorizer")]
    super_users: Vec<String>,
    /// With --authorizer: a resource no ACL names is open to everyone
    /// (Kafka's `allow.everyone.if.no.acl.found`).
    #[arg(long, requires = "authorizer")]
    allow_everyone_if_no_acl_found: bool,
    /// With --serve: which conversions the group coordinator makes
    /// between a classic group and a consumer-protocol group that have
    /// members (Kafka's group.consumer.migration.policy): disabled,
    /// upgrade, downgrade or bidirectional.
    #[arg(long, value_name = "POLICY", default_value = "bidirectional", value_parser = |s: &str| s.parse::<MigrationPolicy>(), requires = "serve")]
    group_migration_policy: MigrationPolicy,
    /// With --serve: the most members a classic group takes (Kafka's
    /// group.max.size); a JoinGroup past it is answered
    /// GROUP_MAX_SIZE_REACHED [1..=2147483647].
    #[arg(long, default_value_t = UNLIMITED_GROUP_SIZE, value_parser = |s: &str| l::GROUP_MAX_SIZE.parse_u64(s).map(|n| n as u32), requires = "serve")]
    group_max_size: u32,
    /// With --serve: the most members a consumer-protocol group takes
    /// (Kafka's group.consumer.max.size) [1..=2147483647].
    #[arg(long, default_value_t = UNLIMITED_GROUP_SIZE, value_parser = |s: &str| l::CONSUMER_GROUP_MAX_SIZE.parse_u64(s).map(|n| n as u32), requires = "serve")]
    group_consumer_max_size: u32,
    /// With --serve: the most members a share group takes (Kafka's
    /// group.share.max.size) [1..=1000].
    #[arg(long, default_value_t = DEFAULT_SHARE_GROUP_MAX_SIZE, value_parser = |s: &str| l::SHARE_GROUP_MAX_SIZE.parse_u64(s).map(|n| n as u32), requires = "serve")]
    group_share_max_size: u32,
    /// With --serve: serve the real clients only, without the scenario's
    /// simulated traffic beside them.
    #[arg(long, requires = "serve")]
    no_sim_traffic: bool,
    /// With --serve: do not create topics on first use.
    #[arg(long, requires = "serve")]
    no_auto_create: bool,
    /// With --serve: the largest request frame accepted, in bytes (Kafka's
    /// socket.request.max.bytes) [1024..=1073741824].
    #[arg(long, default_value_t = 104_857_600, value_parser = |s: &str| l::MAX_REQUEST_BYTES.parse_u64(s), requires = "serve")]
    max_request_bytes: u64,
    /// With --serve: the most each partition keeps, in bytes (Kafka's
    /// log.retention.bytes); past it the oldest batches below the high
    /// watermark are deleted. The logs are kept in memory
    /// [1048576..=1099511627776].
    #[arg(long, default_value_t = broker_sim::live::DEFAULT_RETENTION_BYTES, value_parser = |s: &str| l::RETENTION_BYTES.parse_u64(s), requires = "serve")]
    retention_bytes: u64,
    /// With --serve: how long records are kept after their newest
    /// timestamp, in ms, where a topic sets no retention.ms (Kafka's
    /// log.retention.ms); without it, for ever [1000..=31536000000].
    #[arg(long, value_parser = |s: &str| l::RETENTION_MS.parse_u64(s), requires = "serve")]
    retention_ms: Option<u64>,
    /// With --serve: the most all partitions' logs hold together, in
    /// bytes; past it the oldest batches over all partitions (below their
    /// high watermark, of topics that delete) are deleted, down to seven
    /// eighths of it. By default half the memory of the machine or of its
    /// control group [1048576..=1125899906842624].
    #[arg(long, value_parser = |s: &str| l::LOG_MEMORY_BYTES.parse_u64(s), requires = "serve")]
    log_memory_bytes: Option<u64>,
    /// With --serve: how long after a crash the controller fences the
    /// broker, in ms (Kafka's broker.session.timeout.ms, and its default).
    /// Until then it stays in the metadata, leading its partitions and
    /// coordinating its groups, though nothing answers there. 0 fences it
    /// at the crash: a quicker failover than Kafka's, but a broker that
    /// leaves the metadata at once is one some clients handle worse (see
    /// docs/serving.md) [0..=3600000].
    #[arg(long, default_value_t = 9000, value_parser = |s: &str| l::BROKER_SESSION_TIMEOUT_MS.parse_u64(s), requires = "serve")]
    broker_session_timeout_ms: u64,
    /// Print one JSON object instead of the human report.
    #[arg(long)]
    json: bool,
    /// Crash broker BROKER at SECONDS, beside the scenario's faults
    /// (repeatable): its listener and connections close, its partitions
    /// move to in-sync replicas (with --serve, once the controller fences
    /// it: --broker-session-timeout-ms).
    #[arg(long = "crash", value_name = "BROKER@SECONDS", value_parser = parse_fault)]
    crashes: Vec<(u32, Duration)>,
    /// Restart broker BROKER, crashed before, at SECONDS (repeatable): it
    /// catches up, rejoins the ISR and leads its preferred partitions again.
    #[arg(long = "restart", value_name = "BROKER@SECONDS", value_parser = parse_fault)]
    restarts: Vec<(u32, Duration)>,
    /// Crash and restart brokers at random, drawn from SEED: every 0.5-4 s
    /// one crashes or one that is down restarts, from a tenth of the run
    /// to four fifths of it, with at least one broker up; every broker is
    /// back by then. The faults are printed (on stderr) as the --crash and
    /// --restart flags that repeat them. Needs --duration-s with --serve;
    /// not with --crash, --restart or a scenario that crashes brokers.
    #[arg(long, value_name = "SEED", conflicts_with_all = ["crashes", "restarts"])]
    random_faults: Option<u64>,

    /// Seconds of arrivals; what is in flight is drained after
    /// [0.001..=86400].
    #[arg(long, value_parser = |s: &str| l::DURATION_S.parse_f64(s))]
    duration_s: Option<f64>,
    /// Brokers [1..=100].
    #[arg(long, value_parser = |s: &str| l::BROKERS.parse_u32(s))]
    brokers: Option<u32>,
    /// Topic-partitions (with --serve: the partitions of a topic created
    /// on first use, 1 unless given) [1..=100000].
    #[arg(long, value_parser = |s: &str| l::PARTITIONS.parse_u32(s))]
    partitions: Option<u32>,
    /// Replicas per partition, at most the broker count; when not given,
    /// the scenario's, capped to the broker count [1..=100].
    #[arg(long, value_parser = |s: &str| l::REPLICATION_FACTOR.parse_u32(s))]
    replication_factor: Option<u32>,
    /// min.insync.replicas, at most the replication factor; when not
    /// given, the scenario's, capped to the replication factor [1..=100].
    #[arg(long, value_parser = |s: &str| l::MIN_INSYNC.parse_u32(s))]
    min_insync: Option<u32>,
    /// Produce requests per second [0..=1000000].
    #[arg(long, value_parser = |s: &str| l::PRODUCE_RATE.parse_f64(s))]
    produce_rate: Option<f64>,
    /// Share of produces with acks=all [0..=1].
    #[arg(long, value_parser = |s: &str| l::ACKS_ALL_FRACTION.parse_f64(s))]
    acks_all_fraction: Option<f64>,
    /// Partitions per produce request, at most [1..=1000].
    #[arg(long, value_parser = |s: &str| l::PARTITIONS_PER_PRODUCE.parse_u32(s))]
    partitions_per_produce: Option<u32>,
    /// Median batch size in bytes; the 75th percentile is three times it
    /// [1..=1048576].
    #[arg(long, value_parser = |s: &str| l::BATCH_BYTES.parse_f64(s))]
    batch_bytes: Option<f64>,
    /// Produce timeout.ms [1..=3600000].
    #[arg(long, value_parser = |s: &str| l::PRODUCE_TIMEOUT_MS.parse_u64(s))]
    produce_timeout_ms: Option<u64>,
    /// Consumers [0..=10000].
    #[arg(long, value_parser = |s: &str| l::CONSUMERS.parse_u32(s))]
    consumers: Option<u32>,
    /// Consumer fetch.min.bytes [0..=104857600].
    #[arg(long, value_parser = |s: &str| l::FETCH_MIN_BYTES.parse_u64(s))]
    fetch_min_bytes: Option<u64>,
    /// Consumer fetch.max.wait.ms [0..=3600000].
    #[arg(long, value_parser = |s: &str| l::FETCH_MAX_WAIT_MS.parse_u64(s))]
    fetch_max_wait_ms: Option<u64>,
    /// replica.lag.time.max.ms [1..=3600000].
    #[arg(long, value_parser = |s: &str| l::REPLICA_LAG_MAX_MS.parse_u64(s))]
    replica_lag_max_ms: Option<u64>,
    /// Group members [0..=1000000].
    #[arg(long, value_parser = |s: &str| l::MEMBERS.parse_u32(s))]
    members: Option<u32>,
    /// session.timeout.ms [1..=3600000].
    #[arg(long, value_parser = |s: &str| l::SESSION_TIMEOUT_MS.parse_u64(s))]
    session_timeout_ms: Option<u64>,
    /// heartbeat.interval.ms, below the session timeout [1..=3600000].
    #[arg(long, value_parser = |s: &str| l::HEARTBEAT_INTERVAL_MS.parse_u64(s))]
    heartbeat_interval_ms: Option<u64>,
    /// One-way network latency in microseconds [0..=10000000].
    #[arg(long, value_parser = |s: &str| l::LATENCY_US.parse_u64(s))]
    latency_us: Option<u64>,
    /// Each broker's outbound bandwidth in MB/s [0.001..=1000000].
    #[arg(long, value_parser = |s: &str| l::BANDWIDTH_MB.parse_f64(s))]
    bandwidth_mb: Option<f64>,
}

fn config(args: &Args) -> Result<Config, String> {
    let mut cfg = scenario(&args.scenario).ok_or_else(|| {
        let names: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
        format!(
            "unknown scenario '{}'; the scenarios are: {}",
            args.scenario,
            names.join(", ")
        )
    })?;
    cfg.seed = args.seed;
    cfg.timer = match args.timer {
        TimerArg::Wheel => TimerChoice::Wheel,
        TimerArg::Delayqueue => TimerChoice::DelayQueue,
    };
    cfg.clock = match args.clock {
        Some(ClockArg::Sim) if args.serve => {
            return Err(
                "--serve answers real clients on real time: --clock sim cannot be served".into(),
            )
        }
        None if args.serve => ClockChoice::Real,
        None | Some(ClockArg::Sim) => ClockChoice::Sim,
        Some(ClockArg::Real) => ClockChoice::Real,
    };
    if let Some(s) = args.duration_s {
        cfg.duration = Duration::from_secs_f64(s);
    }
    let ms = Duration::from_millis;
    macro_rules! set {
        ($($field:ident <- $arg:expr),* $(,)?) => { $(if let Some(v) = $arg { cfg.$field = v; })* };
    }
    set!(
        brokers <- args.brokers,
        partitions <- args.partitions,
        replication_factor <- args.replication_factor,
        min_insync <- args.min_insync,
        produce_rate <- args.produce_rate,
        acks_all_fraction <- args.acks_all_fraction,
        partitions_per_produce <- args.partitions_per_produce,
        consumers <- args.consumers,
        fetch_min_bytes <- args.fetch_min_bytes,
        members <- args.members,
        produce_timeout <- args.produce_timeout_ms.map(ms),
        fetch_max_wait <- args.fetch_max_wait_ms.map(ms),
        replica_lag_max <- args.replica_lag_max_ms.map(ms),
        session_timeout <- args.session_timeout_ms.map(ms),
        heartbeat_interval <- args.heartbeat_interval_ms.map(ms),
        latency <- args.latency_us.map(Duration::from_micros),
        bandwidth <- args.bandwidth_mb.map(|mb| mb * 1e6),
    );
    // A scenario's replication factor and min.insync.replicas suit its own
    // cluster; on fewer brokers asked for (`--brokers 1`), the ones not
    // given are capped to fit, and only values given are refused.
    if args.replication_factor.is_none() {
        cfg.replication_factor = cfg.replication_factor.min(cfg.brokers);
    }
    if args.min_insync.is_none() {
        cfg.min_insync = cfg.min_insync.min(cfg.replication_factor);
    }
    if let Some(b) = args.batch_bytes {
        cfg.batch_bytes_p50 = b;
        cfg.batch_bytes_p75 = b * 3.0;
    }
    let crashes = args
        .crashes
        .iter()
        .map(|&(broker, at)| Fault::Crash { broker, at });
    let restarts = args
        .restarts
        .iter()
        .map(|&(broker, at)| Fault::Restart { broker, at });
    cfg.faults.extend(crashes.chain(restarts));
    if let Some(seed) = args.random_faults {
        if args.serve && args.duration_s.is_none() {
            return Err("--random-faults needs --duration-s with --serve: the faults are drawn over the run".into());
        }
        if cfg.brokers < 2 {
            return Err("--random-faults needs at least 2 brokers: one always stays up".into());
        }
        let crashes = |f: &Fault| matches!(f, Fault::Crash { .. } | Fault::Restart { .. });
        if cfg.faults.iter().any(crashes) {
            return Err(format!(
                "scenario {} crashes brokers itself: --random-faults goes with a scenario that does not",
                cfg.scenario
            ));
        }
        cfg.faults
            .extend(random_faults(seed, cfg.brokers, cfg.duration));
    }
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

/// `BROKER@SECONDS`.
fn parse_fault(s: &str) -> Result<(u32, Duration), String> {
    let (broker, at) = s
        .split_once('@')
        .ok_or_else(|| format!("'{s}' is not BROKER@SECONDS"))?;
    let broker = l::BROKER_ID
        .parse_u32(broker)
        .map_err(|e| format!("broker '{broker}': {e}"))?;
    let at = l::FAULT_AT_S.parse_f64(at)?;
    Ok((broker, Duration::from_secs_f64(at)))
}

/// A `--super-user`: `User:NAME`, or a bare NAME taken as one.
fn parse_super_user(s: &str) -> Result<String, String> {
    let name = s.strip_prefix("User:").unwrap_or(s);
    if name.is_empty() {
        return Err("the name may not be empty".into());
    }
    Ok(format!("User:{name}"))
}

/// A `--sasl-user`: a name and a password, neither empty; the name split
/// off at the first ':' (a password may hold one).
fn parse_sasl_user(s: &str) -> Result<(String, String), String> {
    let (name, password) = s
        .split_once(':')
        .ok_or_else(|| "not NAME:PASSWORD".to_string())?;
    if name.is_empty() || password.is_empty() {
        return Err("neither the name nor the password may be empty".into());
    }
    // PLAIN's message separates its fields with NUL.
    if s.contains('\0') {
        return Err("a NUL character cannot be sent by PLAIN".into());
    }
    Ok((name.to_string(), password.to_string()))
}

/// A `--topic`: `NAME:PARTITIONS`.
fn parse_topic(s: &str) -> Result<(String, u32), String> {
    let (name, n) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("'{s}' is not NAME:PARTITIONS"))?;
    let n: u32 = n
        .parse()
        .map_err(|_| format!("'{n}' is not a partition count"))?;
    if !(1..=10_000).contains(&n) {
        return Err(format!("{n} partitions: must be from 1 to 10000"));
    }
    if !broker_sim::live::valid_topic_name(name) {
        return Err(format!(
            "'{name}' is not a valid topic name (letters, digits, '.', '_', '-'; at most 249)"
        ));
    }
    Ok((name.to_string(), n))
}

/// `--serve`: the cluster of `cfg` behind the wire protocol.
/// The listeners' TLS as the command line sets it up, if it does.
fn tls_config(args: &Args) -> Option<TlsConfig> {
    let keystore = match (&args.tls_cert, &args.tls_key, &args.tls_keystore) {
        (Some(cert), Some(key), _) => Keystore::Pem {
            certificate_chain: cert.clone(),
            private_key: key.clone(),
            key_password: args.tls_key_password.clone(),
        },
        (_, _, Some(path)) => Keystore::Pkcs12 {
            path: path.clone(),
            // clap asks for the password with the keystore.
            password: args.tls_keystore_password.clone()?,
        },
        _ => return None,
    };
    let truststore = match (&args.tls_client_ca, &args.tls_truststore) {
        (Some(path), _) => Some(Truststore::Pem(path.clone())),
        (_, Some(path)) => Some(Truststore::Pkcs12 {
            path: path.clone(),
            password: args.tls_truststore_password.clone()?,
        }),
        _ => None,
    };
    Some(TlsConfig {
        keystore,
        client_auth: args.tls_client_auth,
        truststore,
        principal_rules: args.tls_principal_mapping_rules.clone(),
    })
}

fn serve(args: &Args, cfg: &Config) -> ExitCode {
    let live = LiveConfig {
        brokers: cfg.brokers,
        // Kafka's num.partitions default is 1; --partitions sets it here.
        partitions: args.partitions.unwrap_or(1),
        replication_factor: cfg.replication_factor,
        min_insync: cfg.min_insync,
        auto_create: !args.no_auto_create,
        follower_latency: vec![
            cfg.latency * 2 + cfg.replica_fetch_wait.min(Duration::from_millis(1)),
        ],
        replica_lag: cfg.replica_lag_max,
        retention_bytes: args.retention_bytes,
        retention_ms: args.retention_ms,
        log_memory: args
            .log_memory_bytes
            .or_else(broker_sim::live::default_log_memory),
        broker_session_timeout: Duration::from_millis(args.broker_session_timeout_ms),
        timer: cfg.timer,
        faults: cfg.faults.clone(),
        sasl_users: args.sasl_users.iter().cloned().collect(),
        sasl_reauth: (args.sasl_reauth_ms > 0).then(|| Duration::from_millis(args.sasl_reauth_ms)),
        authorization: args.authorizer.then(|| broker_sim::live::Authorization {
            super_users: args.super_users.iter().cloned().collect(),
            allow_everyone_if_no_acl_found: args.allow_everyone_if_no_acl_found,
        }),
        groups: GroupConfig {
            migration_policy: args.group_migration_policy,
            classic_max_size: args.group_max_size,
            consumer_max_size: args.group_consumer_max_size,
            share_max_size: args.group_share_max_size,
            ..GroupConfig::default()
        },
        ..LiveConfig::default()
    };
    let tls_config = tls_config(args);
    let tls = match &tls_config {
        Some(config) => match Tls::load(config) {
            Ok(tls) => Some(tls),
            Err(e) => {
                eprintln!("broker-sim: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let opts = ServeOptions {
        listen: args.listen,
        advertise: args.advertise.clone(),
        live,
        topics: args.topics.clone(),
        limits: Limits {
            max_request_bytes: args.max_request_bytes as usize,
            ..Limits::default()
        },
        tls,
    };
    let log_memory = opts.live.log_memory;
    let server = match Server::start(opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("broker-sim: {e}");
            return ExitCode::from(2);
        }
    };
    for (id, addr) in server.addrs().iter().enumerate() {
        match server.advertised().get(id) {
            Some((host, port)) if args.advertise.is_some() => {
                println!("broker {id} listening on {addr}, advertised as {host}:{port}")
            }
            _ => println!("broker {id} listening on {addr}"),
        }
    }
    let tls_said = match args.tls_client_auth {
        ClientAuth::None => String::new(),
        auth => format!("; client certificates {auth}"),
    };
    if !args.sasl_users.is_empty() {
        let users: Vec<&str> = args.sasl_users.iter().map(|(u, _)| u.as_str()).collect();
        println!(
            "listeners: {} (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), users {}{}{}",
            match tls_config {
                Some(_) => "SASL_SSL",
                None => "SASL_PLAINTEXT",
            },
            users.join(", "),
            match args.sasl_reauth_ms {
                0 => String::new(),
                ms => format!("; logins last {ms} ms"),
            },
            tls_said,
        );
    } else if tls_config.is_some() {
        println!("listeners: SSL{tls_said}");
    }
    if args.authorizer {
        println!(
            "authorizer: ACLs checked; super users {}; {}",
            match args.super_users.is_empty() {
                true => "none".to_string(),
                false => args.super_users.join(", "),
            },
            match args.allow_everyone_if_no_acl_found {
                true => "a resource no ACL names is open to everyone",
                false => "what no ACL allows is denied",
            }
        );
    }
    match log_memory {
        Some(bytes) => println!(
            "logs in memory: at most {:.1} MiB over all partitions (--log-memory-bytes)",
            bytes as f64 / (1024.0 * 1024.0)
        ),
        None => println!(
            "logs in memory: no bound over all partitions (the machine's memory is unknown)"
        ),
    }
    let until = args.duration_s.map(|_| cfg.duration);
    println!(
        "scenario {}, timer {}; serving until {}",
        cfg.scenario,
        cfg.timer.name(),
        until.map_or("SIGINT or SIGTERM".to_string(), |d| format!(
            "{:.1} s have passed (or a signal)",
            d.as_secs_f64()
        ))
    );
    // The scenario's simulated clients, on their own cluster model and
    // purgatories, beside the real ones, until the server stops.
    let stop_sim = Arc::new(AtomicBool::new(false));
    let simulated = (!args.no_sim_traffic).then(|| {
        let mut sim_cfg = cfg.clone();
        // Without --duration-s the server runs until a signal; the
        // simulated traffic beside it runs as long, up to the longest run
        // the harness takes (a day), after which the server goes on alone.
        sim_cfg.duration = until.unwrap_or(Duration::from_secs_f64(l::DURATION_S.max));
        let stop = Arc::clone(&stop_sim);
        std::thread::spawn(move || (broker_sim::run_until(&sim_cfg, stop), sim_cfg))
    });
    server.wait(until);
    stop_sim.store(true, Ordering::Release);
    let report = server.stop();
    let mut failed = !report.violations.is_empty();
    if let Some(simulated) = simulated {
        match simulated.join() {
            Ok((Ok(result), sim_cfg)) => {
                println!(
                    "simulated traffic beside the real clients (its own topics and purgatories):"
                );
                print!(
                    "{}",
                    broker_sim::report::human(&sim_cfg, &result.stats, result.wall)
                );
                failed |= result.stats.violations > 0;
            }
            Ok((Err(e), _)) => {
                eprintln!("broker-sim: the simulated traffic did not run: {e}");
                failed = true;
            }
            Err(_) => {
                eprintln!("broker-sim: the simulated traffic stopped on a panic");
                failed = true;
            }
        }
    }
    println!("real clients over the wire:");
    print!("{}", report.human());
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    // Warnings and errors to stderr: a connection closed on a request the
    // front does not serve, a panic caught in a delayed operation's
    // callback. `RUST_LOG` (e.g. `RUST_LOG=debug`) asks for more.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if args.list_scenarios {
        for s in SCENARIOS {
            println!("{:<14} {}", s.name, s.description);
        }
        println!("\nEvery parameter can be overridden with a flag; see --help.");
        return ExitCode::SUCCESS;
    }
    let cfg = match config(&args) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("broker-sim: {e}");
            return ExitCode::from(2);
        }
    };
    if args.random_faults.is_some() {
        let flags = as_flags(&cfg.faults);
        if flags.is_empty() {
            eprintln!("random faults: none (the run is too short for a draw)");
        } else {
            eprintln!("random faults: {flags}");
        }
    }
    if args.serve {
        return serve(&args, &cfg);
    }
    // A real-time run shows its progress from the start; a simulated one
    // only once it has taken a couple of seconds.
    let started = std::time::Instant::now();
    let show_after = match cfg.clock {
        ClockChoice::Real => Duration::ZERO,
        ClockChoice::Sim => Duration::from_secs(2),
    };
    let mut bar: Option<indicatif::ProgressBar> = None;
    let mut on_progress = |elapsed: Duration, total: Duration, stats: &broker_sim::stats::Stats| {
        if started.elapsed() < show_after {
            return;
        }
        let bar = bar.get_or_insert_with(|| progress_bar(total));
        bar.set_position(elapsed.as_millis().min(total.as_millis()) as u64);
        bar.set_message(format!(
            "{:.1} s, {} produces, {} fetches",
            elapsed.as_secs_f64(),
            stats.produce.completed + stats.produce.expired + stats.produce.errored,
            stats.fetch.completed + stats.fetch.expired + stats.fetch.errored
        ));
    };
    let result = run(&cfg, Some(&mut on_progress));
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("broker-sim: {e}");
            return ExitCode::from(2);
        }
    };
    if args.json {
        println!("{}", report::json(&cfg, &result.stats, result.wall));
    } else {
        print!("{}", report::human(&cfg, &result.stats, result.wall));
    }
    ExitCode::from(report::Verdict::of(&result.stats).exit_code())
}

/// A progress line of at most 80 columns over `total` of the run's time.
fn progress_bar(total: Duration) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total.as_millis() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:24} {elapsed_precise} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}
