//! The URLs `recoup get` takes: `https://HOST[:PORT]/PATH`.

use std::net::{SocketAddr, ToSocketAddrs};

use crate::error::Error;

/// QUIC's default port for `https` (RFC 9114 §3.1 keeps 443).
const DEFAULT_PORT: u16 = 443;

/// A parsed `https://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    /// Host as written, without IPv6 brackets: used for SNI and certificate checks.
    pub host: String,
    pub port: u16,
    /// Path with query, always starting with `/`.
    pub path: String,
}

impl Url {
    /// Parses `https://host[:port][/path]`.
    pub fn parse(url: &str) -> Result<Self, Error> {
        let bad = |why| Error::Url {
            url: url.to_owned(),
            why,
        };
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| bad("only https:// URLs are served over QUIC"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.contains('@') {
            return Err(bad("user info is not supported"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let end = v6.find(']').ok_or_else(|| bad("unclosed [ in host"))?;
            let port = &v6[end + 1..];
            (&v6[..end], port.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port = match port {
            Some(p) => p.parse::<u16>().map_err(|_| bad("bad port"))?,
            None => DEFAULT_PORT,
        };
        let path = path.split('#').next().unwrap_or("/");
        Ok(Self {
            host: host.to_owned(),
            port,
            path: path.to_owned(),
        })
    }

    /// Parses `urls` for one connection: at least one, all with the host and port of the first
    /// (the scheme is `https` for all, as [`Url::parse`] takes no other).
    pub fn parse_all(urls: &[String]) -> Result<Vec<Self>, Error> {
        let parsed = urls
            .iter()
            .map(|u| Self::parse(u))
            .collect::<Result<Vec<_>, _>>()?;
        let first = parsed.first().ok_or_else(|| Error::Url {
            url: String::new(),
            why: "no URL given",
        })?;
        for (url, text) in parsed.iter().zip(urls).skip(1) {
            if !url.same_origin(first) {
                return Err(Error::Url {
                    url: text.clone(),
                    why: "not on the first URL's host and port (one connection fetches them all)",
                });
            }
        }
        Ok(parsed)
    }

    /// Whether `other` names the same host and port: one connection can fetch both. Host names
    /// are case-insensitive (RFC 3986 §3.2.2).
    #[must_use]
    pub fn same_origin(&self, other: &Self) -> bool {
        self.host.eq_ignore_ascii_case(&other.host) && self.port == other.port
    }

    /// `host:port`, an IPv6 host in brackets: HTTP/3's `:authority`.
    #[must_use]
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The first address the host resolves to.
    pub fn resolve(&self) -> Result<SocketAddr, Error> {
        (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| Error::io(format!("resolving {}", self.host), e))?
            .next()
            .ok_or_else(|| Error::Url {
                url: self.host.clone(),
                why: "host has no address",
            })
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "https://{}{}", self.authority(), self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_ports_and_paths() {
        let u = Url::parse("https://127.0.0.1:4433/files/a.bin").expect("v4");
        assert_eq!(
            u,
            Url {
                host: "127.0.0.1".into(),
                port: 4433,
                path: "/files/a.bin".into()
            }
        );
        let u = Url::parse("https://[::1]:8443/x?y#frag").expect("v6");
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("::1", 8443, "/x?y")
        );
        assert_eq!(u.to_string(), "https://[::1]:8443/x?y");
        let u = Url::parse("https://example.com").expect("bare");
        assert_eq!((u.port, u.path.as_str()), (443, "/"));
        assert_eq!(
            Url::parse("https://127.0.0.1:1/")
                .expect("ok")
                .resolve()
                .expect("addr"),
            "127.0.0.1:1".parse().expect("addr")
        );
    }

    #[test]
    fn several_urls_share_one_origin() {
        let urls = |list: &[&str]| list.iter().map(|&u| u.to_owned()).collect::<Vec<_>>();
        let all = Url::parse_all(&urls(&[
            "https://localhost:4433/a",
            "https://LocalHost:4433/b",
        ]))
        .expect("same origin");
        assert_eq!(all[1].path, "/b");
        for (list, bad) in [
            (&["https://h:1/a", "https://h:2/b"][..], "https://h:2/b"),
            (&["https://h:1/a", "https://g:1/b"][..], "https://g:1/b"),
            (&["https://h:1/a", "http://h:1/b"][..], "http://h:1/b"),
        ] {
            match Url::parse_all(&urls(list)) {
                Err(Error::Url { url, .. }) => assert_eq!(url, bad),
                other => panic!("{list:?}: {other:?}"),
            }
        }
        assert!(Url::parse_all(&[]).is_err());
    }

    #[test]
    fn rejects_bad_urls() {
        for url in [
            "http://a/",
            "https:///x",
            "https://a:99999/",
            "https://a:x/",
            "https://[::1/",
            "https://u@h/",
        ] {
            assert!(Url::parse(url).is_err(), "{url} accepted");
        }
    }
}
