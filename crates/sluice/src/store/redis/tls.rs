//! TLS for `rediss…` URLs: rustls with the ring provider (no OpenSSL), certificates from files.
//!
//! By default the server's certificate must chain to a root of the system's trust store
//! (`rustls-native-certs`) and name the host of the URL. [`TlsOptions::ca_file`] replaces the
//! system roots by the CAs of one PEM file (a private CA); [`TlsOptions::client_cert_file`] and
//! [`TlsOptions::client_key_file`] present a client certificate to servers that require one
//! (`tls-auth-clients yes`). There is no switch to skip verification.

use std::path::PathBuf;

use redis::{ClientTlsConfig, TlsCertificates};

use crate::store::StoreError;

/// Certificate files for `rediss…` URLs (all PEM). Ignored for plain-text URLs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// CAs to trust instead of the system's roots.
    pub ca_file: Option<PathBuf>,
    /// Client certificate chain, for servers that authenticate clients.
    pub client_cert_file: Option<PathBuf>,
    /// The client certificate's private key.
    pub client_key_file: Option<PathBuf>,
}

impl TlsOptions {
    /// Reads the files. `None` when nothing is configured (system roots, no client certificate).
    pub(super) fn certificates(&self) -> Result<Option<TlsCertificates>, StoreError> {
        // Several providers may be compiled in by other crates; pick ring explicitly, once.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let read = |what: &str, path: &PathBuf| {
            std::fs::read(path).map_err(|e| {
                StoreError::permanent(
                    "redis",
                    format!("cannot read the TLS {what} {}: {e}", path.display()),
                )
            })
        };
        let client_tls = match (&self.client_cert_file, &self.client_key_file) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some(ClientTlsConfig {
                client_cert: read("client certificate", cert)?,
                client_key: read("client key", key)?,
            }),
            _ => {
                return Err(StoreError::permanent(
                    "redis",
                    "a TLS client certificate needs both its certificate and its key file",
                ));
            }
        };
        let root_cert = self
            .ca_file
            .as_ref()
            .map(|ca| read("CA file", ca))
            .transpose()?;
        if client_tls.is_none() && root_cert.is_none() {
            return Ok(None);
        }
        Ok(Some(TlsCertificates {
            client_tls,
            root_cert,
        }))
    }
}
