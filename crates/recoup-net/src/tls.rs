//! Certificates, keys and TLS configurations for `serve` and `get`.

use std::path::Path;
use std::sync::Arc;

use recoup_transport::ServerVerification;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::KeyLog;

use crate::error::Error;
use crate::hq;
use crate::http3;

/// A certificate chain and its private key.
#[derive(Debug)]
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl Identity {
    /// Loads a PEM certificate chain and a PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Self, Error> {
        let chain = load_certs(cert)?;
        let key = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| Error::Config(format!("private key {}: {e}", key.display())))?;
        Ok(Self { chain, key })
    }

    /// A fresh self-signed certificate for `names` (DNS names or IP addresses).
    pub fn self_signed(names: &[&str]) -> Result<Self, Error> {
        let (chain, key) = recoup_transport::self_signed(names)?;
        Ok(Self { chain, key })
    }

    /// `--cert`/`--key` when both are given, a self-signed certificate for localhost when
    /// neither is; one without the other is a mistake worth reporting.
    pub fn from_options(cert: Option<&Path>, key: Option<&Path>) -> Result<Self, Error> {
        match (cert, key) {
            (Some(cert), Some(key)) => Self::from_pem_files(cert, key),
            (None, None) => Self::self_signed(&["localhost", "127.0.0.1", "::1"]),
            _ => Err(Error::Config("--cert and --key go together".into())),
        }
    }
}

/// Every certificate in a PEM file; an empty file is an error.
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| Error::Config(format!("certificates {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(Error::Config(format!(
            "no certificate in {}",
            path.display()
        )));
    }
    Ok(certs)
}

/// A key log writing to the file `SSLKEYLOGFILE` names, when it is set (Wireshark reads it).
#[must_use]
pub fn key_log_from_env() -> Option<Arc<dyn KeyLog>> {
    std::env::var_os("SSLKEYLOGFILE")
        .map(|_| Arc::new(rustls::KeyLogFile::new()) as Arc<dyn KeyLog>)
}

/// The server's rustls configuration: HTTP/3, hq-interop, cloud gaming
/// ([`crate::gaming::ALPN`]) and MoQ over raw QUIC (every version moq-net accepts,
/// `crate::moq::quic::ALPNS`), whichever the client offers (in that order of preference).
/// MoQ is offered also without `--moq`, so that a MoQ client is told, in the connection's
/// close, that MoQ is off, rather than only that TLS found no protocol in common.
pub fn server_tls(identity: Identity) -> Result<Arc<rustls::ServerConfig>, Error> {
    let mut alpn: Vec<&[u8]> = vec![http3::ALPN, hq::ALPN, crate::gaming::ALPN];
    alpn.extend(crate::moq::quic::ALPNS.iter().map(|a| a.as_bytes()));
    let config =
        recoup_transport::server_config(identity.chain, identity.key, &alpn, key_log_from_env())?;
    Ok(Arc::new(config))
}

/// The client's rustls configuration offering the ALPN tokens `alpn` (see
/// [`crate::Protocol::offer`]): certificates checked against `ca` (PEM trust anchors), or not
/// at all with `insecure`.
pub fn client_tls(
    ca: Option<&Path>,
    insecure: bool,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ClientConfig>, Error> {
    let verify = match (ca, insecure) {
        (_, true) => ServerVerification::Insecure,
        (Some(ca), false) => ServerVerification::Roots(load_certs(ca)?),
        (None, false) => {
            return Err(Error::Config(
                "no trust anchors: pass --ca FILE, or --insecure to skip certificate checks".into(),
            ))
        }
    };
    let config = recoup_transport::client_config(alpn, verify, key_log_from_env())?;
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_files_load_and_build_both_configs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let generated =
            rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("rcgen");
        let cert_path = dir.path().join("cert.pem");
        let key_path = dir.path().join("key.pem");
        std::fs::write(&cert_path, generated.cert.pem()).expect("write");
        std::fs::write(&key_path, generated.key_pair.serialize_pem()).expect("write");
        let loaded = Identity::from_options(Some(&cert_path), Some(&key_path)).expect("load");
        assert_eq!(loaded.chain, vec![generated.cert.der().clone()]);
        assert_eq!(loaded.key.secret_der(), generated.key_pair.serialize_der());
        let server = server_tls(loaded).expect("server tls");
        assert_eq!(
            server.alpn_protocols[..3],
            [
                http3::ALPN.to_vec(),
                hq::ALPN.to_vec(),
                crate::gaming::ALPN.to_vec()
            ]
        );
        // The raw-QUIC MoQ versions follow, moq-lite's newest first.
        assert_eq!(server.alpn_protocols[3], b"moq-lite-06".to_vec());
        assert!(server.alpn_protocols.contains(&b"moql".to_vec()));
        let client = client_tls(Some(&cert_path), false, &[hq::ALPN]).expect("client tls");
        assert_eq!(client.alpn_protocols, vec![hq::ALPN.to_vec()]);
    }

    #[test]
    fn bad_options_are_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").expect("write");
        assert!(load_certs(&empty).is_err());
        assert!(load_certs(&dir.path().join("missing.pem")).is_err());
        assert!(Identity::from_options(Some(&empty), None).is_err());
        assert!(Identity::from_pem_files(&empty, &empty).is_err());
        assert!(client_tls(None, false, &[http3::ALPN]).is_err());
        assert!(client_tls(None, true, &[http3::ALPN]).is_ok());
    }
}
