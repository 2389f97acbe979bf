//! The era bridge: a 2026-07-28 client calling a 2025-11-25 upstream.
//!
//! A 2025 upstream asks *live*, during the call (`elicitation/create`,
//! `sampling/createMessage`, `roots/list` on its session), where a 2026
//! client answers only retries. The bridge runs each call to a 2025
//! upstream in a task of its own (the *driver*, which owns the upstream
//! request) and the downstream leg waits for its next step:
//!
//! - the upstream's result (or error) is the leg's;
//! - a live question the downstream request declared the capability for is
//!   *held*: the upstream request stays open, the question is answered to
//!   the client as `input_required` (translated: an `elicitation/create`
//!   becomes an elicitation input request, and so on; a URL elicitation
//!   loses its 2025 `elicitationId`), and the routing sealed into the
//!   `requestState` names the held call (`{"u": upstream, "h": held id,
//!   "k": the key}`). The retry takes the held call, answers the upstream's
//!   pending request with the retry's answer and waits for the next step.
//!   An upstream call is never repeated on a retry: a held call already
//!   resumed, expired or evicted answers `-32602`, never a second send;
//! - a question the downstream request did *not* declare is answered by the
//!   gateway (an elicitation `cancel`, a sampling request an error,
//!   `roots/list` the upstream's configured `roots`), as is a question that
//!   comes outside any call;
//! - a `-32042` (URL elicitation required, 2025-11-25) becomes a URL-mode
//!   `input_required` (`{"u": upstream, "x": 1}`); the retry, every URL
//!   accepted, sends the call again as a new call (the upstream asked for
//!   exactly that), a declined one ends it.
//!
//! A held call lives at most [`BridgeOptions::ttl`] (the state's TTL) and
//! at most [`BridgeOptions::per_principal`] are held per principal (a new
//! one past it evicts that principal's oldest). A held call that ends so
//! has its pending request answered (`cancel` for an elicitation, an error
//! otherwise), the questions queued behind it too, and is cancelled
//! upstream (`notifications/cancelled`): a server must not assume its
//! client retries. On a 2025-11-25 session (the gateway asks its client
//! live) a question left unanswered lets the held call go at once
//! ([`tern_server::relay::Relay::abandon`]). The upstream's `timeout`
//! bounds each stretch of its own work (from the request going out, or an
//! answered question, to its next step), never the wait for the client.
//!
//! Held calls live in the process that holds the upstream request. In
//! fleet mode ([`Handoff`], Redis in the `fleet` module, feature `fleet`) the routing names
//! that replica, and a retry that reaches another one is handed to it
//! (the answers over a Redis channel, the outcome back on a reply channel
//! the forwarding replica subscribed to first: woken, never polled; a
//! retry cancelled there is recalled and the holder drops the call); the
//! forwarding replica relays no notifications of the resumed call.
//! **Without Redis, a 2025 upstream that asks must be served by one gateway
//! replica** (or by replicas behind a load balancer that keeps a client on
//! one replica): a retry reaching a replica that does not hold its call is
//! answered `-32602`, never sent upstream again.
//!
//! `logging/setLevel` goes to a 2025 upstream as the most verbose level any
//! bridged request in flight to it asked for (none in flight: `emergency`,
//! once one had asked), and each downstream request gets the upstream's log
//! messages at its own level or above.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use tern_client::transport::LiveRequest;
use tern_protocol::elicitation::ElicitRequestParams;
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::logging::LoggingLevel;
use tern_protocol::mrtr::{InputKind, InputRequest, InputResponse};
use tern_protocol::{ClientCapabilities, InputRequests, ServerNotification};
use tern_server::Ctx;
use tern_server::relay::{RelayLeg, RelayOutcome, asks_within};
use tokio::sync::{mpsc, oneshot};

pub use crate::upstream::relayable;
use crate::upstream::{Extras, Upstream};

/// The default most held calls per principal: 16.
pub const DEFAULT_PER_PRINCIPAL: usize = 16;

/// Notifications of a held call kept while no downstream leg waits for it
/// (more are dropped).
const NOTES: usize = 256;

