//! `tasks/get`'s answer written straight from the borrowed record: one task
//! view, no owned `DetailedTask` built first (its strings, questions and
//! result cloned) and no copy of the record out of the store
//! ([`TaskStore::read`](super::store::TaskStore::read)). The members and
//! their order are `GetTaskResult`'s; a test holds the two byte-equal.

use serde::ser::{Serialize, SerializeMap as _, Serializer};
use serde_json::Value;
use tern_protocol::meta::ResultMeta;
use tern_protocol::task::TaskStatus;

use super::{TaskRecord, iso8601};

/// `GetTaskResult` of a record, with an optional `_meta`.
pub(crate) struct GetView<'a> {
    pub(crate) record: &'a TaskRecord,
    pub(crate) meta: Option<&'a ResultMeta>,
}

fn wire_ms(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

impl Serialize for GetView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let r = self.record;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("resultType", "complete")?;
        // `Task`.
        map.serialize_entry("taskId", &r.task_id)?;
        map.serialize_entry("status", &r.status)?;
        if let Some(message) = &r.status_message {
            map.serialize_entry("statusMessage", message)?;
        }
        map.serialize_entry("createdAt", &iso8601(r.created_at))?;
        map.serialize_entry("lastUpdatedAt", &iso8601(r.last_updated_at))?;
        map.serialize_entry("ttlMs", &r.ttl_ms.map(wire_ms))?;
        if let Some(interval) = r.poll_interval_ms {
            map.serialize_entry("pollIntervalMs", &wire_ms(interval))?;
        }
        // What the status calls for (`DetailedTask`).
        if r.status == TaskStatus::InputRequired {
            map.serialize_entry("inputRequests", &r.input_requests)?;
        }
        if let (TaskStatus::Completed, Some(Value::Object(result))) = (r.status, &r.result) {
            map.serialize_entry("result", result)?;
        }
        if let (TaskStatus::Failed, Some(error)) = (r.status, &r.error) {
            map.serialize_entry("error", error)?;
        }
        if let Some(meta) = self.meta {
            map.serialize_entry("_meta", meta)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_protocol::ErrorObject;
    use tern_protocol::mrtr::InputRequest;
    use tern_protocol::task::GetTaskResult;

    use crate::task::wire::detailed;
    use crate::testing::task_record;

    /// Every status, with and without the optional members and `_meta`:
    /// the same bytes as the wire type built from the record.
    #[test]
    fn the_view_is_written_as_get_task_result() {
        let mut records = Vec::new();
        for status in [
            TaskStatus::Working,
            TaskStatus::InputRequired,
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Cancelled,
        ] {
            let mut bare = task_record("0a1b", "k", 1_800_000_000_123);
            bare.status = status;
            bare.ttl_ms = None;
            bare.poll_interval_ms = None;
            records.push(bare);
            let mut full = task_record("0a1b", "k", 1_800_000_000_123);
            full.status = status;
            full.status_message = Some("Step \"2\" of 3".into());
            full.last_updated_at += 4_567;
            full.input_requests.insert(
                "roots".into(),
                InputRequest::Roots(tern_protocol::mrtr::ListRootsRequest::default()),
            );
            full.result = Some(serde_json::json!({"content": [], "isError": false}));
            full.error = Some(ErrorObject::new(-32603, "Internal error"));
            records.push(full);
        }
        // A result that is not an object is not shown.
        let mut odd = task_record("0a1b", "k", 7);
        odd.status = TaskStatus::Completed;
        odd.result = Some(serde_json::json!([1]));
        records.push(odd);

        let mut meta = ResultMeta::default();
        meta.extra
            .insert("io.tern/attempt".into(), serde_json::json!(2));
        for record in &records {
            for meta in [None, Some(&meta)] {
                let ours = serde_json::to_string(&GetView { record, meta }).unwrap();
                let mut wire = GetTaskResult::new(detailed(record));
                wire.meta = meta.cloned();
                assert_eq!(ours, serde_json::to_string(&wire).unwrap(), "{record:?}");
            }
        }
    }
}
