//! Who is calling: the authenticated identity a transport attaches to each
//! request. MRTR state is bound to it (rule `state-bound-principal`), as a
//! keyed hash.

use std::fmt;
use std::sync::Arc;

/// The caller's identity, or anonymous.
///
/// Transports set it per request (an HTTP authentication layer, say); the
/// stdio transport and tests use [`Principal::anonymous`]. A `requestState`
/// minted for one principal is refused for another.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Principal(Option<Arc<str>>);

impl Principal {
    /// No authenticated identity.
    pub fn anonymous() -> Self {
        Self(None)
    }

    /// An authenticated identity (a user id, a token subject).
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        Self(Some(id.into()))
    }

    /// The identity, when authenticated.
    pub fn id(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// There is no authenticated identity.
    pub fn is_anonymous(&self) -> bool {
        self.0.is_none()
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(id) => f.debug_tuple("Principal").field(id).finish(),
            None => f.write_str("Principal(anonymous)"),
        }
    }
}
