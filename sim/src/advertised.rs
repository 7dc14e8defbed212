//! Where clients are told each served broker is (Kafka's
//! `advertised.listeners`), when not where it listens: on 0.0.0.0, or
//! behind a container's port mapping.

use std::net::SocketAddr;

/// Broker 0's address as clients are told it (Kafka's
/// `advertised.listeners`): broker `i` is advertised at its port + `i`,
/// or, without a port, at the port it listens on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advertised {
    /// A host name or an IP address.
    pub host: String,
    /// Broker 0's port.
    pub port: Option<u16>,
}

impl std::str::FromStr for Advertised {
    type Err = String;

    /// `HOST`, `HOST:PORT`, `[IPV6]` or `[IPV6]:PORT`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (host, port) = match s.strip_prefix('[') {
            Some(rest) => {
                let (host, after) = (rest.split_once(']'))
                    .ok_or_else(|| format!("'{s}': an IPv6 address needs its closing ']'"))?;
                match after {
                    "" => (host, None),
                    _ => match after.strip_prefix(':') {
                        Some(port) => (host, Some(port)),
                        None => return Err(format!("'{s}' is not HOST[:PORT]")),
                    },
                }
            }
            None => match s.rsplit_once(':') {
                Some((host, _)) if host.contains(':') => {
                    return Err(format!("'{s}': write an IPv6 address as [ADDRESS]"))
                }
                Some((host, port)) => (host, Some(port)),
                None => (s, None),
            },
        };
        if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c == '/') {
            return Err(format!("'{s}' is not HOST[:PORT]"));
        }
        if host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_unspecified())
        {
            return Err(format!("'{host}' is not an address clients can connect to"));
        }
        let port = match port {
            Some(p) => Some(
                (p.parse::<u16>().ok().filter(|&p| p != 0))
                    .ok_or_else(|| format!("'{p}' is not a port from 1 to 65535"))?,
            ),
            None => None,
        };
        Ok(Advertised {
            host: host.to_string(),
            port,
        })
    }
}

/// Where each broker listening at `addrs` is advertised: there, or
/// where `advertise` says.
pub(crate) fn endpoints(
    addrs: &[SocketAddr],
    advertise: Option<&Advertised>,
) -> Result<Vec<(String, i32)>, String> {
    (addrs.iter().enumerate())
        .map(|(i, a)| match advertise {
            None => Ok((a.ip().to_string(), i32::from(a.port()))),
            Some(adv) => {
                let port = match adv.port {
                    Some(p) => u16::try_from(u32::from(p) + i as u32)
                        .map_err(|_| format!("broker {i}'s advertised port is above 65535"))?,
                    None => a.port(),
                };
                Ok((adv.host.clone(), i32::from(port)))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_advertised_address_is_a_host_with_or_without_a_port() {
        let parsed = |s: &str| s.parse::<Advertised>();
        let adv = |host: &str, port| Advertised {
            host: host.to_string(),
            port,
        };
        assert_eq!(parsed("kafka.local"), Ok(adv("kafka.local", None)));
        assert_eq!(parsed("10.0.0.7:19092"), Ok(adv("10.0.0.7", Some(19092))));
        assert_eq!(parsed("[::1]:9092"), Ok(adv("::1", Some(9092))));
        assert_eq!(parsed("[fe80::1]"), Ok(adv("fe80::1", None)));
        for bad in [
            "",
            ":9092",
            "host:0",
            "host:70000",
            "::1",
            "[::1",
            "0.0.0.0",
            "a b",
        ] {
            assert!(parsed(bad).is_err(), "{bad}");
        }
        let addrs: Vec<SocketAddr> = ["127.0.0.1:9092", "127.0.0.1:9093"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        assert_eq!(
            endpoints(&addrs, Some(&adv("broker.example", Some(29092)))),
            Ok(vec![
                ("broker.example".to_string(), 29092),
                ("broker.example".to_string(), 29093)
            ])
        );
        assert_eq!(
            endpoints(&addrs, Some(&adv("h", None))).unwrap()[1],
            ("h".to_string(), 9093)
        );
        assert!(endpoints(&addrs, Some(&adv("h", Some(65535)))).is_err());
    }
}