/// The routing member naming a held call.
const HELD: &str = "h";
/// The routing member of the held call's input request key.
const KEY: &str = "k";
/// The routing member of a `-32042` round: the retry sends a new call.
const URL_REQUIRED: &str = "x";
/// The routing member naming the replica that holds the call (fleet mode).
const REPLICA: &str = "r";

/// Hands a retry's answers to the gateway replica that holds its call, and
/// brings back its outcome (fleet mode: the `fleet` module, over Redis).
pub trait Handoff: Send + Sync + std::fmt::Debug + 'static {
    /// This replica's id (random per process), named in the routing of the
    /// calls it holds.
    fn replica(&self) -> &str;

    /// Sends `request` (a [`Forwarded`], as JSON) to `replica` and waits
    /// for its answer, at most `wait`: the outcome, as JSON.
    fn forward(
        &self,
        replica: &str,
        request: Value,
        wait: Duration,
    ) -> tern_server::replay::BoxFuture<'static, Result<Value, ErrorObject>>;

    /// Serves the requests forwarded to this replica with `serve`, from now
    /// on.
    fn serve(
        &self,
        serve: Arc<dyn Fn(Value) -> tern_server::replay::BoxFuture<'static, Value> + Send + Sync>,
    );
}

/// A retry forwarded to the replica holding its call.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Forwarded {
    /// The held call's id.
    pub id: String,
    /// The retry's principal (it must be the held call's).
    pub principal: Option<String>,
    /// The retry's capabilities (its next questions are checked against
    /// them).
    pub capabilities: ClientCapabilities,
    /// The retry's round.
    pub round: u32,
    /// The retry's answers.
    pub responses: Option<tern_protocol::InputResponses>,
}

/// The downstream request a bridged call answers now: its context when it
/// is this replica's (notifications go there), its principal,
/// capabilities and round.
struct Downstream {
    ctx: Option<Ctx>,
    principal: Option<String>,
    capabilities: ClientCapabilities,
    round: u32,
}

impl Downstream {
    fn of(leg: &RelayLeg) -> Self {
        Self {
            ctx: Some(leg.ctx.clone()),
            principal: leg.ctx.principal().id().map(str::to_owned),
            capabilities: leg.ctx.client_capabilities().clone(),
            round: leg.round,
        }
    }

    /// An upstream notification, to the downstream request if it is here
    /// (a call resumed for another replica drops them).
    fn tell(&self, n: ServerNotification) {
        if let Some(ctx) = &self.ctx {
            relay_notification(ctx, n);
        }
    }
}

/// A forwarded retry's outcome, as the wire between replicas carries it.
fn outcome_to_json(outcome: Result<RelayOutcome, ErrorObject>) -> Value {
    match outcome {
        Ok(RelayOutcome::Complete(result)) => json!({"complete": result}),
        // Between replicas as a tree (what a tree refuses, a number past
        // `f64` say, is an internal error here rather than a panic).
        Ok(RelayOutcome::Written(result)) => match serde_json::from_str::<Value>(result.get()) {
            Ok(result) => json!({"complete": result}),
            Err(_) => {
                json!({"error": ErrorObject::new(code::INTERNAL_ERROR, "Internal error: the upstream's result cannot be forwarded")})
            }
        },
        Ok(RelayOutcome::InputRequired { requests, routing }) => {
            json!({"inputRequired": {"requests": requests, "routing": routing}})
        }
        Err(e) => json!({"error": e}),
        #[allow(unreachable_patterns, reason = "RelayOutcome may grow")]
        Ok(_) => json!({"error": ErrorObject::new(code::INTERNAL_ERROR, "Internal error")}),
    }
}

fn outcome_from_json(upstream: &str, value: &Value) -> Result<RelayOutcome, ErrorObject> {
    let unreadable = || {
        ErrorObject::new(
            tern_server::error::codes::OUTCOME_UNKNOWN,
            format!(
                "The replica holding the `{upstream}` call answered unreadably; the outcome is unknown"
            ),
        )
    };
    if let Some(result) = value.get("complete") {
        return Ok(RelayOutcome::Complete(result.clone()));
    }
    if let Some(ir) = value.get("inputRequired") {
        let requests: InputRequests =
            serde_json::from_value(ir["requests"].clone()).map_err(|_| unreadable())?;
        return Ok(RelayOutcome::InputRequired {
            requests,
            routing: ir["routing"].clone(),
        });
    }
    match value
        .get("error")
        .cloned()
        .map(serde_json::from_value::<ErrorObject>)
    {
        Some(Ok(e)) => Err(e),
        _ => Err(unreadable()),
    }
}

