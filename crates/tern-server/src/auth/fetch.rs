//! The resource server's own outgoing requests (JWKS, authorization-server
//! metadata, introspection): rustls with the `ring` provider, the Mozilla
//! roots plus an optional CA file; HTTPS only, except on loopback; bounded in
//! size (1 MiB) and time (10 s). Access tokens are sent nowhere but to an
//! introspection endpoint that was configured (no token passthrough).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{Method, Request};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::Value;

/// The largest document read: 1 MiB.
const MAX_BODY: usize = 1 << 20;
/// How long one fetch may take: 10 s.
const TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) type HttpClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A client trusting the Mozilla roots and the certificates of `ca_file`.
pub(crate) fn client(ca_file: Option<&Path>) -> Result<HttpClient, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("cannot read the CA file {}: {e}", path.display()))?;
        for cert in certs {
            let cert =
                cert.map_err(|e| format!("the CA file {} is not PEM: {e}", path.display()))?;
            roots
                .add(cert)
                .map_err(|e| format!("the CA file {}: {e}", path.display()))?;
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("TLS cannot be set up: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

/// Whether `url` is HTTPS, or HTTP to a loopback host.
pub(crate) fn secure(url: &str) -> bool {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return false;
    };
    match uri.scheme_str() {
        Some("https") => true,
        Some("http") => uri.host().is_some_and(|h| {
            let h = h.trim_start_matches('[').trim_end_matches(']');
            h.eq_ignore_ascii_case("localhost")
                || h.parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }),
        _ => false,
    }
}

/// `GET url` (or `POST` a form with `authorization`): the status and JSON.
pub(crate) async fn json(
    client: &HttpClient,
    url: &str,
    form: Option<(String, Option<String>)>,
) -> Result<(u16, Value), String> {
    if !secure(url) {
        return Err(format!("{url} is not HTTPS (plain HTTP only on loopback)"));
    }
    let mut builder = Request::builder()
        .uri(url)
        .header(ACCEPT, "application/json");
    let body = if let Some((form, auth)) = form {
        builder = builder
            .method(Method::POST)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded");
        if let Some(a) = auth {
            builder = builder.header(AUTHORIZATION, a);
        }
        Bytes::from(form)
    } else {
        builder = builder.method(Method::GET);
        Bytes::new()
    };
    let request = builder.body(Full::new(body)).map_err(|e| e.to_string())?;
    let fetch = async {
        let response = client
            .request(request)
            .await
            .map_err(|e| format!("cannot reach {url}: {e}"))?;
        let status = response.status().as_u16();
        let bytes = Limited::new(response.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| format!("{url}: the body broke off or is over {MAX_BODY} bytes: {e}"))?
            .to_bytes();
        let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok((status, value))
    };
    tokio::time::timeout(TIMEOUT, fetch)
        .await
        .map_err(|_| format!("{url} did not answer within {TIMEOUT:?}"))?
}
