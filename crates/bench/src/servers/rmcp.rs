//! rmcp (the official Rust SDK): the same tools with its tool router and
//! macros, stateless Streamable HTTP with JSON responses, and MRTR with its
//! HMAC `requestState` codec (bound to the tool and its arguments, 10-minute
//! expiry, as tern's sealing is).
//!
//! The router is built once and shared (`Arc`): the service factory, called
//! for every stateless request, then only clones a pointer. That is rmcp at
//! its cheapest, not its default macro path (which rebuilds the router).

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::{InputResponses, RequestState};
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, ElicitRequest, ElicitRequestParams,
    InputRequest, InputRequests, InputRequiredResult, ProgressNotificationParam, ProtocolVersion,
    RequestMetaObject, RequestStateCodec, SealOptions, ServerCapabilities, ServerConfig,
};
use rmcp::service::{Peer, RoleServer};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde_json::json;

use crate::workload::{ConfirmArgs, EchoArgs, PayloadArgs, Report, SlowArgs, confirmed, report};

/// The state's lifetime, tern's default.
const STATE_TTL: Duration = Duration::from_secs(600);

/// The bench server.
#[derive(Clone)]
pub(crate) struct Bench {
    tool_router: Arc<ToolRouter<Self>>,
    codec: Arc<RequestStateCodec>,
}

impl std::fmt::Debug for Bench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bench(..)")
    }
}

fn elicitation() -> Result<InputRequest, ErrorData> {
    let schema = serde_json::from_value(json!({
        "type": "object",
        "properties": {"ok": {"type": "boolean", "title": "Go ahead"}},
        "required": ["ok"],
    }))
    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    Ok(InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: "Proceed?".into(),
            requested_schema: schema,
        },
    )))
}

#[tool_router]
impl Bench {
    #[tool(description = "Echoes")]
    async fn echo(&self, Parameters(a): Parameters<EchoArgs>) -> String {
        a.text
    }

    #[tool(description = "Answers 4 KiB of structure")]
    async fn payload(&self, Parameters(a): Parameters<PayloadArgs>) -> Json<Report> {
        Json(report(a.data.len()))
    }

    #[tool(description = "Asks once, then answers")]
    async fn confirm(
        &self,
        Parameters(a): Parameters<ConfirmArgs>,
        RequestState(state): RequestState,
        InputResponses(responses): InputResponses,
    ) -> Result<CallToolResponse, ErrorData> {
        // The state is bound to the tool and its arguments, like tern's.
        let bound = format!("confirm|{}", a.item);
        let Some(state) = state else {
            let sealed = self.codec.seal_json_with(
                &json!({"round": 1}),
                &SealOptions::new()
                    .associated_data(bound.as_bytes())
                    .ttl(STATE_TTL),
            );
            let sealed = sealed.map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            let mut requests = InputRequests::new();
            requests.insert("confirm".into(), elicitation()?);
            return Ok(InputRequiredResult::new(Some(requests), Some(sealed)).into());
        };
        let opened: serde_json::Value = self
            .codec
            .open_json_with(&state, bound.as_bytes())
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let accepted = opened["round"] == 1
            && responses
                .as_ref()
                .and_then(|r| r.get("confirm"))
                .is_some_and(|r| r["action"] == "accept" && r["content"]["ok"] == true);
        let text = if accepted {
            confirmed(&a.item)
        } else {
            "cancelled".to_owned()
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }

    #[tool(description = "Reports progress every second")]
    async fn slow(
        &self,
        Parameters(a): Parameters<SlowArgs>,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> String {
        let total = f64::from(a.seconds);
        for i in 0..a.seconds {
            if let Some(token) = meta.get_progress_token() {
                let mut params = ProgressNotificationParam::new(token, f64::from(i));
                params.total = Some(total);
                // A failed notification means the client left; keep going
                // like tern's handler would until cancelled.
                drop(peer.notify_progress(params).await);
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        "done".to_owned()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Bench {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.protocol_version = ProtocolVersion::V_2026_07_28;
        info
    }
}

impl Bench {
    fn new() -> Self {
        let mut key = [0_u8; 32];
        for (i, b) in key.iter_mut().enumerate() {
            // A per-run key is enough for a benchmark; rmcp only asks for 32 bytes.
            *b = u8::try_from(i).unwrap_or(0) ^ 0x5c;
        }
        let codec = match RequestStateCodec::try_new(key.to_vec()) {
            Ok(codec) => codec,
            Err(e) => panic!("rmcp codec: {e}"),
        };
        Self {
            tool_router: Arc::new(Self::tool_router()),
            codec: Arc::new(codec),
        }
    }
}

/// Serves stateless Streamable HTTP with JSON responses at `/mcp`.
pub(crate) async fn http(listener: tokio::net::TcpListener) -> std::io::Result<()> {
    let prototype = Bench::new();
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_stateless_protocol_metadata_required(true);
    let service = StreamableHttpService::new(
        move || Ok(prototype.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let app = axum::Router::new().route_service("/mcp", service);
    axum::serve(listener, app).await
}

/// Serves on standard input and output until end of input.
pub(crate) async fn stdio() -> std::io::Result<()> {
    let running = Bench::new()
        .serve(rmcp::transport::stdio())
        .await
        .map_err(std::io::Error::other)?;
    running.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}