/// A retry of a call `replica` holds: handed over, its outcome back.
async fn forward(
    handoff: &dyn Handoff,
    upstream: &str,
    replica: &str,
    request: &Forwarded,
    wait: Duration,
) -> Result<RelayOutcome, ErrorObject> {
    let request = serde_json::to_value(request)
        .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string()))?;
    let answer = handoff.forward(replica, request, wait).await?;
    outcome_from_json(upstream, &answer)
}

/// How the bridge holds calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BridgeOptions {
    /// How long a held call waits for its retry: the server's state TTL
    /// ([`tern_server::DEFAULT_STATE_TTL`] by default; set both alike).
    pub ttl: Duration,
    /// Held calls per principal at most (anonymous callers share one
    /// count); a new one past it evicts the oldest.
    pub per_principal: usize,
}

impl Default for BridgeOptions {
    fn default() -> Self {
        Self {
            ttl: tern_server::DEFAULT_STATE_TTL,
            per_principal: DEFAULT_PER_PRINCIPAL,
        }
    }
}

/// One step of a bridged upstream call, from its driver.
enum Step {
    /// A live question.
    Ask(Box<LiveRequest>),
    /// The upstream's answer to the call.
    Done(Result<Value, ErrorObject>),
}

/// The driver's bound on a whole bridged call: insurance only (each
/// stretch of the upstream's work and each wait for the client has its own).
const BACKSTOP: Duration = Duration::from_secs(24 * 3600);

/// Questions of one upstream call queued while it waits for its client;
/// more are answered as undeclared.
const STEPS: usize = 8;

/// A bridged upstream call: the driver's steps and notifications, and the
/// question pending while it is held. Dropped before its end, it answers
/// the pending question and those queued behind it as undeclared and stops
/// the driver (the upstream request is cancelled: `notifications/cancelled`).
struct Call {
    upstream: Arc<Upstream>,
    steps: mpsc::Receiver<Step>,
    notes: mpsc::Receiver<ServerNotification>,
    pending: Option<LiveRequest>,
    /// Stops the driver, handing it the pending question to answer first.
    stop: Option<oneshot::Sender<Option<LiveRequest>>>,
    /// Fires when the request has gone out; `None` once it has.
    sent: Option<oneshot::Receiver<()>>,
}

impl Drop for Call {
    fn drop(&mut self) {
        let pending = self.pending.take();
        if pending.is_some() {
            tracing::info!(upstream = %self.upstream.name(), "a held call ended without its retry; cancelled upstream");
        }
        if let Some(stop) = self.stop.take()
            && let Err(Some(live)) = stop.send(pending)
        {
            self.upstream.answer_undeclared(live);
        }
        // Dropped unanswered, a queued question would answer the server with
        // an error, as if the client had failed: it gets what the pending one
        // got. Closed first, so none is queued after the drain (the driver
        // answers those itself, as past the queue).
        self.steps.close();
        while let Ok(step) = self.steps.try_recv() {
            if let Step::Ask(live) = step {
                self.upstream.answer_undeclared(*live);
            }
        }
    }
}

/// A held call, waiting for its retry.
struct Parked {
    call: Call,
    principal: Option<String>,
    key: String,
    question: InputRequest,
    since: Instant,
}

/// The held calls of one gateway, and the log levels asked of its 2025
/// upstreams.
#[derive(Default)]
struct Inner {
    held: Mutex<HashMap<String, Parked>>,
    levels: Mutex<HashMap<String, Levels>>,
}

/// The levels bridged requests in flight to one upstream asked for, and
/// the level last set.
#[derive(Default)]
struct Levels {
    asked: Vec<LoggingLevel>,
    set: Option<LoggingLevel>,
}

