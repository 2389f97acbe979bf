//! Discovery, lists, versions, `_meta` and errors: statelessness per request.

use serde_json::json;
use tern_protocol::error::code;

use crate::fixture::client;
use crate::schema::assert_valid;

#[tokio::test]
async fn discover_derives_capabilities_and_stamps_server_info() {
    let (c, _, _) = client();
    let r = c.send("server/discover", json!({})).await.outcome.unwrap();
    assert_valid("DiscoverResult", &r);
    assert_eq!(r["supportedVersions"], json!(["2026-07-28"]));
    let caps = &r["capabilities"];
    assert!(
        caps["tools"].is_object()
            && caps["prompts"].is_object()
            && caps["resources"].is_object()
            && caps["completions"].is_object()
    );
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "fixture"
    );
    assert!(r["ttlMs"].is_u64() && r["cacheScope"].is_string());
}

#[tokio::test]
async fn lists_are_cacheable_paginated_and_stable() {
    let counters = std::sync::Arc::new(crate::fixture::Counters::default());
    let server = crate::fixture::builder(&counters, crate::fixture::ManualClock::new())
        .page_size(5)
        .build()
        .unwrap();
    let c = tern_server::testing::TestClient::new(server);
    let mut names = Vec::new();
    let mut cursor = None;
    loop {
        let params = cursor.map_or_else(|| json!({}), |c: String| json!({"cursor": c}));
        let page = c.send("tools/list", params).await.outcome.unwrap();
        assert_valid("ListToolsResult", &page);
        names.extend(
            page["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned()),
        );
        match page.get("nextCursor").and_then(|c| c.as_str()) {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(names.len(), 40);
    assert_eq!(names[0], "greet");
    let bad = c
        .send("tools/list", json!({"cursor": "not-a-cursor"}))
        .await;
    assert_eq!(bad.error_code(), Some(code::INVALID_PARAMS));
    for (m, def) in [
        ("prompts/list", "ListPromptsResult"),
        ("resources/list", "ListResourcesResult"),
        ("resources/templates/list", "ListResourceTemplatesResult"),
    ] {
        assert_valid(def, &c.send(m, json!({})).await.outcome.unwrap());
    }
}

#[cfg(feature = "validate")]
#[tokio::test]
async fn tool_schemas_come_from_types_and_bad_arguments_are_tool_errors() {
    let (c, _, _) = client();
    let tools = c.send("tools/list", json!({})).await.outcome.unwrap();
    let find = |n: &str| {
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == n)
            .unwrap()
            .clone()
    };
    assert_eq!(
        find("no_args")["inputSchema"],
        json!({"type": "object", "additionalProperties": false})
    );
    let typed = find("typed");
    assert_eq!(typed["inputSchema"]["properties"]["count"]["maximum"], 10);
    assert_eq!(typed["inputSchema"]["required"], json!(["count"]));
    let ok = c.call_tool("typed", json!({"count": 3})).await;
    assert_eq!(ok.text(), Some("count 3"));
    for bad in [json!({}), json!({"count": 11}), json!({"count": "three"})] {
        let e = c.call_tool("typed", bad.clone()).await;
        let result = e.outcome.unwrap();
        assert_eq!(result["isError"], true, "{bad}");
        assert!(
            result["content"][0]["text"]
                .as_str()
                .unwrap()
                .starts_with("Invalid arguments for tool typed")
        );
        assert_valid("CallToolResult", &result);
    }
    let failing = c.call_tool("failing", json!({})).await.outcome.unwrap();
    assert_eq!(failing["isError"], true);
    assert_eq!(failing["content"][0]["text"], "the backend is down");
    let unknown = c.call_tool("nope", json!({})).await;
    assert_eq!(unknown.error_code(), Some(code::INVALID_PARAMS));
    assert!(
        unknown
            .outcome
            .unwrap_err()
            .message
            .contains("Unknown tool: nope")
    );
}

#[tokio::test]
async fn every_request_is_checked_on_its_own() {
    let (c, _, _) = client();
    for (params, want) in [
        (None, code::INVALID_PARAMS),
        (Some(json!({})), code::INVALID_PARAMS),
        (
            Some(json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}})),
            code::INVALID_PARAMS,
        ),
        (
            Some(json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})),
            code::INVALID_PARAMS,
        ),
        (
            Some(
                json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "v999.0.0", "io.modelcontextprotocol/clientCapabilities": {}}}),
            ),
            code::UNSUPPORTED_PROTOCOL_VERSION,
        ),
        (
            Some(
                json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/logLevel": "loud"}}),
            ),
            code::INVALID_PARAMS,
        ),
    ] {
        let e = c.send_raw("tools/list", params.clone()).await;
        assert_eq!(e.error_code(), Some(want), "{params:?}");
    }
    let v = c
        .send_raw("tools/call", Some(json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "1900-01-01", "io.modelcontextprotocol/clientCapabilities": {}}})))
        .await;
    let err = v.outcome.unwrap_err();
    assert_eq!(
        err.code,
        code::UNSUPPORTED_PROTOCOL_VERSION,
        "the version wins over other bad params"
    );
    assert_eq!(
        err.data.unwrap(),
        json!({"supported": ["2026-07-28"], "requested": "1900-01-01"})
    );
    // clientInfo is optional.
    let no_info = c
        .send_raw("tools/list", Some(json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}})))
        .await;
    assert!(no_info.outcome.is_ok());
}

