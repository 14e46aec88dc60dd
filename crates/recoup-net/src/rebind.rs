//! NAT rebinding for `recoup link`, as the QUIC interop runner's `rebind` scenario does it
//! (quic-network-simulator `sim/scenarios/rebind`): at `first` after a client's first datagram,
//! then every `every`, the client's traffic leaves the relay from a new source port, and with
//! `addr` also from a new source address. Datagrams the server sends to the old binding are
//! lost, as a NAT drops packets for a mapping it forgot.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use recoup_time::Instant;

use crate::error::Error;

/// When and how a client's binding changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RebindSpec {
    /// The first rebinding, counted from the client's first datagram.
    pub first: Duration,
    /// Later rebindings this far apart (`None`: only one, as the runner's default).
    pub every: Option<Duration>,
    /// Change the source address too, not only the port.
    pub addr: bool,
}

impl RebindSpec {
    /// Checks that the relay can honour the spec towards `upstream`: a new address needs IPv4
    /// loopback, where every 127.0.0.0/8 address is local.
    pub fn check(&self, upstream: SocketAddr) -> Result<(), Error> {
        if self.every.is_some_and(|e| e.is_zero()) {
            return Err(Error::Config("--rebind-every must be above zero".into()));
        }
        if self.addr && !matches!(upstream.ip(), IpAddr::V4(ip) if ip.is_loopback()) {
            return Err(Error::Config(format!(
                "--rebind-addr needs an IPv4 loopback upstream (127.0.0.0/8 gives the relay new \
                 source addresses), not {upstream}"
            )));
        }
        Ok(())
    }

    /// When the rebinding after the one due at `due` is due, if any.
    #[must_use]
    pub fn after(&self, due: Instant) -> Option<Instant> {
        self.every.map(|e| due + e)
    }

    /// Where the `n`-th rebinding (from 1) binds: a fresh port, and with `addr` the address
    /// 127.0.0.2, .3, … (never the one before, never the original 127.0.0.1).
    #[must_use]
    pub fn local(&self, original: IpAddr, n: u64) -> SocketAddr {
        let ip = if self.addr {
            let host = 2 + u8::try_from((n - 1) % 253).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::new(127, 0, 0, host))
        } else {
            original
        };
        SocketAddr::new(ip, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_change_every_time_and_ports_are_fresh() {
        let lo: IpAddr = Ipv4Addr::LOCALHOST.into();
        let spec = RebindSpec {
            first: Duration::from_secs(1),
            every: Some(Duration::from_secs(5)),
            addr: true,
        };
        let addrs: Vec<SocketAddr> = (1..=300).map(|n| spec.local(lo, n)).collect();
        assert!(addrs.windows(2).all(|w| w[0].ip() != w[1].ip()));
        assert!(addrs.iter().all(|a| a.ip() != lo && a.port() == 0));
        let port_only = RebindSpec {
            addr: false,
            ..spec
        };
        assert_eq!(port_only.local(lo, 7), SocketAddr::new(lo, 0));
        let t = Instant::from_nanos(1_000_000_000);
        assert_eq!(spec.after(t), Some(t + Duration::from_secs(5)));
        assert_eq!(
            RebindSpec {
                every: None,
                ..spec
            }
            .after(t),
            None
        );
    }

    #[test]
    fn address_rebinding_needs_ipv4_loopback() {
        let spec = RebindSpec {
            first: Duration::from_secs(1),
            every: None,
            addr: true,
        };
        assert!(spec.check("127.0.0.1:443".parse().expect("addr")).is_ok());
        let e = spec
            .check("[::1]:443".parse().expect("addr"))
            .expect_err("IPv6")
            .to_string();
        assert!(e.contains("[::1]:443"), "{e}");
        let zero = RebindSpec {
            every: Some(Duration::ZERO),
            addr: false,
            ..spec
        };
        assert!(zero.check("10.0.0.1:1".parse().expect("addr")).is_err());
    }
}