/// The era bridge of one gateway (module docs). Cheap to clone.
#[derive(Clone, Default)]
pub struct Bridge {
    options: BridgeOptions,
    inner: Arc<Inner>,
    handoff: Option<Arc<dyn Handoff>>,
    /// This replica's name in fleet mode, written into the routing of every
    /// call held here, also when a forwarded retry re-parks it (the serving
    /// side has no handoff of its own).
    replica: Option<Arc<str>>,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge")
            .field("options", &self.options)
            .field("handoff", &self.handoff)
            .field("held", &self.held())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The routing of a leg is a bridged round's: it goes to the bridge's `leg`
/// whatever the upstream's era is now.
pub fn is_bridged(routing: Option<&Value>) -> bool {
    routing.is_some_and(|r| r.get(HELD).is_some() || r.get(URL_REQUIRED).is_some())
}

fn gone(upstream: &str) -> ErrorObject {
    ErrorObject::invalid_params(
        "Invalid or expired requestState: the held upstream call is gone (answered already, \
         expired, or over the per-principal cap); it was not repeated",
    )
    .with_data(json!({"upstream": upstream}))
}

fn lost(upstream: &str) -> ErrorObject {
    ErrorObject::new(
        tern_server::error::codes::OUTCOME_UNKNOWN,
        format!("The upstream server `{upstream}` call ended unseen; the outcome is unknown"),
    )
}

/// An upstream's notification to the downstream request: its progress under
/// the client's own token, its logs at the level the request asked for
/// (`Ctx::log` filters). Every relayed request's, bridged or not.
pub(crate) fn relay_notification(ctx: &Ctx, n: ServerNotification) {
    match n {
        ServerNotification::Progress(p) => {
            ctx.progress(p.progress, p.total, p.message.as_deref());
        }
        ServerNotification::LoggingMessage(m) => {
            #[allow(
                deprecated,
                reason = "relaying an upstream's logs where the client asked"
            )]
            ctx.log(m.level, m.logger.as_deref(), m.data);
        }
        _ => {}
    }
}

/// A 2025 live question as a 2026 input request: a URL elicitation without
/// its `elicitationId` (removed in 2026-07-28).
fn translate(request: &InputRequest) -> InputRequest {
    let mut request = request.clone();
    if let InputRequest::Elicitation(e) = &mut request
        && let ElicitRequestParams::Url(url) = &mut e.params
    {
        url.elicitation_id = None;
    }
    request
}

fn kind_name(kind: InputKind) -> &'static str {
    match kind {
        InputKind::Elicitation => "elicitation",
        InputKind::Sampling => "sampling",
        InputKind::Roots => "roots",
    }
}

fn new_id() -> String {
    let mut id = [0u8; 16];
    // The operating system's random source; without it no id is safe.
    getrandom::fill(&mut id).expect("the operating system's random source");
    URL_SAFE_NO_PAD.encode(id)
}

/// What a leg to a 2025 upstream sends.
pub(crate) struct Outbound {
    pub(crate) method: &'static str,
    pub(crate) params: Value,
    pub(crate) header_params: Vec<(String, String)>,
}

impl Bridge {
    /// A bridge holding calls as `options` say.
    pub fn new(options: BridgeOptions) -> Self {
        Self {
            options,
            inner: Arc::default(),
            handoff: None,
            replica: None,
        }
    }

    /// Its options.
    pub fn options(&self) -> BridgeOptions {
        self.options
    }

    /// Hands retries of calls held elsewhere to their replica, and serves
    /// those of the calls held here (fleet mode).
    #[must_use]
    pub fn with_handoff(mut self, handoff: Arc<dyn Handoff>) -> Self {
        let inner = Arc::downgrade(&self.inner);
        let options = self.options;
        let replica: Arc<str> = Arc::from(handoff.replica());
        let serving = Arc::clone(&replica);
        handoff.serve(Arc::new(move |request: Value| {
            let inner = inner.clone();
            let replica = Arc::clone(&serving);
            Box::pin(async move {
                let Some(inner) = inner.upgrade() else {
                    return outcome_to_json(Err(ErrorObject::new(
                        code::INTERNAL_ERROR,
                        "the gateway is shutting down",
                    )));
                };
                let bridge = Bridge {
                    options,
                    inner,
                    handoff: None,
                    replica: Some(replica),
                };
                outcome_to_json(bridge.resume_forwarded(request).await)
            })
        }));
        self.handoff = Some(handoff);
        self.replica = Some(replica);
        self
    }

