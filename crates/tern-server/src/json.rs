//! Results serialised once, straight into the response.

use serde::Serialize;
use serde_json::value::RawValue;

/// A serialised result.
pub(crate) type Json = Box<RawValue>;

/// Serialises a result; a value that cannot be encoded (never, for tern's
/// own types) is logged and sent as `null`.
pub(crate) fn to_json<T: Serialize>(value: &T) -> Json {
    serde_json::value::to_raw_value(value).unwrap_or_else(|e| {
        tracing::error!(error = %e, "cannot encode a result");
        RawValue::NULL.to_owned()
    })
}
