//! The body stage: a request body read whole, within its size limit, its
//! time (the accept loop's body timeout) and a memory budget, and a *heavy
//! permit* for a large one.
//!
//! | bound | default | past it |
//! |---|---|---|
//! | one body | 4 MiB ([`super::DEFAULT_BODY_LIMIT`]) | `413` (a declared length over it before a byte is read) |
//! | bytes of request bodies held at once, all callers | 128 MiB ([`DEFAULT_BODY_BUDGET`]) | `503` + `Retry-After` |
//! | bytes of request bodies one caller holds at once | 16 MiB ([`DEFAULT_BODY_BUDGET_PER_CALLER`]) | `503` + `Retry-After` (other callers unaffected) |
//! | heavy bodies (over 256 KiB, [`DEFAULT_HEAVY_BODY`]) in flight, all callers | 4 ([`DEFAULT_MAX_HEAVY`]) | `503` + `Retry-After` |
//! | heavy bodies one caller has in flight | 2 ([`DEFAULT_MAX_HEAVY_PER_CALLER`]) | `503` + `Retry-After` |
//!
//! A body of at most 64 KiB ([`FREE_BODY`]) is not counted: the requests in
//! flight bound such bodies already (256 in all, 64 per peer). A larger
//! body's bytes count from the moment they are read (a declared
//! `Content-Length` is counted whole before reading, so a client that parks
//! slow bodies is refused at once rather than after it has sent them) until
//! its response ends: the decoded request holds as much memory while it is
//! served. A heavy body is decoded off the async workers (one large JSON
//! text costs tens of milliseconds of CPU per megabyte), and a few at a
//! time, so one caller's huge bodies cannot starve another's small ones.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::{Body, Bytes};
use http_body_util::BodyExt as _;

/// Default budget of request-body bytes held at once: 128 MiB (32 bodies at
/// the default limit).
pub const DEFAULT_BODY_BUDGET: usize = 128 * 1024 * 1024;
/// Default budget of request-body bytes one caller holds at once: 16 MiB.
pub const DEFAULT_BODY_BUDGET_PER_CALLER: usize = 16 * 1024 * 1024;
/// Default size from which a body is heavy: 256 KiB.
pub const DEFAULT_HEAVY_BODY: usize = 256 * 1024;
/// Default number of heavy bodies in flight at once: 4.
pub const DEFAULT_MAX_HEAVY: usize = 4;
/// Default number of heavy bodies one caller has in flight: 2.
pub const DEFAULT_MAX_HEAVY_PER_CALLER: usize = 2;

/// A weighted budget with a total and a share per caller: what is taken is
/// given back when its [`Taken`] is dropped.
#[derive(Debug)]
pub(crate) struct Budget {
    total: usize,
    per_caller: usize,
    used: Mutex<Used>,
}

#[derive(Debug, Default)]
struct Used {
    total: usize,
    callers: HashMap<Arc<str>, usize>,
}

/// What one request holds of a [`Budget`].
#[derive(Debug)]
pub(crate) struct Taken {
    budget: Arc<Budget>,
    caller: Option<Arc<str>>,
    n: usize,
}

impl Budget {
    pub(crate) fn new(total: usize, per_caller: usize) -> Arc<Self> {
        Arc::new(Self {
            total,
            per_caller: per_caller.min(total),
            used: Mutex::default(),
        })
    }

    /// Nothing yet, for `caller` (`None`: counted in the total only).
    pub(crate) fn empty(self: &Arc<Self>, caller: Option<&str>) -> Taken {
        Taken {
            budget: Arc::clone(self),
            caller: caller.map(Arc::from),
            n: 0,
        }
    }
}