    /// A retry another replica forwarded: resumed here, where its call is
    /// held (the outcome's routing names this replica again).
    async fn resume_forwarded(&self, request: Value) -> Result<RelayOutcome, ErrorObject> {
        let request: Forwarded = serde_json::from_value(request)
            .map_err(|e| ErrorObject::invalid_params(format!("a forwarded retry: {e}")))?;
        let upstream = {
            let held = lock(&self.inner.held);
            held.get(&request.id).map(|p| Arc::clone(&p.call.upstream))
        };
        let Some(upstream) = upstream else {
            return Err(gone("?"));
        };
        let down = Downstream {
            ctx: None,
            principal: request.principal,
            capabilities: request.capabilities,
            round: request.round,
        };
        self.resume(upstream, &down, &request.id, request.responses.as_ref())
            .await
    }

    /// Calls held now.
    pub fn held(&self) -> usize {
        lock(&self.inner.held).len()
    }

    /// Lets go of every held call (the gateway closing): their questions
    /// answered as undeclared, their requests cancelled upstream.
    pub(crate) fn release_all(&self) {
        let held: Vec<Parked> = lock(&self.inner.held).drain().map(|(_, p)| p).collect();
        drop(held);
    }

    /// Lets go of the call held under `routing`, if this replica holds it:
    /// its live round was left ([`tern_server::relay::Relay::abandon`]).
    /// Dropped, it answers its question as undeclared and is cancelled
    /// upstream.
    pub(crate) fn release(&self, routing: &Value) {
        let Some(id) = routing.get(HELD).and_then(Value::as_str) else {
            return;
        };
        let parked = lock(&self.inner.held).remove(id);
        if parked.is_some() {
            tracing::info!("a held call's live round was left: let go");
        }
        drop(parked);
    }

    /// One leg of a call to the 2025 `upstream`: a first leg starts the
    /// call, a retry resumes the held call its routing names (module docs).
    pub(crate) async fn leg(
        &self,
        upstream: Arc<Upstream>,
        leg: RelayLeg,
        send: Outbound,
    ) -> Result<RelayOutcome, ErrorObject> {
        match leg.routing.as_ref() {
            Some(r) if r.get(HELD).is_some() => {
                let id = r[HELD].as_str().unwrap_or_default().to_owned();
                let down = Downstream::of(&leg);
                let responses = leg.input_responses.clone();
                match (&self.handoff, r.get(REPLICA).and_then(Value::as_str)) {
                    (Some(handoff), Some(replica)) if replica != handoff.replica() => {
                        let request = Forwarded {
                            id,
                            principal: down.principal.clone(),
                            capabilities: down.capabilities.clone(),
                            round: down.round,
                            responses,
                        };
                        let wait = upstream.config().timeout + self.options.ttl;
                        forward(handoff.as_ref(), upstream.name(), replica, &request, wait).await
                    }
                    _ => self.resume(upstream, &down, &id, responses.as_ref()).await,
                }
            }
            Some(r) if r.get(URL_REQUIRED).is_some() => {
                if let Some(declined) = declined_url(&leg) {
                    return Err(declined);
                }
                // Every URL accepted: the call again, as a new call.
                let call = self.start(&upstream, &leg, send).await;
                self.drive(call, &Downstream::of(&leg)).await
            }
            _ => {
                let call = self.start(&upstream, &leg, send).await;
                self.drive(call, &Downstream::of(&leg)).await
            }
        }
    }