#[tokio::test]
async fn unknown_and_removed_methods_are_method_not_found() {
    let (c, _, _) = client();
    for m in [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "tasks/result",
        "unknown/method",
        "tasks/get",
    ] {
        assert_eq!(
            c.send(m, json!({})).await.error_code(),
            Some(code::METHOD_NOT_FOUND),
            "{m}"
        );
    }
    async fn only_tool() -> &'static str {
        "x"
    }
    let tools_only = tern_server::testing::TestClient::new(
        tern_server::Server::builder("t", "1")
            .tool(tern_server::ToolDef::new("x", "x", only_tool))
            .build()
            .unwrap(),
    );
    for m in [
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/read",
        "completion/complete",
    ] {
        assert_eq!(
            tools_only.send(m, json!({})).await.error_code(),
            Some(code::METHOD_NOT_FOUND),
            "{m}"
        );
    }
    let caps = tools_only
        .send("server/discover", json!({}))
        .await
        .outcome
        .unwrap();
    assert!(
        caps["capabilities"].get("prompts").is_none()
            && caps["capabilities"].get("resources").is_none()
    );
}

#[tokio::test]
async fn resources_templates_prompts_and_completion() {
    let (c, _, _) = client();
    let item = c
        .send("resources/read", json!({"uri": "res://item/42"}))
        .await
        .outcome
        .unwrap();
    assert_eq!(item["contents"][0]["text"], "item 42");
    assert_valid("ReadResourceResult", &item);
    let missing = c
        .send("resources/read", json!({"uri": "res://nothing"}))
        .await
        .outcome
        .unwrap_err();
    assert_eq!(missing.code, code::INVALID_PARAMS);
    assert_eq!(missing.data.unwrap(), json!({"uri": "res://nothing"}));
    let no_arg = c.send("prompts/get", json!({"name": "ask_prompt"})).await;
    assert_eq!(no_arg.error_code(), Some(code::INVALID_PARAMS));
    let unknown = c.send("prompts/get", json!({"name": "nope"})).await;
    assert_eq!(unknown.error_code(), Some(code::INVALID_PARAMS));
    let prompts = c.send("prompts/list", json!({})).await.outcome.unwrap();
    assert_eq!(
        prompts["prompts"][0]["arguments"],
        // The argument's doc comment is its description.
        json!([{"name": "who", "description": "Who the prompt is for.", "required": true}])
    );
    let done = c
        .send("completion/complete", json!({"ref": {"type": "ref/prompt", "name": "ask_prompt"}, "argument": {"name": "who", "value": "b"}}))
        .await
        .outcome
        .unwrap();
    assert_eq!(done["completion"]["values"], json!(["bob"]));
    assert_valid("CompleteResult", &done);
}