impl Taken {
    /// Takes `n` more; `false`, and nothing taken, when the total or the
    /// caller's share would be exceeded.
    pub(crate) fn grow(&mut self, n: usize) -> bool {
        let budget = &self.budget;
        let mut used = budget.used.lock().unwrap_or_else(PoisonError::into_inner);
        if used.total.saturating_add(n) > budget.total {
            return false;
        }
        if let Some(caller) = &self.caller {
            let mine = used.callers.get(caller).copied().unwrap_or(0);
            if mine.saturating_add(n) > budget.per_caller {
                return false;
            }
            *used.callers.entry(Arc::clone(caller)).or_insert(0) += n;
        }
        used.total += n;
        self.n += n;
        true
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        if self.n == 0 {
            return;
        }
        let mut used = self
            .budget
            .used
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        used.total -= self.n;
        if let Some(caller) = &self.caller
            && let Some(mine) = used.callers.get_mut(caller)
        {
            *mine -= self.n;
            if *mine == 0 {
                used.callers.remove(caller);
            }
        }
    }
}

/// The body stage's limits and budgets, one per endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Bodies {
    pub(crate) limit: usize,
    pub(crate) heavy_from: usize,
    pub(crate) bytes: Arc<Budget>,
    pub(crate) heavy: Arc<Budget>,
}

impl Default for Bodies {
    fn default() -> Self {
        Self {
            limit: super::DEFAULT_BODY_LIMIT,
            heavy_from: DEFAULT_HEAVY_BODY,
            bytes: Budget::new(DEFAULT_BODY_BUDGET, DEFAULT_BODY_BUDGET_PER_CALLER),
            heavy: Budget::new(DEFAULT_MAX_HEAVY, DEFAULT_MAX_HEAVY_PER_CALLER),
        }
    }
}

/// Bodies up to this size (or up to the heavy threshold, when lower) are
/// not counted against the byte budget: the requests in flight bound them
/// already (256 in all, 64 per peer, by 64 KiB: 16 MiB and 4 MiB), and the
/// small requests that make up nearly all traffic skip the budget's lock.
pub(crate) const FREE_BODY: usize = 64 * 1024;

/// A body read whole, and what it holds until its response ends.
pub(crate) struct Read {
    pub(crate) bytes: Bytes,
    pub(crate) held: Held,
}

/// The budget slots a body holds.
#[derive(Debug, Default)]
pub(crate) struct Held {
    #[allow(dead_code, reason = "held for its drop")]
    bytes: Option<Taken>,
    heavy: Option<Taken>,
}

impl Held {
    /// Whether the body is heavy (decoded off the async workers).
    pub(crate) fn is_heavy(&self) -> bool {
        self.heavy.is_some()
    }
}

/// Why a body was not read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Over the size limit: 413.
    TooLarge,
    /// The byte budget or the heavy permits are taken: 503.
    Busy(&'static str),
    /// The body failed (its timeout, a broken connection): 400.
    Broken,
}