    /// Starts the driver of a new upstream call.
    async fn start(&self, upstream: &Arc<Upstream>, leg: &RelayLeg, send: Outbound) -> Call {
        let (step_tx, steps) = mpsc::channel(STEPS);
        let (note_tx, notes) = mpsc::channel(NOTES);
        let (stop, stopped) = oneshot::channel::<Option<LiveRequest>>();
        let (going, gone) = oneshot::channel::<()>();
        let capabilities = leg.ctx.client_capabilities().clone();
        let progress = leg.ctx.meta().progress_token.is_some();
        let level = leg.ctx.meta().log_level;
        let entered = match level {
            Some(level) => Some(self.enter_level(upstream, level).await),
            None => None,
        };
        // Only a backstop: `drive` bounds each stretch of the upstream's work
        // by its timeout and the held TTL each wait for the client, and a
        // call may have as many rounds as its client answers.
        let timeout = BACKSTOP;
        let driven = Arc::clone(upstream);
        tokio::spawn(async move {
            let _level = entered;
            let asks = step_tx.clone();
            let asked = Arc::clone(&driven);
            let on_live = move |live: LiveRequest| {
                // Bounded: a server that floods questions while the call
                // waits for its client has the ones past the queue
                // answered as undeclared, not kept.
                if let Err(
                    mpsc::error::TrySendError::Full(Step::Ask(live))
                    | mpsc::error::TrySendError::Closed(Step::Ask(live)),
                ) = asks.try_send(Step::Ask(Box::new(live)))
                {
                    asked.answer_undeclared(*live);
                }
            };
            let on_note = move |n: ServerNotification| {
                let _ = note_tx.try_send(n);
            };
            let going = Mutex::new(Some(going));
            let on_sent = move || {
                if let Some(tx) = lock(&going).take() {
                    let _ = tx.send(());
                }
            };
            let extras = Extras {
                header_params: send.header_params,
                progress,
                log_level: level,
                // The params carry their own (`send.params`).
                arguments: None,
                on_notification: Some(&on_note),
                on_live: Some(&on_live),
                timeout: Some(timeout),
                on_sent: Some(&on_sent),
            };
            // Stopped first, in this task: the pending question answered,
            // then the request dropped (`notifications/cancelled`) before
            // the upstream's answer to it can end the call.
            tokio::select! {
                biased;
                stop = stopped => {
                    if let Ok(Some(live)) = stop {
                        driven.answer_undeclared(live);
                    }
                }
                answer = driven.relay(send.method, send.params, &capabilities, extras) => {
                    let _ = step_tx.send(Step::Done(answer)).await;
                }
            }
        });
        Call {
            upstream: Arc::clone(upstream),
            steps,
            notes,
            pending: None,
            stop: Some(stop),
            sent: Some(gone),
        }
    }

