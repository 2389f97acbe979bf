//! HTTPS for every HTTP request the client makes (MCP, and OAuth's
//! discovery and token requests): rustls with its `ring` provider, the
//! Mozilla roots of `webpki-roots`, plus the certificates of an optional
//! CA file (PEM) for private or test CAs. `http://` URLs go out in the clear
//! through the same client.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::error::ClientError;

/// The hyper client every HTTP request of this crate goes through.
pub(crate) type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Which certificate authorities HTTPS trusts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsOptions {
    /// A PEM file of extra CA certificates, trusted beside the built-in
    /// Mozilla roots.
    pub ca_file: Option<PathBuf>,
}

impl TlsOptions {
    /// The built-in roots only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also trusts the CA certificates in the PEM file at `path`.
    #[must_use]
    pub fn with_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn roots(ca_file: Option<&Path>) -> Result<rustls::RootCertStore, ClientError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        let certs = CertificateDer::pem_file_iter(path).map_err(|e| {
            ClientError::transport(format!("cannot read the CA file {}", path.display())).because(e)
        })?;
        let mut added = 0;
        for cert in certs {
            let cert = cert.map_err(|e| {
                ClientError::transport(format!("the CA file {} is not PEM", path.display()))
                    .because(e)
            })?;
            roots.add(cert).map_err(|e| {
                ClientError::transport(format!(
                    "the CA file {} holds a certificate rustls refuses",
                    path.display()
                ))
                .because(e)
            })?;
            added += 1;
        }
        if added == 0 {
            return Err(ClientError::transport(format!(
                "the CA file {} holds no certificate",
                path.display()
            )));
        }
    }
    Ok(roots)
}

fn config(options: &TlsOptions) -> Result<rustls::ClientConfig, ClientError> {
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError::transport("TLS cannot be set up").because(e))?
        .with_root_certificates(roots(options.ca_file.as_deref())?)
        .with_no_client_auth();
    Ok(config)
}

fn build(config: rustls::ClientConfig) -> HttpClient {
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .build();
    Client::builder(TokioExecutor::new()).build(connector)
}

/// A client trusting what `options` says. With the defaults, one client is
/// shared by the whole process (the roots are parsed once, connections
/// pooled).
pub(crate) fn client(options: &TlsOptions) -> Result<HttpClient, ClientError> {
    static DEFAULT: OnceLock<HttpClient> = OnceLock::new();
    if options.ca_file.is_none() {
        if let Some(c) = DEFAULT.get() {
            return Ok(c.clone());
        }
        let c = build(config(options)?);
        return Ok(DEFAULT.get_or_init(|| c).clone());
    }
    Ok(build(config(options)?))
}

/// Checks that `url` is `http://` or `https://`.
pub(crate) fn check_scheme(url: &http::Uri) -> Result<(), ClientError> {
    match url.scheme_str() {
        Some("http" | "https") => Ok(()),
        _ => Err(ClientError::transport(format!(
            "{url}: only http:// and https:// URLs are supported"
        ))),
    }
}
