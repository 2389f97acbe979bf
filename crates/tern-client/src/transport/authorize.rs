//! The OAuth step of an HTTP request, one copy for the 2026-07-28 transport
//! and the 2025-11-25 session: the access token each attempt carries, and
//! whether a response is a challenge that runs the flow and sends the
//! request again (401, or 403 `insufficient_scope`; at most
//! `MAX_AUTH_ATTEMPTS` times). Without the `auth` feature no token is sent
//! and every response is final.

use std::fmt::Display;

use http::HeaderMap;

use crate::error::ClientError;

/// How a transport authorizes its requests: not at all, or with an OAuth
/// grant (`auth` feature).
#[derive(Clone, Default)]
pub(crate) struct Authorization {
    #[cfg(feature = "auth")]
    oauth: Option<crate::auth::OAuth>,
}

/// What follows a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// It is the answer (success or not).
    Done,
    /// The flow ran: send the request again, with the new token.
    #[cfg_attr(
        not(feature = "auth"),
        expect(dead_code, reason = "only OAuth sends again")
    )]
    Again,
}

impl Authorization {
    /// Authorizes with `oauth`.
    #[cfg(feature = "auth")]
    pub(crate) fn oauth(oauth: crate::auth::OAuth) -> Self {
        Self { oauth: Some(oauth) }
    }

    /// A grant is configured: requests carry a token and may be sent again.
    pub(crate) fn is_on(&self) -> bool {
        #[cfg(feature = "auth")]
        return self.oauth.is_some();
        #[cfg(not(feature = "auth"))]
        false
    }

    /// The bearer token of the next attempt, if any.
    pub(crate) async fn token(&self) -> Result<Option<String>, ClientError> {
        #[cfg(feature = "auth")]
        if let Some(oauth) = &self.oauth {
            return oauth.access_token().await;
        }
        Ok(None)
    }

    /// After a response (`status`, `headers`) to a request sent to `url`
    /// with `token`: [`Next::Again`] once the flow has run (counted in
    /// `attempts`), an error when the server still refuses after the last
    /// attempt.
    #[cfg_attr(
        not(feature = "auth"),
        expect(unused_variables, reason = "without OAuth every response is final")
    )]
    pub(crate) async fn after(
        &self,
        url: &(dyn Display + Sync),
        attempts: &mut usize,
        token: Option<&str>,
        status: u16,
        headers: &HeaderMap,
    ) -> Result<Next, ClientError> {
        #[cfg(feature = "auth")]
        if let Some(oauth) = &self.oauth {
            use crate::auth::{Challenge, MAX_AUTH_ATTEMPTS, wants_flow};
            let challenge = Challenge::parse(
                headers
                    .get_all(http::header::WWW_AUTHENTICATE)
                    .iter()
                    .filter_map(|v| v.to_str().ok()),
            );
            if !wants_flow(status, challenge.as_ref()) {
                return Ok(Next::Done);
            }
            if *attempts == MAX_AUTH_ATTEMPTS {
                return Err(ClientError::unauthorized(format!(
                    "{url} still refuses the request (HTTP {status}) after {attempts} \
                     authorizations"
                )));
            }
            *attempts += 1;
            oauth.challenged(token, status, challenge.as_ref()).await?;
            return Ok(Next::Again);
        }
        Ok(Next::Done)
    }
}