    /// Waits for the call's next step: its end, or a question to hold.
    ///
    /// The upstream's `timeout` bounds each stretch of its own work (from
    /// the request going out, or from the answer to its question, to its
    /// next step); the time a question waits for its client is bounded by
    /// the held TTL instead, and a wait for a place under the concurrency
    /// cap by the relay. Past it the call ends "outcome unknown" and is
    /// cancelled upstream.
    async fn drive(&self, mut call: Call, leg: &Downstream) -> Result<RelayOutcome, ErrorObject> {
        let timeout = call.upstream.config().timeout;
        let mut deadline = call
            .sent
            .is_none()
            .then(|| tokio::time::Instant::now() + timeout);
        loop {
            tokio::select! {
                biased;
                Some(n) = call.notes.recv() => leg.tell(n),
                went = async {
                    match call.sent.as_mut() {
                        Some(sent) => sent.await,
                        None => std::future::pending().await,
                    }
                }, if call.sent.is_some() => {
                    call.sent = None;
                    if went.is_ok() {
                        deadline = Some(tokio::time::Instant::now() + timeout);
                    }
                }
                step = call.steps.recv() => match step {
                    None => return Err(lost(call.upstream.name())),
                    Some(Step::Done(answer)) => {
                        // Notifications sent before the result come first.
                        while let Ok(n) = call.notes.try_recv() {
                            leg.tell(n);
                        }
                        return done(call.upstream.name(), answer);
                    }
                    Some(Step::Ask(live)) => {
                        if !asks_within(live.request(), &leg.capabilities) {
                            tracing::info!(upstream = %call.upstream.name(), "a live question the request did not declare, answered by the gateway");
                            call.upstream.answer_undeclared(*live);
                            continue;
                        }
                        let question = translate(live.request());
                        let key = format!("{}_{}", kind_name(question.kind()), leg.round);
                        call.pending = Some(*live);
                        return Ok(self.park(call, leg, key, question));
                    }
                },
                () = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                    tracing::info!(upstream = %call.upstream.name(), "a bridged call past its timeout; cancelled upstream");
                    return Err(call.upstream.timed_out(timeout));
                }
            }
        }
    }

    /// Holds `call` (its question pending) until its retry, its TTL, or
    /// its principal's cap.
    fn park(
        &self,
        call: Call,
        leg: &Downstream,
        key: String,
        question: InputRequest,
    ) -> RelayOutcome {
        let name = call.upstream.name().to_owned();
        let principal = leg.principal.clone();
        let id = new_id();
        let evicted = {
            let mut held = lock(&self.inner.held);
            let mut evicted = Vec::new();
            loop {
                let mine: Vec<(&String, &Parked)> = held
                    .iter()
                    .filter(|(_, p)| p.principal == principal)
                    .collect();
                if mine.len() < self.options.per_principal.max(1) {
                    break;
                }
                let Some(oldest) = mine
                    .iter()
                    .min_by_key(|(_, p)| p.since)
                    .map(|(k, _)| (*k).clone())
                else {
                    break;
                };
                evicted.extend(held.remove(&oldest));
            }
            held.insert(
                id.clone(),
                Parked {
                    call,
                    principal,
                    key: key.clone(),
                    question: question.clone(),
                    since: Instant::now(),
                },
            );
            evicted
        };
        if !evicted.is_empty() {
            tracing::info!(upstream = %name, "over the held calls cap: the oldest cancelled");
        }
        drop(evicted);
        let inner = Arc::downgrade(&self.inner);
        let ttl = self.options.ttl;
        let expiring = id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(ttl).await;
            expire(&inner, &expiring);
        });
        let mut routing = json!({"u": name, HELD: id, KEY: &key});
        let mut requests = InputRequests::new();
        requests.insert(key, question);
        if let Some(replica) = &self.replica {
            routing[REPLICA] = json!(&**replica);
        }
        RelayOutcome::InputRequired { requests, routing }
    }

    /// A retry of a held call: its pending question answered with the
    /// retry's answer, then its next step.
    async fn resume(
        &self,
        upstream: Arc<Upstream>,
        leg: &Downstream,
        id: &str,
        responses: Option<&tern_protocol::InputResponses>,
    ) -> Result<RelayOutcome, ErrorObject> {
        let principal = leg.principal.clone();
        // Read and checked in place, under the lock: a bad answer leaves
        // the call held as it was (its TTL timer still armed), and only an
        // answer that decodes, or none, takes it.
        let (mut parked, answer) = {
            let mut held = lock(&self.inner.held);
            let Some(p) = held.get(id).filter(|p| p.principal == principal) else {
                return Err(gone(upstream.name()));
            };
            let answer = match responses.and_then(|r| r.raw(&p.key)) {
                None => None,
                Some(raw) => match InputResponse::decode_as(p.question.kind(), raw) {
                    Ok(answer) => Some(answer),
                    Err(e) => {
                        let message = format!("inputResponses.{}: {e}", p.key);
                        return Err(ErrorObject::invalid_params(message));
                    }
                },
            };
            let Some(parked) = held.remove(id) else {
                return Err(gone(upstream.name()));
            };
            (parked, answer)
        };
        let Some(answer) = answer else {
            // No answer: the same question again (the call stays held).
            let Parked {
                call,
                key,
                question,
                ..
            } = parked;
            return Ok(self.park(call, leg, key, question));
        };
        if let Some(live) = parked.call.pending.take() {
            live.respond(Ok(answer));
        }
        let Parked { call, .. } = parked;
        self.drive(call, leg).await
    }

    /// Counts `level` as asked of `upstream` while the guard lives, and sets
    /// the upstream's level to the most verbose asked.
    async fn enter_level(&self, upstream: &Arc<Upstream>, level: LoggingLevel) -> LevelGuard {
        let next = {
            let mut levels = lock(&self.inner.levels);
            let l = levels.entry(upstream.name().to_owned()).or_default();
            l.asked.push(level);
            l.change()
        };
        if let Some(next) = next {
            set_level(upstream, next).await;
        }
        LevelGuard {
            inner: Arc::downgrade(&self.inner),
            upstream: Arc::clone(upstream),
            level,
        }
    }
}

