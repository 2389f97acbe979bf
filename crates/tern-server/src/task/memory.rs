//! [`MemoryTaskStore`]: the embedded default, in this process's memory.

use std::collections::HashMap;
use std::sync::Mutex;

use super::store::{Created, TaskQuota, TaskRecord, TaskStore, TaskStoreError};
use crate::replay::BoxFuture;

#[derive(Debug, Default)]
struct Maps {
    records: HashMap<String, TaskRecord>,
    /// Dedupe key → task id.
    keys: HashMap<String, String>,
}

impl Maps {
    fn sweep(&mut self, now: u64) {
        let expired: Vec<String> = self
            .records
            .values()
            .filter(|r| r.expires_at.is_some_and(|at| at <= now))
            .map(|r| r.task_id.clone())
            .collect();
        for id in expired {
            if let Some(r) = self.records.remove(&id) {
                self.keys.remove(&r.key);
            }
        }
    }
}

/// Task records in this process's memory: the default store. Nothing
/// survives the process (a task's record goes with it); use `tern-sqlite`
/// for tasks that must survive a restart, `tern-redis` for replicas.
#[derive(Debug, Default)]
pub struct MemoryTaskStore {
    maps: Mutex<Maps>,
}

impl MemoryTaskStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn maps(&self) -> std::sync::MutexGuard<'_, Maps> {
        self.maps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn live(r: &TaskRecord, now: u64) -> bool {
    r.expires_at.is_none_or(|at| at > now)
}

impl TaskStore for MemoryTaskStore {
    fn create(
        &self,
        record: TaskRecord,
        quota: TaskQuota,
        now: u64,
    ) -> BoxFuture<'_, Result<Created, TaskStoreError>> {
        let mut maps = self.maps();
        maps.sweep(now);
        let out = if let Some(existing) = maps
            .keys
            .get(&record.key)
            .and_then(|id| maps.records.get(id))
            .filter(|r| live(r, now))
        {
            Created::Existing(Box::new(existing.clone()))
        } else {
            let (count, bytes) = maps
                .records
                .values()
                .filter(|r| r.owner == record.owner && live(r, now))
                .fold((0usize, 0u64), |(n, b), r| {
                    (n + usize::from(!r.status.is_terminal()), b + r.result_bytes)
                });
            if count >= quota.max_live || bytes > quota.max_result_bytes {
                Created::OverQuota
            } else {
                maps.keys.insert(record.key.clone(), record.task_id.clone());
                maps.records.insert(record.task_id.clone(), record);
                Created::New
            }
        };
        Box::pin(std::future::ready(Ok(out)))
    }

    fn load(
        &self,
        task_id: &str,
        now: u64,
    ) -> BoxFuture<'_, Result<Option<TaskRecord>, TaskStoreError>> {
        let found = self
            .maps()
            .records
            .get(task_id)
            .filter(|r| live(r, now))
            .cloned();
        Box::pin(std::future::ready(Ok(found)))
    }

    fn replace(&self, record: TaskRecord) -> BoxFuture<'_, Result<bool, TaskStoreError>> {
        let mut maps = self.maps();
        let swapped = match maps.records.get_mut(&record.task_id) {
            Some(current) if current.version + 1 == record.version => {
                *current = record;
                true
            }
            _ => false,
        };
        Box::pin(std::future::ready(Ok(swapped)))
    }

    fn remove(&self, task_id: &str) -> BoxFuture<'_, Result<(), TaskStoreError>> {
        let mut maps = self.maps();
        if let Some(r) = maps.records.remove(task_id) {
            maps.keys.remove(&r.key);
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn is_durable(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::MemoryTaskStore;

    #[tokio::test]
    async fn the_memory_store_meets_the_task_store_contract() {
        crate::testing::task_store_contract(|| Arc::new(MemoryTaskStore::new())).await;
    }
}