impl Bodies {
    /// Reads `body` of a request declaring `declared` bytes; `caller` names
    /// whose share it counts against (asked only for a body past
    /// [`FREE_BODY`]).
    pub(crate) async fn read(
        &self,
        body: Body,
        declared: Option<u64>,
        caller: impl FnOnce() -> Option<String>,
    ) -> Result<Read, Refused> {
        let limit = self.limit;
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(Refused::TooLarge);
        }
        let declared = declared.and_then(|n| usize::try_from(n).ok());
        let free = FREE_BODY.min(self.heavy_from);
        let mut caller = Some(caller);
        let mut key: Option<Option<String>> = None;
        let mut held = Held::default();
        // Charges the body as `total` bytes (never less than it was).
        let mut charge = |held: &mut Held, total: usize| -> Result<(), Refused> {
            if total <= free {
                return Ok(());
            }
            let key = key.get_or_insert_with(|| caller.take().and_then(|c| c()));
            let taken = held
                .bytes
                .get_or_insert_with(|| self.bytes.empty(key.as_deref()));
            let more = total.saturating_sub(taken.n);
            if more > 0 && !taken.grow(more) {
                return Err(Refused::Busy(
                    "too many request bodies in flight; retry later",
                ));
            }
            if total > self.heavy_from && held.heavy.is_none() {
                let mut slot = self.heavy.empty(key.as_deref());
                if !slot.grow(1) {
                    return Err(Refused::Busy(
                        "too many large requests in flight; retry later",
                    ));
                }
                held.heavy = Some(slot);
            }
            Ok(())
        };
        // A declared length counts whole, before a byte is read.
        if let Some(n) = declared {
            charge(&mut held, n)?;
        }
        // One frame (the usual case) is kept as it came, without a copy.
        let mut first: Option<Bytes> = None;
        let mut joined: Vec<u8> = Vec::new();
        let mut len = 0_usize;
        let mut body = body;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return Err(Refused::Broken);
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            len += data.len();
            if len > limit {
                return Err(Refused::TooLarge);
            }
            // An undeclared length (chunked) is counted as it comes.
            charge(&mut held, len.max(declared.unwrap_or(0)))?;
            if first.is_none() && joined.is_empty() {
                first = Some(data);
            } else {
                if let Some(f) = first.take() {
                    joined.reserve(declared.unwrap_or(0).min(limit).max(len));
                    joined.extend_from_slice(&f);
                }
                joined.extend_from_slice(&data);
            }
        }
        Ok(Read {
            bytes: first.unwrap_or_else(|| Bytes::from(joined)),
            held,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_has_a_total_and_a_share_per_caller() {
        let budget = Budget::new(10, 6);
        let mut a = budget.empty(Some("a"));
        assert!(a.grow(6));
        assert!(!a.grow(1), "a's share is full");
        let mut b = budget.empty(Some("b"));
        assert!(b.grow(4));
        assert!(!b.grow(1), "the total is full");
        let mut anonymous = budget.empty(None);
        assert!(!anonymous.grow(1));
        drop(a);
        assert!(b.grow(2), "a's bytes came back");
        assert!(anonymous.grow(4));
        drop((b, anonymous));
        assert_eq!(budget.used.lock().unwrap().total, 0);
        assert!(budget.used.lock().unwrap().callers.is_empty());
    }

    /// A body of `chunks`, one frame each.
    struct Chunks(std::collections::VecDeque<Bytes>);

    impl futures_core::Stream for Chunks {
        type Item = Result<Bytes, std::convert::Infallible>;

        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            std::task::Poll::Ready(self.0.pop_front().map(Ok))
        }
    }

    fn body_of(chunks: &[&'static [u8]]) -> Body {
        Body::from_stream(Chunks(
            chunks.iter().map(|c| Bytes::from_static(c)).collect(),
        ))
    }

    #[tokio::test]
    async fn bodies_are_counted_declared_or_as_they_come() {
        let named = |who: &'static str| move || Some(who.to_owned());
        let a = named("a");
        let bodies = Bodies {
            limit: 8,
            heavy_from: 4,
            bytes: Budget::new(12, 12),
            heavy: Budget::new(1, 1),
        };
        // Declared: counted whole before reading.
        let first = bodies.read(body_of(&[b"12345"]), Some(5), a).await.unwrap();
        assert_eq!(&first.bytes[..], b"12345");
        assert!(first.held.is_heavy());
        // A second heavy body waits for the permit.
        assert_eq!(
            bodies
                .read(body_of(&[b"abcde"]), Some(5), named("a"))
                .await
                .err(),
            Some(Refused::Busy(
                "too many large requests in flight; retry later"
            ))
        );
        // A small chunked one passes; one over the limit is 413.
        let small = bodies
            .read(body_of(&[b"ab", b"c"]), None, named("a"))
            .await
            .unwrap();
        assert!(!small.held.is_heavy());
        assert_eq!(
            bodies
                .read(body_of(&[b"123", b"456789"]), None, named("b"))
                .await
                .err(),
            Some(Refused::TooLarge)
        );
        assert_eq!(
            bodies.read(body_of(&[]), Some(9), || None).await.err(),
            Some(Refused::TooLarge)
        );
        // 5 + 3 held: 5 more pass the total of 12.
        assert_eq!(
            bodies
                .read(body_of(&[b"1", b"2"]), Some(8), named("c"))
                .await
                .err(),
            Some(Refused::Busy(
                "too many request bodies in flight; retry later"
            ))
        );
        drop(first);
        let after = bodies.read(body_of(&[b"12345"]), Some(5), named("c")).await;
        assert!(after.is_ok(), "the first body's bytes and permit came back");
    }
}