impl Levels {
    /// The level to set now, if it is not the one set.
    fn change(&mut self) -> Option<LoggingLevel> {
        let want = match self.asked.iter().min() {
            Some(l) => *l,
            None if self.set.is_some() => LoggingLevel::Emergency,
            None => return None,
        };
        (self.set != Some(want)).then(|| {
            self.set = Some(want);
            want
        })
    }
}

/// A bridged request's log level, counted while it is in flight.
struct LevelGuard {
    inner: Weak<Inner>,
    upstream: Arc<Upstream>,
    level: LoggingLevel,
}

impl Drop for LevelGuard {
    fn drop(&mut self) {
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        let next = {
            let mut levels = lock(&inner.levels);
            let l = levels.entry(self.upstream.name().to_owned()).or_default();
            if let Some(i) = l.asked.iter().position(|a| *a == self.level) {
                l.asked.swap_remove(i);
            }
            l.change()
        };
        if let Some(next) = next {
            let upstream = Arc::clone(&self.upstream);
            tokio::spawn(async move { set_level(&upstream, next).await });
        }
    }
}

async fn set_level(upstream: &Upstream, level: LoggingLevel) {
    let none = ClientCapabilities::default();
    if let Err(e) = upstream
        .request(
            tern_protocol::legacy::SET_LEVEL,
            json!({"level": level}),
            &none,
        )
        .await
    {
        tracing::info!(upstream = %upstream.name(), error = %e.message, "logging/setLevel refused");
    }
}

/// A held call's TTL: gone, its pending question answered, cancelled
/// upstream.
fn expire(inner: &Weak<Inner>, id: &str) {
    let Some(inner) = inner.upgrade() else {
        return;
    };
    let parked = lock(&inner.held).remove(id);
    if parked.is_some() {
        tracing::info!("a held call outlived its TTL");
    }
    drop(parked);
}

/// The call's end: its result, or its error — a `-32042` becoming a URL
/// `input_required`.
fn done(upstream: &str, answer: Result<Value, ErrorObject>) -> Result<RelayOutcome, ErrorObject> {
    match answer {
        Ok(result) => Ok(RelayOutcome::Complete(result)),
        Err(e) if e.code == code::LEGACY_URL_ELICITATION_REQUIRED => {
            let requests = url_requests(&e).ok_or_else(|| {
                ErrorObject::new(
                    code::INTERNAL_ERROR,
                    format!("The upstream server `{upstream}` required a URL elicitation the gateway cannot read"),
                )
            })?;
            Ok(RelayOutcome::InputRequired {
                requests,
                routing: json!({"u": upstream, URL_REQUIRED: 1}),
            })
        }
        Err(e) => Err(e),
    }
}

/// The URL elicitations of a `-32042`'s `data.elicitations`, keyed `url_1`,
/// `url_2`, … (none readable: `None`).
fn url_requests(e: &ErrorObject) -> Option<InputRequests> {
    let list = e.data.as_ref()?.get("elicitations")?.as_array()?;
    let mut requests = InputRequests::new();
    for (i, item) in list.iter().enumerate() {
        let mut item = item.clone();
        if let Some(o) = item.as_object_mut() {
            o.entry("mode").or_insert_with(|| json!("url"));
        }
        let params: ElicitRequestParams = serde_json::from_value(item).ok()?;
        if !matches!(params, ElicitRequestParams::Url(_)) {
            return None;
        }
        requests.insert(
            format!("url_{}", i + 1),
            translate(&InputRequest::elicit(params)),
        );
    }
    (!requests.is_empty()).then_some(requests)
}

/// A `-32042` round's retry that did not accept every URL: the error that
/// ends the call (`None`: every one accepted).
fn declined_url(leg: &RelayLeg) -> Option<ErrorObject> {
    let responses = leg.input_responses.as_ref();
    let accepted = responses.is_some_and(|r| {
        let mut any = false;
        let all = r.keys().all(|k| {
            any = true;
            r.raw(k).and_then(|v| v["action"].as_str()) == Some("accept")
        });
        any && all
    });
    (!accepted).then(|| {
        ErrorObject::new(
            code::INVALID_REQUEST,
            "The upstream requires a URL elicitation, which was not accepted",
        )
    })
}
