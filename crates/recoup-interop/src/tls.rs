//! rustls configurations for the quinn peers: an ALPN token, TLS 1.3, SSLKEYLOGFILE honoured,
//! and (client) no certificate checks, since the servers under test use self-signed certificates.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::error::Error;

/// HTTP/0.9 over QUIC.
pub const ALPN: &[u8] = b"hq-interop";
/// HTTP/3 (RFC 9114 §3.1).
pub const H3_ALPN: &[u8] = b"h3";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_err(e: impl std::fmt::Display) -> Error {
    Error::Tls(e.to_string())
}

/// A quinn client configuration offering `alpn` that accepts any server certificate.
pub fn insecure_client(alpn: &[u8]) -> Result<quinn::ClientConfig, Error> {
    let provider = provider();
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_err)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![alpn.to_vec()];
    tls.key_log = Arc::new(rustls::KeyLogFile::new());
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(tls_err)?;
    Ok(quinn::ClientConfig::new(Arc::new(quic)))
}

/// A quinn server configuration for `alpn` with a fresh self-signed certificate for localhost.
pub fn self_signed_server(alpn: &[u8]) -> Result<quinn::ServerConfig, Error> {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .map_err(tls_err)?;
    let key = PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_err)?
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key.into())
        .map_err(tls_err)?;
    tls.alpn_protocols = vec![alpn.to_vec()];
    tls.max_early_data_size = 0;
    tls.key_log = Arc::new(rustls::KeyLogFile::new());
    let quic = quinn::crypto::rustls::QuicServerConfig::try_from(tls).map_err(tls_err)?;
    Ok(quinn::ServerConfig::with_crypto(Arc::new(quic)))
}

/// Skips the certificate chain and name checks but still checks handshake signatures.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
